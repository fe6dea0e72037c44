"""The plan (lingyi.plan): one policy snapshot compiled once, compiled again after a reload.

By behaviour: an unchanged policy folder keeps the same plan object across verifications (zh
and en), a policy edit takes effect on the next verification through a new plan, and a tool
no entry names still runs the checks every tool call runs. Real policy folders in tmp_path,
a real PolicyStore watching them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, AssertionType, Stage, ToolCall
from lingyi.plan import MANDATORY_TOOL_CHECKS, compile_plan
from lingyi.policy import PolicySet, PolicyStore
from tests.conftest import SHIPPED_POLICIES

TEXTS = ["庄子的逍遥游讲的是自由", "Zhuangzi wrote about free and easy wandering"]
SHORT = '\n[[checks]]\ncheck = "pre.content"\nstage = "pre_check"\nparams = { max_length = 5 }\n'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, target)
    return target


def _fact(content: str) -> Assertion:
    return Assertion(member="lingzhi", type=AssertionType.FACT, content=content)


def test_the_plan_is_kept_while_the_policies_are_unchanged_and_rebuilt_after_an_edit(
    folder: Path,
) -> None:
    """Two verifications of an unchanged folder use one plan (the same object, the version the
    results name); an edit that adds a check makes a new plan, and that check decides the
    next verification (zh and en alike), while the old plan still holds the old snapshot."""
    layer = ConstraintLayer(PolicyStore(folder, check_interval_s=0), MemoryCouncil())
    first = layer.plan
    before = [layer.verify(_fact(text), Ledger()) for text in TEXTS]
    assert layer.plan is first
    assert [r.decision.value for r in before] == ["approved", "approved"]
    assert {r.policy_version for r in before} == {first.version}

    path = folder / "lingzhi.toml"
    path.write_text(path.read_text(encoding="utf-8") + SHORT, encoding="utf-8")
    after = [layer.verify(_fact(text), Ledger()) for text in TEXTS]
    second = layer.plan
    assert second is not first and second.version != first.version
    assert [r.decision.value for r in after] == ["rejected", "rejected"]
    assert all("pre.content" in [c.code for c in r.checks if c.blocking] for r in after)
    assert {r.policy_version for r in after} == {second.version}
    assert layer.plan is second  # unchanged since: kept
    assert first.policies.members["lingzhi"] is not second.policies.members["lingzhi"]


def test_a_request_keeps_the_plan_it_was_given(folder: Path) -> None:
    """A plan passed to verify decides, whatever the store has loaded since (a reload
    mid-request cannot change what one request runs)."""
    layer = ConstraintLayer(PolicyStore(folder, check_interval_s=0), MemoryCouncil())
    old = layer.plan
    path = folder / "lingzhi.toml"
    path.write_text(path.read_text(encoding="utf-8") + SHORT, encoding="utf-8")
    kept = layer.verify(_fact(TEXTS[0]), Ledger(), plan=old)
    fresh = layer.verify(_fact(TEXTS[0]), Ledger())
    assert (kept.decision.value, kept.policy_version) == ("approved", old.version)
    assert fresh.decision.value == "rejected"


@pytest.mark.parametrize("tool", ["no_such_tool", "git_push", "search_knowledge"])
def test_every_tool_call_runs_the_mandatory_checks_first(policies: PolicySet, tool: str) -> None:
    """Whatever tool is named (one no policy has, one of another member, one of lingzhi's
    own), the plan's tool stage starts with ownership, argument and path checks."""
    plan = compile_plan(policies)
    member = policies.members["lingzhi"]
    stages = dict(plan.stages(member, AssertionType.ACTION, tool))
    codes = [s.entry.check for s in stages[Stage.TOOL_VALIDATION]]
    assert tuple(codes[:3]) == MANDATORY_TOOL_CHECKS
    layer = ConstraintLayer(policies, MemoryCouncil())
    call = ToolCall(name=tool, arguments={"query": "气功"})
    result = layer.verify(
        Assertion(member="lingzhi", type=AssertionType.ACTION, tool_call=call), Ledger()
    )
    owned = next(c for c in result.checks if c.code == "tool.owned")
    assert owned.passed is (tool == "search_knowledge")
