"""``lingyi policy diff``: the same inputs under two policy folders, and exactly what changes.

Real policy edits on a copy of the shipped folder, decided over the team's eval transcripts
(zh and en) and over a real verification log written by ``lingyi replay``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lingyi.cli import main
from lingyi.council import CouncilMessage, FileCouncil
from lingyi.errors import LingyiError
from lingyi.models import CheckResult, Decision, OnFail, Stage, VerificationResult
from lingyi.policy_diff import Decided, ReadOnlyCouncil, code_states, compare
from tests.conftest import ROOT, SHIPPED_POLICIES

EVAL = ROOT / "examples" / "eval"
INFERENCE = EVAL / "eval-inference.jsonl"
MESSAGE = '{"id": "m-1", "from": "lingflow", "content": "v0.16 审计已完成"}\n'


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``lingyi ARGS`` in this process: exit code, stdout, stderr."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A config whose policies in effect are the shipped ones; log and council in tmp."""
    path = tmp_path / "lingyi.toml"
    path.write_text(
        f'[paths]\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n'
        f'knowledge_base = "{(SHIPPED_POLICIES.parent / "kb").as_posix()}"\n'
        'log = "var/log.jsonl"\ncouncil = "var/council.jsonl"\n',
        encoding="utf-8",
    )
    return path


def edited(tmp_path: Path, name: str, file: str, old: str, new: str) -> Path:
    """A copy of the shipped policies with one text of one file replaced (it must be there)."""
    folder = tmp_path / name
    shutil.copytree(SHIPPED_POLICIES, folder)
    target = folder / file
    text = target.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {file}"
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


