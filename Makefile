# Two commands do all the set-up on a fresh machine with python3 (3.11+) and make:
#   make demo   - the main job: an MCP client session against the guard, verdicts in a table
#   make test   - lint, type-check and every test (what CI runs)
# and one for the edit-test loop:
#   make check  - the fast tier only: no subprocess servers, upstreams or race loops
#                 (tiers and markers: docs/development.md; PYTEST_ARGS="-x" to stop early,
#                 JOBS=0 to run in this process, e.g. for a debugger)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Test workers (pytest-xdist): one per core of a 2-core machine, which keeps the fast tier
# within a minute and the whole suite within 6 minutes there (docs/development.md).
JOBS ?= 2
PYTEST_ARGS ?=

.PHONY: demo check test lint typecheck pytest bench clean

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lingyi demo

check: $(STAMP)
	$(BIN)/pytest -m "not slow" -n $(JOBS) $(PYTEST_ARGS)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -n $(JOBS) $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_verify.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
