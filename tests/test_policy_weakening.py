"""Policies that refuse to weaken silently: each weakening is refused, naming file and key.

The attacks (each used to load, and weaken the guard without a word): a second file for
灵知 (even a hidden one) replaced its policy; a tool declared by two members went to the last
(and the MCP tool then ran as that member); a check in the judge stage never ran; a folder
without the shared file dropped every shared check; an invalid regex failed only when a call
reached it; an editor's lock file made every reload fail and ``serve`` refuse to start; and a
live reload could drop a shared or boundary check. Real policy folders in tmp_path, real
stores, real files; the shipped policies are the starting point.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lingyi.errors import PolicyError
from lingyi.models import Assertion, OnFail
from lingyi.policy import PolicyStore, load_policies
from lingyi.policy._load import policy_errors
from tests.conftest import SHIPPED_POLICIES

SCRIBE = 'member = "scribe"\nname = "Scribe"\n'
CHECK = '[[checks]]\ncheck = "boundary.medical"\nstage = "{stage}"\n'


def folder_with(tmp_path: Path, files: dict[str, str], drop: tuple[str, ...] = ()) -> Path:
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    for name in drop:
        (folder / name).unlink()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _zhi() -> str:
    return (SHIPPED_POLICIES / "lingzhi.toml").read_text(encoding="utf-8")


WEAKENINGS = [
    # (files added or replaced, the file and key of the error, words of its message)
    ({"lingzhi2.toml": _zhi().replace('"boundary"', '"fact_verification"')},
     ("lingzhi2.toml", "member"), "already the member of"),
    ({"scribe.toml": SCRIBE + 'aliases = ["灵知"]\n'}, ("scribe.toml", "aliases"), "lingzhi.toml"),
    ({"scribe.toml": SCRIBE + "[tools.git_push]\n"}, ("scribe.toml", "tools.git_push"), "lingflow.toml"),
    ({"scribe.toml": SCRIBE + CHECK.format(stage="judge")}, ("scribe.toml", "checks[0].stage"), "runs no policy check"),
    ({"scribe.toml": SCRIBE + CHECK.format(stage="boundary") + "types = []\n"}, ("scribe.toml", "checks[0].types"), "never run"),
    ({"_extra.toml": CHECK.format(stage="boundary") + 'tools = ["gti_push"]\n'}, ("_extra.toml", "checks[0].tools"), "no member's tool"),
    ({"scribe.toml": SCRIBE + '[tools.git_tag.args.name]\npattern = "[a-z"\n'},
     ("scribe.toml", "tools.git_tag.args.name.pattern"), "not a valid regular expression"),
    ({"_extra.toml": '[[checks]]\ncheck = "evidence.id_patterns"\nstage = "fact_verification"\nparams = { patterns = { ticket = "(JIRA-" } }\n'},
     ("_extra.toml", "checks[0].params.patterns.ticket"), "not a valid regular expression"),
]  # fmt: skip


@pytest.mark.parametrize(("files", "where", "words"), WEAKENINGS)
def test_each_weakening_folder_is_refused_naming_file_and_key(
    tmp_path: Path, files: dict[str, str], where: tuple[str, str], words: str
) -> None:
    """A duplicate member or alias, a second owner of a tool, a check that never runs and a
    bad regex are each one error on the file and key that did it (naming the other file)."""
    errors = policy_errors(folder_with(tmp_path, files))
    assert [(Path(e.path).name, e.key) for e in errors] == [where]
    assert words in errors[0].message
    with pytest.raises(PolicyError):
        load_policies(folder_with(tmp_path / "again", files))


def test_a_folder_without_a_shared_file_is_refused_unless_the_config_says_so(
    tmp_path: Path,
) -> None:
    """No _*.toml: an error on the folder (every shared check would be gone); the config's
    ``require_shared = false`` lets a deployment that means it load."""
    folder = folder_with(tmp_path, {}, drop=("_common.toml",))
    errors = policy_errors(folder)
    assert [(e.path, e.key) for e in errors] == [(str(folder), "-")]
    assert "no shared policy file" in errors[0].message
    assert "pre.content" not in {
        c.check for c in load_policies(folder, require_shared=False).members["lingzhi"].checks
    }


@pytest.mark.parametrize("name", [".lingzhi.toml", "#lingzhi.toml", ".#lingzhi.toml"])
def test_hidden_and_editor_files_are_ignored(tmp_path: Path, name: str) -> None:
    """A hidden second 灵知 (or an editor's backup or lock) is not read: 灵知 keeps its own file
    and its boundary checks; a lock that is a link to nothing does not break the load."""
    folder = folder_with(tmp_path, {})
    if name == ".#lingzhi.toml":  # what Emacs leaves: a link to a target that does not exist
        os.symlink("user@host.1234:1700000000", folder / name)
    else:
        (folder / name).write_text(_zhi().replace('"boundary"', '"fact_verification"'), "utf-8")
    zhi = load_policies(folder).members["lingzhi"]
    assert Path(zhi.source).name == "lingzhi.toml"
    assert "boundary.medical" in {c.check for c in zhi.checks if c.stage == "boundary"}


def test_an_editor_lock_does_not_break_reloads(tmp_path: Path) -> None:
    """A lock file appearing beside the policies is not a change that fails every second: the
    store keeps serving, and a real edit afterwards still reloads."""
    folder = folder_with(tmp_path, {})
    store = PolicyStore(folder, check_interval_s=0)
    before = store.current().version
    os.symlink("user@host.1234:1700000000", folder / ".#lingzhi.toml")
    assert store.current().version == before and store.refused == []
    _edit(folder / "scribe.toml", SCRIBE)
    assert "scribe" in store.current().members


def _edit(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)  # a new mtime on a coarse clock


RELOADS = [
    # (file, its new text (None: deleted), file and key of the refusal, words)
    ("lingzhi.toml", lambda t: t.replace('disable = ["', 'disable = ["evidence.cited_ids_exist", "'),
     ("lingzhi.toml", "disable"), "drop the shared check 'evidence.cited_ids_exist' of lingzhi"),
    ("_common.toml", lambda t: t.replace('check = "evidence.urls_recorded"', 'check = "pre.content"'),
     ("_common.toml", "checks"), "'evidence.urls_recorded' of lingflow, lingresearch, lingyi, lingzhi"),
    ("lingzhi.toml", lambda t: t.replace('"domain.scope"\nstage = "boundary"', '"domain.scope"\nstage = "fact_verification"'),
     ("lingzhi.toml", "checks"), "drop the boundary check 'domain.scope' of lingzhi"),
    ("lingzhi.toml", lambda t: t.replace('on_fail = "reject"', 'on_fail = "warn"', 1),
     ("lingzhi.toml", "checks"), "soften the shared check 'boundary.medical'"),
    ("lingzhi.toml", lambda t: t + '\n[[checks]]\ncheck = "inference.labelled"\nstage = "boundary"\n', None, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "change", "where", "words"), RELOADS)
def test_a_reload_that_would_weaken_the_guard_is_refused(
    tmp_path: Path, name: str, change: object, where: tuple[str, str] | None, words: str | None
) -> None:
    """Dropping a shared or boundary check, or softening one, while the server runs is refused
    and logged with file and key; the last good policies stay. A change that weakens nothing
    (one more check) reloads."""
    folder = folder_with(tmp_path, {})
    store = PolicyStore(folder, check_interval_s=0)
    before = store.current()
    text = (folder / name).read_text(encoding="utf-8")
    _edit(folder / name, change(text))  # type: ignore[operator]
    now = store.current()
    if where is None:
        assert now.version != before.version and store.refused == []
        return
    assert now is before
    assert [(Path(e.path).name, e.key) for e in store.refused] == [where]
    assert words in store.refused[0].message and "restart" in store.refused[0].message


def test_a_reload_that_moves_a_tool_is_refused(tmp_path: Path) -> None:
    """generate_audit_report moved from 灵通 to 灵研 in one save: refused on the new owner's
    file and key, and a new member added later still reloads."""
    folder = folder_with(tmp_path, {})
    store = PolicyStore(folder, check_interval_s=0)
    before = store.current()
    flow, research = folder / "lingflow.toml", folder / "lingresearch.toml"
    head, tool = flow.read_text(encoding="utf-8").split("[tools.generate_audit_report]")
    body, rest = tool.split("\n\n", 1)
    _edit(flow, head + rest)
    _edit(research, research.read_text(encoding="utf-8") + "\n[tools.generate_audit_report]" + body)
    assert store.current() is before
    refused = [(Path(e.path).name, e.key) for e in store.refused]
    assert refused == [("lingresearch.toml", "tools.generate_audit_report")]
    _edit(flow, head + "[tools.generate_audit_report]" + tool)
    _edit(
        research, research.read_text(encoding="utf-8").split("\n[tools.generate_audit_report]")[0]
    )
    _edit(folder / "scribe.toml", SCRIBE)
    assert "scribe" in store.current().members and store.refused == []


def test_a_reload_without_the_shared_file_keeps_the_shared_checks(tmp_path: Path) -> None:
    """_common.toml deleted while serving: the reload fails, and a fabricated evidence id is
    still rejected by the shared check the old policies hold."""
    from lingyi.council import MemoryCouncil
    from lingyi.layer import ConstraintLayer
    from lingyi.ledger import Ledger

    folder = folder_with(tmp_path, {})
    store = PolicyStore(folder, check_interval_s=0)
    layer = ConstraintLayer(store, MemoryCouncil(), language="en")
    (folder / "_common.toml").unlink()
    cited = Assertion(member="lingzhi", type="fact", content="见 kb:none", evidence_ids=["kb:none"])
    result = layer.verify(cited, Ledger())
    assert result.decision == "rejected"
    assert "evidence.cited_ids_exist" in {c.code for c in result.checks if c.blocking}


SUBJECT_TYPES = 'types = ["fact", "action", "communication", "answer"]'
CONFIDENCE = 'no source backs"\nmin = 0.7'
DRIFT = '1 = all of it"\nmax = 0.3'
RUBRIC_ZH = "The push fits the work"
NARROWINGS = [
    # (file, its change, the (file, key) of each refusal, words of the first); where None: the
    # change tightens or keeps the guard and reloads
    ("_common.toml", lambda t: t.replace(SUBJECT_TYPES, 'types = ["fact", "action", "communication"]'),
     [("_common.toml", "checks")], "narrow the shared check 'evidence.subject_supported' (no longer on answer)"),
    ("_common.toml", lambda t: t.replace('check = "boundary.medical"\nstage = "boundary"\n', 'check = "boundary.medical"\nstage = "boundary"\ntools = ["git_push"]\n'),
     [("_common.toml", "checks")], "narrow the shared check 'boundary.medical' (no longer on fact; action; communication"),
    ("lingzhi.toml", lambda t: t.replace('types = ["action"]\ntools = ["search_knowledge"]', 'types = ["action"]\ntools = ["search_knowledge"]\nmode = "enforce"'),
     None, None),
    ("lingzhi.toml", lambda t: t.replace('"boundary.medical"\nstage = "boundary"\n', '"boundary.medical"\nstage = "boundary"\ntypes = ["fact"]\n'),
     [("lingzhi.toml", "checks")], "narrow the shared check 'boundary.medical' (no longer on action; communication;"),
    ("_common.toml", lambda t: t.replace(SUBJECT_TYPES, 'types = ["fact", "action", "communication", "answer", "conclusion"]'),
     None, None),
    ("_common.toml", lambda t: t.replace(CONFIDENCE, CONFIDENCE[:-3] + "0.5"),
     [("_common.toml", "judge[0].signals.confidence")], "loosen the judge signal 'confidence' (min 0.7 → min 0.5) of lingflow, lingresearch, lingyi, lingzhi"),
    ("_common.toml", lambda t: t.replace(DRIFT, DRIFT[:-3] + "0.5"),
     [("_common.toml", "judge[0].signals.drift")], "loosen the judge signal 'drift' (max 0.3 → max 0.5)"),
    ("_common.toml", lambda t: t.replace(CONFIDENCE, CONFIDENCE[:-3] + "0.8").replace(DRIFT, DRIFT[:-3] + "0.2"),
     None, None),
    ("_common.toml", lambda t: t.replace("[judge.signals.drift]", "[judge.signals.off_topic]"),
     [("_common.toml", "judge[0].signals")], "drop the judge signal 'drift'"),
    ("lingzhi.toml", lambda t: t + "\n[signals]\nconfidence = { min = 0.6 }\n",
     [("lingzhi.toml", "signals.confidence")], "loosen the judge signal 'confidence' (min 0.7 → min 0.6) of lingzhi"),
    ("lingzhi.toml", lambda t: t + "\n[signals]\nconfidence = { min = 0.9 }\nungrounded_claims = { max = 0.0 }\n",
     None, None),
    ("lingflow.toml", lambda t: t.replace('[[judge]]\nkind = "destructive"', '[[judge]]\nkind = "assertion"\ntypes = ["conclusion"]'),
     [("lingflow.toml", "judge[0]")], "remove the judge rule 'lingflow.toml judge[0]' of lingflow"),
    ("lingflow.toml", lambda t: t.replace("max_revisions = 1\n", 'max_revisions = 1\non_fail = "warn"\n'),
     [("lingflow.toml", "judge[0].on_fail")], "soften the judge rule 'lingflow.toml judge[0]' (on_fail reject → warn)"),
    ("lingflow.toml", lambda t: t.replace(RUBRIC_ZH, "推送与会话证据和议会近期消息所描述的工作相符 (the push fits the work"),
     None, None),
    ("_common.toml", lambda t: t.replace('kind = "answer"\non_fail = "warn"', 'kind = "answer"\non_fail = "reject"'),
     None, None),
    ("lingyi.toml", lambda t: t + '\n[[judge]]\nkind = "answer"\non_fail = "warn"\nrubric = "回答切题"\n',
     [("lingyi.toml", "judge[0].signals")], "drop the judge signal 'confidence' of lingyi"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "change", "where", "words"), NARROWINGS)
def test_a_reload_that_narrows_a_check_or_loosens_the_judge_is_refused(
    tmp_path: Path, name: str, change: object, where: list[tuple[str, str]] | None, words: str
) -> None:
    """A shared or boundary check whose ``types`` or ``tools`` shrink, a critic signal whose
    ``min`` drops or ``max`` rises (in the shared rule or a member's ``[signals]``), a signal
    renamed away, a judge rule removed, softened or shadowed by a member's weaker rule: each is
    refused on its file and key, the last good set kept. Widening, tightening and rewording
    (in Chinese or English) reload."""
    folder = folder_with(tmp_path, {})
    store = PolicyStore(folder, check_interval_s=0)
    before = store.current()
    _edit(folder / name, change((folder / name).read_text(encoding="utf-8")))  # type: ignore[operator]
    now = store.current()
    if where is None:
        assert now.version != before.version and store.refused == []
        return
    assert now is before
    assert sorted({(Path(e.path).name, e.key) for e in store.refused}) == where
    assert any(words in e.message for e in store.refused)
    assert all("restart" in e.message for e in store.refused)


@pytest.mark.parametrize(
    ("default", "refused"), [(OnFail.WARN, True), (OnFail.FALLBACK, True), (OnFail.REJECT, False)]
)
def test_a_rule_losing_its_on_fail_falls_back_to_the_configs(
    tmp_path: Path, default: OnFail, refused: bool
) -> None:
    """A rule's own ``on_fail = "reject"`` removed: the judge then applies the config's
    ``[judge] on_fail``, so the reload is refused exactly when that is softer."""
    strict = '[[judge]]\nkind = "destructive"\non_fail = "reject"'
    folder = folder_with(tmp_path, {})
    flow = folder / "lingflow.toml"
    text = flow.read_text(encoding="utf-8")
    _edit(flow, text.replace('[[judge]]\nkind = "destructive"', strict))
    store = PolicyStore(folder, check_interval_s=0, judge_on_fail=default)
    before = store.current()
    _edit(flow, text)
    assert (store.current() is before) is refused
    assert [(Path(e.path).name, e.key) for e in store.refused] == (
        [("lingflow.toml", "judge[0].on_fail")] if refused else []
    )
