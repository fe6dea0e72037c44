"""The generated references in docs/ match the code they describe.

``docs/configuration.md`` comes from the config models and ``docs/checks.md`` from the check
registry and the shipped policies; ``src/lingyi/server/output_schemas.json`` (the tools' output
schemas the server publishes without deriving them at start) from the tools' result models.
When a key, a default, a check, a parameter or a result model changes, run
``python tests/test_docs.py`` to rewrite them and commit the result with the change.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from lingyi.checks import REGISTRY, load_builtin_checks
from lingyi.cli import main
from lingyi.cli._reference import (
    check_entries,
    checks_markdown,
    config_markdown,
    config_tables,
    config_template,
    hand_written,
)
from lingyi.config import ConfigFile, defaults_dir
from lingyi.policy import load_policies
from lingyi.server.tools import schemas_file

ROOT = Path(__file__).resolve().parent.parent  # not from tests.conftest: this file also runs alone
SHIPPED_POLICIES = defaults_dir() / "validators"
CONFIG_DOC = ROOT / "docs" / "configuration.md"
CHECKS_DOC = ROOT / "docs" / "checks.md"
SCHEMAS = ROOT / "src" / "lingyi" / "server" / "output_schemas.json"
REGENERATE = "stale: run `python tests/test_docs.py` and commit the result"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def generated() -> dict[Path, str]:
    """Each generated document and its text, from the code as it is now."""
    entries = check_entries(load_policies(SHIPPED_POLICIES), builtin_only=True)
    return {
        CONFIG_DOC: config_markdown(),
        CHECKS_DOC: checks_markdown(entries, hand_written(_read(CHECKS_DOC))),
        SCHEMAS: schemas_file(),
    }


@pytest.mark.parametrize("doc", [CONFIG_DOC, CHECKS_DOC, SCHEMAS], ids=lambda p: p.name)
def test_generated_docs_are_current(doc: Path) -> None:
    """A document in docs/ (and the shipped output schemas) is exactly what the code generates
    today: a result model changed without regenerating fails here."""
    assert doc.read_text(encoding="utf-8") == generated()[doc], f"{doc.name} is {REGENERATE}"


def _all_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key path of a model, nested tables included (``server.tokens.name``)."""
    keys = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        inner = info.annotation
        args = getattr(inner, "__args__", ())
        sub = next(
            (a for a in (inner, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        keys += _all_keys(sub, path + ".") if sub else [path]
    return keys


def test_the_config_reference_lists_every_key() -> None:
    """Every key the config accepts has a row (type, default, description) in the reference."""
    documented = {
        f"{t.name.replace('.NAME', '')}.{k.name}".lstrip("."): k
        for t in config_tables()
        for k in t.keys
    }
    assert sorted(documented) == sorted(_all_keys(ConfigFile))
    assert all(k.description for k in documented.values()), "a key without a description"
    text = CONFIG_DOC.read_text(encoding="utf-8")
    assert all(f"| `{k.name}` |" in text for k in documented.values())


def test_the_init_template_holds_every_key_and_loads() -> None:
    """The config `lingyi init` writes names every key and parses to what it sets."""
    text = config_template({"paths.log": "l.jsonl"}, {"data_sources.s": {"path": "s.csv"}})
    uncommented = "\n".join(line.removeprefix("# ") for line in text.splitlines())
    for key in _all_keys(ConfigFile):
        assert f"{key.rpartition('.')[2]} = " in uncommented, key
    parsed = ConfigFile.model_validate(tomllib.loads(text))
    assert parsed.paths.log == "l.jsonl" and parsed.data_sources["s"].path == "s.csv"
    assert parsed.model_dump(exclude={"paths", "data_sources"}) == ConfigFile().model_dump(
        exclude={"paths", "data_sources"}
    )


def test_policy_checks_json_describes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    """`policy checks --json`: each check's code, stage, doc and parameters as JSON Schema."""
    config = str(defaults_dir() / "lingyi.toml")
    assert main(["--config", config, "policy", "checks", "--json"]) == 0
    by_code = {c["code"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    load_builtin_checks()
    assert set(by_code) >= set(REGISTRY)
    medical = by_code["boundary.medical"]
    assert medical["stage"] == "boundary"  # medical advice is out of bounds for every member
    assert medical["used_by"] == ["lingflow", "lingresearch", "lingyi", "lingzhi"]
    assert medical["params"]["properties"]["lexicon"]["default"] == "lexicons/medical.toml"
    assert by_code["tool.owned"]["always"] and by_code["tool.owned"]["stage"] == "tool_validation"
    assert by_code["pre.content"]["params"]["properties"]["max_length"]["default"] == 4000


if __name__ == "__main__":
    for path, text in generated().items():
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {path}\n")
