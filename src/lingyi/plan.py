"""The plan: one policy snapshot compiled with the check registry, once.

For every member, every type of input and every tool its entries can name, the plan holds
what runs in each stage, in order: each check's entry, its function and its validated
parameters. The layer reads the stages of a call here instead of filtering the member's
entries on every call. A reload brings a new policy snapshot and with it a new plan; a plan
is never changed, so a request keeps the plan it started with.

Checks may keep data derived from the snapshot (a vocabulary built from lexicons, a pattern
of every member's names) in :meth:`Plan.prepared`: it lives and dies with the plan, keyed by
what the data is made of, never by the identity of an object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lingyi.checks import REGISTRY, CheckContext, CheckParams, Outcome
from lingyi.checks._registry import CheckFunc
from lingyi.models import AssertionType, Stage
from lingyi.policy import CheckEntry, MemberPolicy, PolicySet

MANDATORY_TOOL_CHECKS = ("tool.owned", "tool.args_schema", "tool.path_allowed")
STAGES = (Stage.PRE_CHECK, Stage.TOOL_VALIDATION, Stage.BOUNDARY, Stage.FACT_VERIFICATION)
OTHER_TOOL = "\x00other"  # stands for every tool no entry of the member names
T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """One check to run: its policy entry, its function, its validated parameters."""

    entry: CheckEntry
    func: CheckFunc
    params: CheckParams


Stages = tuple[tuple[Stage, tuple[Step, ...]], ...]


@dataclass(frozen=True)
class MemberPlan:
    """What one member runs, per type of input and tool (None: no tool call)."""

    member: MemberPolicy
    by_input: Mapping[tuple[AssertionType, str | None], Stages]

    def stages(self, type_: AssertionType, tool: str | None) -> Stages:
        named = tool is None or (type_, tool) in self.by_input
        return self.by_input[(type_, tool if named else OTHER_TOOL)]


@dataclass(frozen=True)
class Plan:
    """A policy snapshot compiled: the snapshot, and each member's stages."""

    policies: PolicySet
    members: Mapping[str, MemberPlan]
    _prepared: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def version(self) -> str:
        return self.policies.version

    def stages(self, member: MemberPolicy, type_: AssertionType, tool: str | None) -> Stages:
        """The stages of ``member`` (of this snapshot) for this input."""
        return self.members[member.id].stages(type_, tool)

    def prepared(self, key: Any, build: Callable[[], T]) -> T:
        """The data ``build`` makes, built once for this plan under ``key`` (a value naming
        what it is made of, e.g. ``("communication.vocabulary", glossary, status)``)."""
        with self._lock:
            if key not in self._prepared:
                self._prepared[key] = build()
            found: T = self._prepared[key]
            return found


def compile_plan(policies: PolicySet) -> Plan:
    """The plan of ``policies``: every member's stages for every input its entries tell apart.
    The checks are registered: loading the policies loaded them (and validated each entry)."""
    mandatory = tuple(step_of(e) for e in _mandatory())
    members = {m.id: _member_plan(m, mandatory) for m in policies.members.values()}
    return Plan(policies, members)


def _member_plan(member: MemberPolicy, mandatory: tuple[Step, ...]) -> MemberPlan:
    """Each entry's step made once; then, per input, the steps whose entries apply."""
    steps = [step_of(e) for e in member.checks]
    named = {t for e in member.checks for t in e.tools or ()} | set(member.tools)
    tools: list[str | None] = [None, OTHER_TOOL, *sorted(named)]
    by_input = {
        (type_, tool): _stages(steps, mandatory, type_, tool)
        for type_ in AssertionType
        for tool in tools
    }
    return MemberPlan(member, by_input)


def _stages(
    steps: list[Step], mandatory: tuple[Step, ...], type_: AssertionType, tool: str | None
) -> Stages:
    applying = [s for s in steps if s.entry.applies(type_, tool)]
    return tuple(
        (stage, _of_stage(applying, mandatory, stage))
        for stage in STAGES
        if stage is not Stage.TOOL_VALIDATION or tool is not None
    )


def _of_stage(applying: list[Step], mandatory: tuple[Step, ...], stage: Stage) -> tuple[Step, ...]:
    """The stage's steps; tool ownership and argument checks always run first, and always
    reject, whatever the member's own entries of them say."""
    found = tuple(s for s in applying if s.entry.stage is stage)
    if stage is not Stage.TOOL_VALIDATION:
        return found
    return mandatory + tuple(s for s in found if s.entry.check not in MANDATORY_TOOL_CHECKS)


def _mandatory() -> list[CheckEntry]:
    """The entries of the checks every tool call runs (the same for every member)."""
    mandatory = [CheckEntry(check=c, stage=Stage.TOOL_VALIDATION) for c in MANDATORY_TOOL_CHECKS]
    for entry in mandatory:
        entry.attach(REGISTRY[entry.check].params())
    return mandatory


def step_of(entry: CheckEntry) -> Step:
    """The entry with its function and parameters. A check that is not registered (or whose
    parameters were never parsed) still fails closed when it runs, with the error it raises."""
    try:
        return Step(entry, REGISTRY[entry.check].func, entry.parsed)
    except (KeyError, AttributeError) as exc:
        return Step(entry, _raiser(exc), CheckParams())


def _raiser(exc: Exception) -> CheckFunc:
    def run(_ctx: CheckContext, _params: Any) -> Outcome:
        raise exc

    return run
