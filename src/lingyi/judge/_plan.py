"""Which judge rule applies to a verification, with its settings filled in from the config.

Order: a tool call the member's policy declares ``destructive`` is judged by a
``destructive`` rule (the pre-flight review) when one matches; otherwise the verification's
kind is its type when that is ``conclusion`` or ``answer``, else ``assertion``. Among the
rules of that kind that match (tools, types), the first that names the tool wins, else the
first that names none; the member's own rules are read before the shared ones. With no rule,
content is judged against the default rubric of its kind (there is none for destructive
calls: which of those are reviewed is for the policy to say).

A rule's scored signals come with their thresholds; the member's own ``[signals]`` table
replaces the threshold of a signal it names (the shared rule's wording stays).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lingyi.checks import CheckContext
from lingyi.config import JudgeSection
from lingyi.models import OnFail
from lingyi.policy import JudgeRule, criteria_of, first_rule

DEFAULT_RUBRICS = {
    "assertion": """Every claim of fact in the content is supported by the session's evidence or the council record
Nothing in the content contradicts the evidence or the council record
A prediction, estimate or inference is labelled as one, not stated as fact""",
    "conclusion": """The conclusion follows from the findings it is drawn from
Every evidence id the conclusion cites supports what it is cited for
The stated confidence matches the strength of the findings""",
    "answer": """The answer addresses the question that was asked
Every claim in the answer is grounded in the sources it gives or in the session's evidence""",
}
DEFAULT_SOURCE = "default"
CODE = "judge.llm"
PREFLIGHT_CODE = "judge.preflight"  # a destructive tool call reviewed before it runs


@dataclass(frozen=True)
class Signal:
    """A scored criterion with the threshold that applies to this member."""

    name: str
    criterion: str
    min: float | None
    max: float | None
    source: str  # where the threshold comes from: the rule's file, or the member's

    def passes(self, score: float) -> bool:
        return (self.min is None or score >= self.min) and (self.max is None or score <= self.max)


@dataclass(frozen=True)
class Plan:
    """One rule with every setting resolved: what the judge runs for this verification."""

    kind: str
    source: str  # "lingflow.toml judge[0]", or "default"
    criteria: tuple[str, ...]
    model: str
    timeout_s: float
    max_tokens: int
    on_error: str
    on_fail: OnFail
    max_revisions: int
    signals: tuple[Signal, ...] = ()

    @property
    def code(self) -> str:
        return PREFLIGHT_CODE if self.kind == "destructive" else CODE


def plan_for(ctx: CheckContext, config: JudgeSection) -> Plan | None:
    """The judge's plan for this verification, or None when the judge has nothing to do."""
    if config.members and ctx.member.id not in config.members:
        return None
    assertion = ctx.assertion
    tool = assertion.tool_call.name if assertion.tool_call else None
    type_ = assertion.type.value
    destructive = ctx.tool is not None and ctx.tool.destructive
    if destructive and (rule := first_rule(ctx.member.judge, "destructive", type_, tool)):
        return _plan(config, "destructive", rule, ctx)
    kind = type_ if type_ in ("conclusion", "answer") else "assertion"
    if rule := first_rule(ctx.member.judge, kind, type_, tool):
        return _plan(config, kind, rule, ctx)
    if assertion.content.strip() or kind != "assertion":
        return _plan(config, kind, None, ctx)
    return None  # a bare tool call with no rule: nothing to judge


def signals_of(rule: JudgeRule, ctx: CheckContext) -> tuple[Signal, ...]:
    """The rule's signals, each with the member's threshold where its policy sets one."""
    own = ctx.member.signals
    found = []
    for name, spec in rule.signals.items():
        limit, source = (own[name], Path(ctx.member.source).name) if name in own else (spec, "")
        source = source or rule.source
        found.append(Signal(name, spec.criterion, limit.min, limit.max, source))
    return tuple(found)


def _plan(config: JudgeSection, kind: str, rule: JudgeRule | None, ctx: CheckContext) -> Plan:
    if rule is None:
        return Plan(
            kind=kind,
            source=DEFAULT_SOURCE,
            criteria=tuple(criteria_of(DEFAULT_RUBRICS[kind])),
            model=config.model,
            timeout_s=config.timeout_s,
            max_tokens=config.max_tokens,
            on_error=config.on_error,
            on_fail=OnFail(config.on_fail),
            max_revisions=config.max_revisions,
        )
    return Plan(  # every limit a rule leaves unset is the config's (none of them can be 0)
        kind=kind,
        source=rule.source,
        criteria=tuple(rule.criteria),
        model=rule.model or config.model,
        timeout_s=rule.timeout_s or config.timeout_s,
        max_tokens=rule.max_tokens or config.max_tokens,
        on_error=rule.on_error or config.on_error,
        on_fail=rule.on_fail or OnFail(config.on_fail),
        max_revisions=config.max_revisions if rule.max_revisions is None else rule.max_revisions,
        signals=signals_of(rule, ctx),
    )
