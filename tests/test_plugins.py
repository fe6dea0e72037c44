"""Checks from other packages, declared under the ``lingyi.checks`` entry point."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lingyi.checks import REGISTRY, load_plugins
from lingyi.cli import main
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import load_policies

PLUGIN = '''
from lingyi.checks import CheckContext, CheckParams, Outcome, fail, ok, register


class Words(CheckParams):
    words: list[str]


@register("acme.no_words", Words)
def no_words(ctx: CheckContext, params: Words) -> Outcome:
    """Refuse content that contains any of the configured words."""
    found = [w for w in params.words if w in ctx.assertion.content]
    return fail(f"forbidden: {found}", "rephrase") if found else ok("clean")
'''


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A real installed distribution (dist-info with entry_points.txt) on sys.path."""
    (tmp_path / "acme_checks.py").write_text(PLUGIN, encoding="utf-8")
    info = tmp_path / "acme_checks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-checks\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[lingyi.checks]\nacme = acme_checks\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("acme_checks", None)


@pytest.mark.parametrize(
    ("content", "decision"), [("the secret plan", "rejected"), ("the public plan", "approved")]
)
def test_a_plugin_check_is_usable_from_a_policy(
    installed_plugin: None, tmp_path: Path, content: str, decision: str
) -> None:
    """An entry-point check registers on load and a policy file can name it."""
    load_plugins()
    assert "acme.no_words" in REGISTRY
    folder = tmp_path / "validators"
    folder.mkdir()
    (folder / "m.toml").write_text(
        'member = "m"\nname = "M"\n[[checks]]\ncheck = "acme.no_words"\nstage = "boundary"\n'
        'params = { words = ["secret"] }\n',
        encoding="utf-8",
    )
    layer = ConstraintLayer(
        load_policies(folder, require_shared=False), MemoryCouncil(), language="en"
    )
    result = layer.verify(Assertion(member="m", type="fact", content=content), Ledger())
    assert result.decision == decision


def test_policy_checks_lists_a_plugin_check_and_where_it_comes_from(
    installed_plugin: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lingyi policy checks --json` lists an entry-point check with its module, its doc and
    its parameters' schema, beside the built-in ones."""
    assert main(["policy", "checks", "--json"]) == 0
    by_code = {c["code"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    acme = by_code["acme.no_words"]
    assert acme["module"] == "acme_checks" and acme["stage"] is None and acme["used_by"] == []
    assert acme["doc"].startswith("Refuse content") and acme["params"]["required"] == ["words"]
    assert by_code["boundary.medical"]["module"] == "lingyi.checks.boundary"
