"""lingyi's logging: structlog loads with the first event, and still writes to stderr only.

``lingyi._logging`` defers importing structlog (and the asyncio it pulls in) until something is
logged; these tests pin that deferring changes nothing a user or the MCP protocol sees: the
configured level holds, events go to stderr and never to stdout, whether structlog was loaded
before ``configure`` or after it. Each case runs in a fresh interpreter (this one has structlog
loaded already).
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# (verbose, structlog loaded before configure?, events logged, expected on stderr, not there)
CASES = [
    (False, False, [("warning", "警告 kb gone")], ["警告 kb gone"], []),
    (False, True, [("warning", "warn first")], ["warn first"], []),
    (False, False, [("debug", "调试 hidden"), ("error", "error shown")], ["error shown"],
     ["调试 hidden"]),
    (True, False, [("debug", "debug shown 调试")], ["debug shown 调试"], []),
    (True, True, [("debug", "debug shown")], ["debug shown"], []),
]  # fmt: skip

PROBE = """
import sys
preload, verbose, events = {preload!r}, {verbose!r}, {events!r}
if preload:
    import structlog
from lingyi import _logging
log = _logging.get_logger(__name__)
assert "structlog" in sys.modules or not preload
_logging.configure(verbose=verbose)
loaded_before_event = "structlog" in sys.modules
for level, text in events:
    getattr(log, level)(text, key="value")
print("loaded before event:", loaded_before_event)
"""


@pytest.mark.parametrize(("verbose", "preload", "events", "shown", "hidden"), CASES)
def test_events_reach_stderr_at_the_configured_level(
    verbose: bool,
    preload: bool,
    events: list[tuple[str, str]],
    shown: list[str],
    hidden: list[str],
) -> None:
    """Whether structlog was loaded before ``configure`` or only by the first event, an event
    at or above the level is written to stderr (with its key), one below it nowhere, and stdout
    carries nothing of either (zh and en events)."""
    code = PROBE.format(preload=preload, verbose=verbose, events=events)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loaded before event: {preload}"
    for text in shown:
        assert text in done.stderr and "key=value" in done.stderr
    for _level, text in events:
        assert text not in done.stdout
    for text in hidden:
        assert text not in done.stderr


def _imports_structlog(path: str) -> bool:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(n == "structlog" or n.startswith("structlog.") for n in names):
            return True
    return False


def test_only_the_logging_module_imports_structlog() -> None:
    """Every lingyi module takes its logger from ``lingyi._logging.get_logger``: a module
    importing structlog itself would load it (and asyncio) at start, and would log through a
    structlog that ``configure`` has not set up yet (its default writes to stdout)."""
    sources = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "src").rglob("*.py"))
    offenders = [p for p in sources if p != "src/lingyi/_logging.py" and _imports_structlog(p)]
    assert offenders == []
    assert _imports_structlog("src/lingyi/_logging.py")  # the other side: the probe sees it


@pytest.mark.parametrize(
    ("verbose", "level", "loads"),
    [
        (False, "debug", False),
        (False, "info", False),
        (False, "warning", True),
        (True, "debug", True),
    ],
)
def test_an_event_below_the_level_does_not_load_structlog(
    verbose: bool, level: str, loads: bool
) -> None:
    """An event the configured level filters out is dropped without importing structlog (a
    KB's info line must not cost a verify 50 ms); one at or above the level loads it."""
    code = (
        "import sys\nfrom lingyi import _logging\n"
        f"_logging.configure(verbose={verbose})\n"
        f"_logging.get_logger().{level}('kb indexed 知识库', documents=3)\n"
        "print('structlog' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(loads)
    assert ("kb indexed 知识库" in done.stderr) == loads


# (what the embedding program did first, event level, text, on stderr?, on stdout?)
LIBRARY_CASES = [
    ("", "warning", "库 warning 未配置", True, False),
    ("", "error", "library error, nothing configured", True, False),
    ("", "debug", "库 debug hidden", False, False),
    ("own", "info", "app's own structlog 配置", False, True),
]  # fmt: skip

LIBRARY_PROBE = """
import structlog, sys
if {setup!r} == "own":  # the embedding program's own structlog set-up: to stdout, from INFO
    structlog.configure(
        processors=[structlog.processors.KeyValueRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(20),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
    )
from lingyi import _logging
getattr(_logging.get_logger(), {level!r})({text!r})
"""


@pytest.mark.parametrize(("setup", "level", "text", "err", "out"), LIBRARY_CASES)
def test_lingyi_as_a_library_logs_to_stderr_unless_the_program_set_up_structlog(
    setup: str, level: str, text: str, err: bool, out: bool
) -> None:
    """Used as a library (no ``configure``), lingyi's warnings go to stderr at WARNING, never
    to stdout where structlog's own default would put them (a program's stdout may be a
    protocol); a program that configured structlog itself keeps its own set-up."""
    code = LIBRARY_PROBE.format(setup=setup, level=level, text=text)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (text in done.stderr) == err
    assert (text in done.stdout) == out