def diff(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, "--config", str(config), "policy", "diff", *args, "--json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def replayed(capsys: pytest.CaptureFixture[str], tmp_path: Path, *paths: Path) -> list[Any]:
    """What ``lingyi replay`` decides under the shipped policies (the oracle)."""
    log = tmp_path / "oracle.jsonl"
    code, out, _ = run(capsys, "--log", str(log), "replay", *map(str, paths))
    assert code == 0
    return [json.loads(line) for line in out.splitlines()]


STRICT_INFERENCE = (
    "_common.toml",
    'check = "inference.labelled"\nstage = "fact_verification"\non_fail = "fallback"',
    'check = "inference.labelled"\nstage = "fact_verification"\non_fail = "reject"',
)


def test_identical_folders_show_no_change(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of the folder in effect changes nothing: every assertion of the eval set is
    decided under both, and none is listed."""
    same = tmp_path / "same"
    shutil.copytree(SHIPPED_POLICIES, same)
    found = diff(capsys, config, str(same), str(EVAL))
    assert found["inputs"] == 277 and found["changed"] == 0 and found["changes"] == []
    assert found["before"]["version"] == found["after"]["version"]
    code, out, _ = run(capsys, "--config", str(config), "policy", "diff", str(same), str(EVAL))
    assert code == 0 and "0 changed" in out and "no change" in out


def test_a_stricter_on_fail_lists_exactly_the_inputs_it_changes(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inference.labelled fallback → reject: exactly the assertions replay decides fallback
    because of that check become rejected (zh i-1, en i-4 among them), and nothing else."""
    oracle = {
        row["id"]
        for row in replayed(capsys, tmp_path, INFERENCE)
        if row["decision"] == "fallback"
        and any(c["code"] == "inference.labelled" and not c["passed"] for c in row["checks"])
    }
    found = diff(capsys, config, str(edited(tmp_path, "strict", *STRICT_INFERENCE)), str(INFERENCE))
    changes = found["changes"]
    assert {c["assertion_id"] for c in changes} == oracle and {"i-1", "i-4"} <= oracle
    assert {(c["before"], c["after"]) for c in changes} == {("fallback", "rejected")}
    assert found["decisions"] == {"fallback → rejected": len(oracle)}
    first = changes[0]["codes"]
    assert first == [
        {
            "code": "inference.labelled",
            "before": {"outcome": "fallback", "uncertain": False},
            "after": {"outcome": "reject", "uncertain": False},
            "kinds": [],
        }
    ]
    assert found["codes"]["inference.labelled"]["changed"] == len(oracle)
    assert changes[0]["where"] == f"{INFERENCE}:4" and changes[0]["member"] == "lingresearch"


def test_a_lexicon_edit_lists_the_zh_and_en_inputs_it_lets_through(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Taking 一定/肯定 and "going to" out of the inference lexicon lets exactly those
    forecasts through (zh and en), counted as no longer failing; the rest is unchanged."""
    folder = edited(tmp_path, "lex", "lexicons/inference.toml", 'zh = ["一定", "肯定", ', "zh = [")
    lexicon = folder / "lexicons" / "inference.toml"
    text = lexicon.read_text(encoding="utf-8")
    lexicon.write_text(text.replace('"going to", ', "", 1), encoding="utf-8")
    found = diff(capsys, config, str(folder), str(INFERENCE))
    assert {c["assertion_id"] for c in found["changes"]} == {"i-6", "i-11", "i-18", "i-21"}
    assert found["decisions"] == {"fallback → approved": 4}
    counts = found["codes"]["inference.labelled"]
    assert counts["no_longer_failing"] == 4 and counts["newly_failing"] == 0
    assert found["after"]["weakenings"] == []


def test_a_weakened_folder_is_diffed_and_what_a_start_refuses_is_said(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other folder is a what-if: a medical boundary softened to warn still loads, the
    medical advice it lets through is listed, and the weakening is reported with the file and
    the subject that [policies] allow_weakening would have to name."""
    common = (SHIPPED_POLICIES / "_common.toml").read_text(encoding="utf-8")
    at = common.index('check = "boundary.medical"')
    tail = common[at:].replace('on_fail = "reject"', 'on_fail = "warn"', 1)
    weak = tmp_path / "weak"
    shutil.copytree(SHIPPED_POLICIES, weak)
    (weak / "_common.toml").write_text(common[:at] + tail, encoding="utf-8")
    medical = ROOT / "examples" / "hostile" / "hostile-medical.jsonl"
    found = diff(capsys, config, str(weak), str(medical))
    assert [w["file"] for w in found["after"]["weakenings"]] == [str(weak / "_common.toml")]
    assert "'boundary.medical'" in found["after"]["weakenings"][0]["message"]
    assert found["codes"]["boundary.medical"]["no_longer_failing"] > 0
    ids = {c["assertion_id"] for c in found["changes"]}
    assert {"hm-003", "hm-051"} <= ids  # 頭痛的話吃兩片布洛芬就好; melatonin cures insomnia
    code, out, _ = run(capsys, "--config", str(config), "policy", "diff", str(weak), str(medical))
    assert code == 0 and "a start would refuse it" in out and "REJECTED → APPROVED" in out
    assert "more:" not in out  # one weakening: shown in full, no "and N more"


def test_a_weakened_folder_in_effect_is_refused_as_a_start_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The policies in effect are loaded as the server loads them: weaker than the shipped
    ones without allow_weakening is exit 2 naming the file."""
    weak = edited(tmp_path, "weak", "_common.toml", 'on_fail = "reject"', 'on_fail = "warn"')
    config = tmp_path / "weak.toml"
    config.write_text(f'[paths]\nvalidators = "{weak.as_posix()}"\n', encoding="utf-8")
    code, _, err = run(
        capsys, "--config", str(config), "policy", "diff", str(SHIPPED_POLICIES), str(INFERENCE)
    )
    assert code == 2 and str(weak / "_common.toml") in err and "allow_weakening" in err


@pytest.mark.parametrize(
    ("name", "named"),
    [("missing", "policy folder not found"), ("bad", 'checks[0].on_fail: "rejekt" is not allowed')],
)
def test_a_bad_other_folder_is_exit_2_naming_it(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str], name: str, named: str
) -> None:
    """A missing folder, or one whose file has a wrong value, is bad input naming the folder
    or the file and key, with --json as well."""
    folder = tmp_path / name
    if name == "bad":
        folder = edited(tmp_path, name, "_common.toml", 'on_fail = "reject"', 'on_fail = "rejekt"')
    code, out, err = run(
        capsys, "--config", str(config), "policy", "diff", str(folder), str(INFERENCE), "--json"
    )
    assert code == 2 and named in err and str(folder) in err
    assert json.loads(out)["ok"] is False


def test_the_log_is_re_decided_and_never_written(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--log FILE re-decides each logged verification under both folders: changes carry the
    log record's id and the assertion's own id, the log's bytes are unchanged, the config's
    own log and council record are not created, and appeals are skipped, not decided."""
    log = tmp_path / "given.jsonl"
    run(capsys, "--log", str(log), "replay", str(INFERENCE))
    lines = log.read_text(encoding="utf-8").splitlines()
    records = {json.loads(line)["assertion_id"]: json.loads(line)["id"] for line in lines}
    appealed = run(capsys, "--log", str(log), "appeal", records["i-1"], "--reason", "a forecast")
    assert appealed[0] == 0, appealed[2]
    before = hashlib.sha256(log.read_bytes()).hexdigest()
    council = tmp_path / "var" / "council.jsonl"
    council.parent.mkdir()
    council.write_text(MESSAGE, encoding="utf-8")
    folder = edited(tmp_path, "strict", *STRICT_INFERENCE)
    found = diff(capsys, config, str(folder), "--log", str(log))
    assert found["source"] == {"kind": "log", "path": str(log)} and found["inputs"] == 57
    assert found["changed"] > 0 and found["skipped"] == 1
    for change in found["changes"]:
        assert change["record"] == records[change["assertion_id"]]
        assert change["where"].startswith(f"{log}:")
    assert hashlib.sha256(log.read_bytes()).hexdigest() == before
    assert council.read_text(encoding="utf-8") == MESSAGE
    assert sorted(p.name for p in council.parent.iterdir()) == ["council.jsonl"]


def test_the_council_record_of_a_log_diff_cannot_be_written(tmp_path: Path) -> None:
    """The log diff reads the deployment's council record through a view that refuses
    writes: a what-if never posts."""
    view = ReadOnlyCouncil(FileCouncil(tmp_path / "council.jsonl"))
    message = CouncilMessage.model_validate({"from": "lingflow", "content": "x"})
    with pytest.raises(LingyiError, match="never writes"):
        view.append(message)
    assert not (tmp_path / "council.jsonl").exists()


def test_a_log_that_is_not_there_is_bad_input(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No transcripts and no log at the path: exit 2 naming the path, nothing created."""
    missing = tmp_path / "none.jsonl"
    code, _, err = run(
        capsys,
        "--config",
        str(config),
        "policy",
        "diff",
        str(SHIPPED_POLICIES),
        "--log",
        str(missing),
    )
    assert code == 2 and f"{missing}: no verification log here" in err and not missing.exists()


def test_log_and_transcripts_together_are_refused(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--log names the input to re-decide; with transcripts too it would be ambiguous."""
    code, _, err = run(
        capsys, "--config", str(config), "policy", "diff", str(SHIPPED_POLICIES),
        str(INFERENCE), "--log", str(tmp_path / "x.jsonl"),
    )  # fmt: skip
    assert code == 2 and "not both" in err


def test_a_bad_transcript_line_is_reported_and_the_rest_is_diffed(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed line names its file and line (exit 2); the other assertions are compared."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(INFERENCE.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    folder = edited(tmp_path, "strict", *STRICT_INFERENCE)
    code, out, err = run(
        capsys, "--config", str(config), "policy", "diff", str(folder), str(transcript), "--json"
    )
    assert code == 2 and f"{transcript}:line 61: not valid JSON" in err
    assert json.loads(out)["changed"] > 0


def test_help_explains_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    """--help says what is compared and shows a worked example."""
    code, out, _ = run(capsys, "policy", "diff", "--help")
    assert code == 0 and "Example" in out and "lingyi policy diff /tmp/try examples/eval" in out


# --- what counts as a change of a code -------------------------------------------------


def result(*checks: tuple[str, bool, OnFail, bool]) -> VerificationResult:
    return VerificationResult(
        id="r",
        decision=Decision.APPROVED,
        reason="",
        checks=[
            CheckResult(stage=Stage.BOUNDARY, code=c, passed=p, on_fail=f, uncertain=u)
            for c, p, f, u in checks
        ],
    )


def one(*checks: tuple[str, bool, OnFail, bool], decision: str = "approved") -> Decided:
    return Decided(
        "t:1", None, "a-1", "lingyi", "fact", "x", decision, code_states(result(*checks))
    )


R, F, W = OnFail.REJECT, OnFail.FALLBACK, OnFail.WARN


@pytest.mark.parametrize(
    ("before", "after", "kinds"),
    [
        (("c", True, R, False), ("c", False, R, False), ["newly_failing"]),
        (("c", False, R, False), ("c", False, W, False), ["no_longer_failing"]),
        (("c", True, R, False), ("c", True, R, True), ["now_uncertain"]),
        (("c", True, R, True), ("c", False, F, False), ["newly_failing", "no_longer_uncertain"]),
        (("c", False, F, False), ("c", False, R, False), []),
    ],
)
def test_each_change_of_a_code_is_counted_as_what_it_is(
    before: tuple[str, bool, OnFail, bool], after: tuple[str, bool, OnFail, bool], kinds: list[str]
) -> None:
    """pass → fail is newly failing, a reject softened to warn no longer failing, a pass that
    became uncertain now uncertain; a fallback turned reject is a change of neither."""
    change = compare(one(before), one(after))
    assert change is not None and [c.kinds for c in change.codes] == [kinds]


def test_the_same_outcome_is_no_change_and_a_code_run_twice_counts_its_worst() -> None:
    """Identical results compare equal; a code that runs twice keeps its worst outcome."""
    assert compare(one(("c", True, R, False)), one(("c", True, R, False))) is None
    twice = one(("c", True, R, False), ("c", False, F, True))
    assert twice.codes == {"c": ("fallback", True)}
