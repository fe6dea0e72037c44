"""An uncertain check: its policy's on_uncertain decides, and the judge only when it may run.

A check may answer "uncertain" (neither a match nor a contradiction). ``pass``, ``fail`` and
``warn`` settle it at once; ``judge`` hands it to the judge, which never runs after a
deterministic failure, and without a judge ``judge_unavailable`` settles it (degraded).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lingyi.checks import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.checks._registry import unsure
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, Stage
from lingyi.policy import load_policies


class _None(CheckParams):
    pass


@register("test.unsure", _None)
def _unsure(ctx: CheckContext, params: _None) -> Outcome:
    """Uncertain whenever the content says "maybe"."""
    return unsure("cannot tell", "look again") if "maybe" in ctx.canon.text else ok("clear")


@register("test.forbidden", _None)
def _forbidden(ctx: CheckContext, params: _None) -> Outcome:
    """A deterministic failure whenever the content says "forbidden"."""
    return fail("forbidden word", "rephrase") if "forbidden" in ctx.canon.text else ok("clean")


class CountingJudge:
    def __init__(self, passes: bool) -> None:
        self.passes, self.calls = passes, 0

    def __call__(self, ctx: CheckContext, uncertain: object = ()) -> CheckResult:
        self.calls += 1
        return CheckResult(stage=Stage.JUDGE, code="judge.llm", passed=self.passes, reason="judged")


def _layer(tmp_path: Path, on_uncertain: str, **kwargs: object) -> ConstraintLayer:
    folder = tmp_path / "validators"
    folder.mkdir(exist_ok=True)
    (folder / "tester.toml").write_text(
        f"""member = "tester"\nname = "Tester"\n
[[checks]]\ncheck = "test.unsure"\nstage = "fact_verification"\non_uncertain = "{on_uncertain}"\n
[[checks]]\ncheck = "test.forbidden"\nstage = "boundary"\n""",
        encoding="utf-8",
    )
    return ConstraintLayer(
        load_policies(folder, require_shared=False), MemoryCouncil(), language="en", **kwargs
    )  # type: ignore[arg-type]


def _verify(layer: ConstraintLayer, content: str) -> tuple[str, CheckResult]:
    result = layer.verify(Assertion(member="tester", type="fact", content=content), Ledger())
    return result.decision.value, next(c for c in result.checks if c.code == "test.unsure")


SETTLED = [
    # (on_uncertain, judge, judge_unavailable, decision, check passed, degraded)
    ("pass", None, "pass", "approved", True, False),
    ("fail", None, "pass", "rejected", False, False),
    ("warn", None, "pass", "approved", False, False),
    ("judge", None, "pass", "approved", True, True),
    ("judge", None, "fail", "rejected", False, True),
    ("judge", True, "fail", "approved", True, False),
    ("judge", False, "pass", "rejected", False, False),
]


@pytest.mark.parametrize(
    ("on_uncertain", "judge", "unavailable", "decision", "passed", "degraded"), SETTLED
)
def test_on_uncertain_settles_the_check(
    tmp_path: Path,
    on_uncertain: str,
    judge: bool | None,
    unavailable: str,
    decision: str,
    passed: bool,
    degraded: bool,
) -> None:
    """Each on_uncertain value gives its decision; the check records that it was uncertain."""
    judged = CountingJudge(judge) if judge is not None else None
    layer = _layer(tmp_path, on_uncertain, judge=judged, judge_unavailable=unavailable)
    got, check = _verify(layer, "Maybe it shipped")
    assert (got, check.passed, check.degraded, check.uncertain) == (
        decision,
        passed,
        degraded,
        True,
    )
    assert "awaiting_judge" not in check.detail


def test_the_judge_never_runs_after_a_deterministic_failure(tmp_path: Path) -> None:
    """An uncertain check waiting for the judge stays a warning when another check failed."""
    judge = CountingJudge(True)
    layer = _layer(tmp_path, "judge", judge=judge)
    decision, check = _verify(layer, "maybe the forbidden thing")
    assert decision == "rejected" and judge.calls == 0
    assert not check.passed and check.on_fail == "warn"


def test_a_certain_answer_is_not_sent_to_the_judge(tmp_path: Path) -> None:
    """A check that decides (here: passes) needs no judge; the judge runs once, as ever."""
    judge = CountingJudge(True)
    layer = _layer(tmp_path, "judge", judge=judge)
    decision, check = _verify(layer, "It shipped on Monday")
    assert decision == "approved" and check.passed and not check.uncertain and judge.calls == 1


def test_the_log_record_names_uncertain_checks_and_normalisation(tmp_path: Path) -> None:
    """The record keeps the original text and says which checks were uncertain and which
    normalisation steps changed the content; a plain verification carries neither field."""
    from lingyi.log import VerificationLog, read_log, verification_record

    layer = _layer(tmp_path, "pass")
    odd = Assertion(member="tester", type="fact", content="Ｍａｙｂｅ it ship\u200bped")
    plain = Assertion(member="tester", type="fact", content="It shipped")
    with VerificationLog(tmp_path / "log.jsonl") as log:
        for assertion in (odd, plain):
            log.append(verification_record(assertion, layer.verify(assertion, Ledger()), "test"))
    first, second = (line.record for line in read_log(tmp_path / "log.jsonl"))
    assert first is not None and second is not None
    assert first["content"] == odd.content
    assert first["uncertain"] == ["test.unsure"]
    assert first["normalized"] == ["nfkc", "format_characters"]
    assert "uncertain" not in second and "normalized" not in second
