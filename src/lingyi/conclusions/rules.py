"""``conclusion.rules``: a team's business rules over a conclusion, declared in its policy.

Three forms, each with a ``severity`` (``error`` fails the check; ``warn`` is logged and fed
back, and does not block)::

    { name = "env", field = "conclusion.environment", allowed = ["prod", "staging"] }
    { name = "prod_ticket", when = { field = "conclusion.environment", equals = "prod" },
      field = "conclusion.ticket", required = true }
    { name = "impact", field = "conclusion.impact_percent", min = 0, max = 100 }

A field is a dotted path into the input (``conclusion.…``, ``findings.…``); ``*`` stands for
every item of a list (``conclusion.hypotheses.*.risk_level``). A rule that raises while it is
evaluated is a violation, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register

_ABSENT = object()


class When(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: str
    equals: Any


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    field: str
    severity: Literal["error", "warn"] = "error"
    when: When | None = None
    required: bool = False
    allowed: list[Any] | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _says_something(self) -> Rule:
        if not (
            self.required
            or self.allowed is not None
            or self.min is not None
            or self.max is not None
        ):
            raise ValueError(f"rule {self.name!r}: give required, allowed, min or max")
        return self


class RulesParams(CheckParams):
    rules: list[Rule] = []


def values_at(data: Any, path: str) -> Iterator[Any]:
    """The values at a dotted path (``*``: each item of a list); ``_ABSENT`` where none is."""
    head, _, rest = path.partition(".")
    if head == "*":
        items = data if isinstance(data, list) else []
        for item in items:
            yield from values_at(item, rest) if rest else iter([item])
        return
    value = data.get(head, _ABSENT) if isinstance(data, dict) else _ABSENT
    if rest and value is not _ABSENT:
        yield from values_at(value, rest)
    else:
        yield value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def violations(ctx: CheckContext, rule: Rule, data: dict[str, Any]) -> list[str]:
    """What ``rule`` finds wrong in ``data``, in words (empty: it holds)."""
    if rule.when is not None and not any(
        v == rule.when.equals for v in values_at(data, rule.when.field)
    ):
        return []
    found: list[str] = []
    for value in values_at(data, rule.field):
        if value is _ABSENT or value is None:
            if rule.required:
                found.append(ctx.msg("required", rule=rule.name, field=rule.field))
            continue
        if rule.allowed is not None and value not in rule.allowed:
            allowed = ", ".join(map(str, rule.allowed))
            found.append(
                ctx.msg(
                    "not_allowed",
                    rule=rule.name,
                    field=rule.field,
                    value=repr(value),
                    allowed=allowed,
                )
            )
        if rule.min is not None or rule.max is not None:
            found += _range(ctx, rule, value)
    return found


def _range(ctx: CheckContext, rule: Rule, value: Any) -> list[str]:
    number = _number(value)
    low = rule.min if rule.min is not None else float("-inf")
    high = rule.max if rule.max is not None else float("inf")
    if number is not None and low <= number <= high:
        return []
    return [ctx.msg("out_of_range", rule=rule.name, field=rule.field, value=repr(value),
                    min=_bound(rule.min), max=_bound(rule.max))]  # fmt: skip


def _bound(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@register("conclusion.rules", RulesParams)
def rules(ctx: CheckContext, params: RulesParams) -> Outcome:
    """The policy's business rules: a value within a set, a field required when another has
    a value, a numeric range; ``error`` rules fail the check, ``warn`` rules only warn."""
    data = ctx.assertion.payload
    errors: list[str] = []
    warnings: list[str] = []
    for rule in params.rules:
        try:
            found = violations(ctx, rule, data)
        except Exception as exc:  # a rule that cannot be evaluated is a violation, not a pass
            found = [ctx.msg("raised", rule=rule.name, error=f"{type(exc).__name__}: {exc}")]
        (errors if rule.severity == "error" else warnings).extend(found)
    if not errors and not warnings:
        return ok(ctx.msg("ok", count=len(params.rules)))
    reason = ctx.msg("fail", problems="; ".join(errors + warnings))
    outcome = fail(reason, ctx.msg("hint"), errors=errors, warnings=warnings)
    return outcome if errors else replace(outcome, warn_only=True)
