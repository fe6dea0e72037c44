"""Policies that weaken the guard are refused at start, not only on reload (issue 24, item 8).

The rules a reload applies (a shared or boundary check dropped, softened, narrowed, put in
shadow or pointed at an empty lexicon; an ``on_error`` turned from fail to pass; a
destructive tool no longer destructive; an approval no longer required; a judge rule taken
away) are applied at start against the shipped policies: ``lingyi verify``, ``lingyi serve``
and ``lingyi policy check`` refuse such a folder with the file and key, unless the config
names the weakened check in ``[policies] allow_weakening`` on purpose.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lingyi.cli import main
from lingyi.errors import PolicyError
from lingyi.policy import PolicyStore, load_policies
from lingyi.policy._weakening import weakenings
from tests.conftest import SHIPPED_POLICIES

MEDICAL = {
    "zh": "失眠的话每晚吃两片安眠药就好",
    "en": "For insomnia just take two sleeping pills every night",
}
REPLACE = '\n[[checks]]\ncheck = "boundary.medical"\nstage = "boundary"\n'
DISABLE = ('member = "lingyi"\n', 'member = "lingyi"\ndisable = ["boundary.medical"]\n')
EMPTY = 'description = "nothing"\n[groups]\n'

# (name, edits: file -> (old, new) or a whole new file, the file and key the error names,
#  the check named in allow_weakening that lets it start, words of the error)
WEAKENED = [
    ("dropped", {"lingyi.toml": DISABLE}, ("lingyi.toml", "disable"), "boundary.medical", "drop"),
    ("warn", {"lingyi.toml": DISABLE, "+lingyi.toml": REPLACE + 'on_fail = "warn"\n'},
     ("lingyi.toml", "checks"), "boundary.medical", "soften"),
    ("narrowed", {"lingyi.toml": DISABLE, "+lingyi.toml": REPLACE + 'types = ["conclusion"]\n'},
     ("lingyi.toml", "checks"), "boundary.medical", "narrow"),
    ("empty lexicon", {"lingyi.toml": DISABLE, "lexicons/empty.toml": EMPTY,
                       "+lingyi.toml": REPLACE + 'params = { lexicon = "lexicons/empty.toml" }\n'},
     ("lingyi.toml", "checks"), "boundary.medical", "empty lexicon"),
    ("shadow", {"_common.toml": ('check = "boundary.medical"\n', 'check = "boundary.medical"\nmode = "shadow"\n')},
     ("_common.toml", "checks"), "boundary.medical", "soften"),
]  # fmt: skip
_FLOW = (SHIPPED_POLICIES / "lingflow.toml").read_text(encoding="utf-8")
PREFLIGHT = _FLOW[
    _FLOW.index('[[judge]]\nkind = "destructive"') : _FLOW.index("max_revisions = 1\n") + 18
]
OTHER = [
    ("on_error", {"_common.toml": ('on_error = "fail"   # trace', 'on_error = "pass"   # trace')},
     ("_common.toml", "checks"), "evidence.id_patterns", "on_error fail → pass"),
    ("not destructive", {"lingflow.toml": [("destructive = true\n", "destructive = false\n"), (PREFLIGHT, "")]},
     ("lingflow.toml", "tools.git_push.destructive"), "tools.git_push,judge", "no longer destructive"),
    ("no pre-flight", {"lingflow.toml": (PREFLIGHT, "")}, ("lingflow.toml", "judge[0]"), "judge",
     "remove the judge rule"),
]  # fmt: skip


def weakened(root: Path, edits: dict[str, object]) -> Path:
    """A copy of the shipped policies with ``edits``: (old, new) replaced once, a string a
    new file, ``+name`` text appended to that file."""
    folder = root / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    for name, edit in edits.items():
        path = folder / name.lstrip("+")
        if name.startswith("+"):
            path.write_text(path.read_text(encoding="utf-8") + str(edit), encoding="utf-8")
        elif isinstance(edit, tuple | list):
            text = path.read_text(encoding="utf-8")
            for old, new in edit if isinstance(edit, list) else [edit]:
                assert old in text, (name, old)
                text = text.replace(old, new, 1)
            path.write_text(text, encoding="utf-8")
        else:
            path.write_text(str(edit), encoding="utf-8")
    return folder


def config_for(root: Path, folder: Path, language: str, allow: str = "") -> Path:
    shipped = SHIPPED_POLICIES.parent
    config = root / "lingyi.toml"
    allowed = f"\n[policies]\nallow_weakening = [{allow}]\n" if allow else ""
    config.write_text(
        f'language = "{language}"\n[paths]\nvalidators = "{folder.as_posix()}"\n'
        f'knowledge_base = "{(shipped / "kb").as_posix()}"\nlog = "log.jsonl"\n'
        f'council = "council.jsonl"\n' + allowed,
        encoding="utf-8",
    )
    return config


def verify(config: Path, content: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``lingyi verify --json``: its exit code, the decision (empty: none) and all it wrote."""
    args = ["--config", str(config), "verify", "--json", "--member", "lingyi"]
    code = main([*args, "--content", content])
    out, err = capsys.readouterr()
    decision = json.loads(out).get("decision", "") if out.strip() else ""
    return code, str(decision), out + err


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_shipped_policies_reject_the_medical_advice(
    tmp_path: Path, lang: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The baseline: the shipped policies start, and the medical advice is rejected."""
    code, decision, text = verify(
        config_for(tmp_path, SHIPPED_POLICIES, lang), MEDICAL[lang], capsys
    )
    assert (code, decision) == (1, "rejected") and "boundary.medical" in text, text


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize(("name", "edits", "where", "allow", "words"), WEAKENED)
def test_a_weakened_policy_is_refused_at_start_unless_allowed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    lang: str,
    name: str,
    edits: dict[str, object],
    where: tuple[str, str],
    allow: str,
    words: str,
) -> None:
    """verify exits 2 naming the file and key (the medical advice never gets approved), and
    policy check fails the same; naming the check in allow_weakening lets it start."""
    folder = weakened(tmp_path, edits)
    config = config_for(tmp_path, folder, lang)
    code, decision, text = verify(config, MEDICAL[lang], capsys)
    assert (code, decision) == (2, ""), text
    assert f"{where[0]}: {where[1]}" in text and words in text and "allow_weakening" in text
    assert main(["--config", str(config), "policy", "check"]) == 2
    assert f"{where[0]}: {where[1]}" in capsys.readouterr().err
    allowed = config_for(tmp_path, folder, lang, f'"{allow}"')
    code, decision, text = verify(allowed, MEDICAL[lang], capsys)
    assert code != 2 and decision, text


@pytest.mark.parametrize(("name", "edits", "where", "allow", "words"), OTHER)
def test_other_weakenings_are_refused_at_start(
    tmp_path: Path,
    name: str,
    edits: dict[str, object],
    where: tuple[str, str],
    allow: str,
    words: str,
) -> None:
    """An on_error turned to pass, a destructive tool made harmless, a judge rule moved off
    a destructive tool: the store refuses to start on each (file, key), unless allowed."""
    folder = weakened(tmp_path, edits)
    with pytest.raises(PolicyError) as caught:
        PolicyStore(folder, baseline=SHIPPED_POLICIES)
    assert (Path(caught.value.path).name, caught.value.key) == where, caught.value
    assert words in caught.value.message
    assert str(folder) in caught.value.path  # the deployment's file, not the shipped one
    PolicyStore(folder, baseline=SHIPPED_POLICIES, allow_weakening=allow.split(","))


def test_an_approval_no_longer_required_is_a_weakening(tmp_path: Path) -> None:
    """approval = "required" turned to "never" (against a team's own baseline, and on reload)."""
    required = weakened(
        tmp_path / "a", {"lingflow.toml": ("[tools.git_commit]\n", '[tools.git_commit]\napproval = "required"\n')}
    )  # fmt: skip
    found = weakenings(load_policies(required), load_policies(SHIPPED_POLICIES))
    assert [(Path(e.path).name, e.key) for e in found] == [
        ("lingflow.toml", "tools.git_commit.approval")
    ]
    with pytest.raises(PolicyError, match="approval required → never"):
        PolicyStore(SHIPPED_POLICIES, baseline=required)


def test_the_shipped_folder_and_a_stricter_one_start(tmp_path: Path) -> None:
    """No false alarm: the shipped policies, and a copy made stricter, start."""
    PolicyStore(SHIPPED_POLICIES, baseline=SHIPPED_POLICIES)
    stricter = weakened(
        tmp_path, {"lingflow.toml": ("destructive = false\n", "destructive = true\n")}
    )
    PolicyStore(stricter, baseline=SHIPPED_POLICIES)
