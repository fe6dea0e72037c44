"""The deterministic checks of a conclusion: pure functions of its payload and the ledger.

Each reads ``ctx.assertion.payload`` (what the conclusion kind built from the input) and runs
for entries with ``types = ["conclusion"]``. None of them trusts what the conclusion says of
itself: cited ids are compared with what the findings and the session really hold, a
specialist counts only with evidence of its own that the conclusion cites, a risk level is
read in canonical form (``HIGH`` is high), and trace ids are looked up, not believed.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from pydantic import Field

from lingyi._regex import lazy_re
from lingyi.backends._trace_ids import trace_key
from lingyi.checks._registry import CheckContext, CheckParams, Outcome, Regex, fail, ok, register
from lingyi.checks.evidence import held, unconfirmed
from lingyi.conclusions._read import (
    FallbackMarkers,
    Finding,
    actions,
    cited_ids,
    conclusion_of,
    findings,
    hypotheses,
    id_key,
)
from lingyi.text import canonical_text

# The parameters that say where a conclusion's findings are and what a placeholder looks like.


class FindingsParams(CheckParams):
    # The fields of ``findings`` that hold a specialist's finding (None: every field).
    findings: list[str] | None = None
    # A finding is a placeholder when one of these keys holds a true flag (true, 1, "yes")…
    fallback_keys: list[str] = ["fallback", "is_fallback", "placeholder", "degraded"]
    # …or one of these keys holds one of these values…
    fallback_value_keys: list[str] = ["status", "source", "kind", "type"]
    fallback_values: list[str] = ["fallback", "placeholder", "降级", "占位", "兜底"]
    # …or every id it holds is a placeholder id.
    placeholder_ids: Regex = (
        r"(?:fallback|placeholder|dummy|mock|n/?a|none|null|tbd|todo|unknown)(?:[-_:./].*)?"
    )

    @cached_property
    def markers(self) -> FallbackMarkers:
        """Computed once per policy load (the parameters do not change after it)."""
        return FallbackMarkers(
            keys=tuple(canonical_text(k).strip() for k in self.fallback_keys),
            value_keys=tuple(canonical_text(k).strip() for k in self.fallback_value_keys),
            values=tuple(canonical_text(v).strip() for v in self.fallback_values),
            ids=re.compile(self.placeholder_ids),
        )

    @cached_property
    def fields(self) -> frozenset[str] | None:
        return (
            None if self.findings is None else frozenset(canonical_text(f) for f in self.findings)
        )

    def read(self, ctx: CheckContext) -> list[Finding]:
        return list(findings(ctx.assertion.payload, self.fields, self.markers))


def _ids(items: list[str]) -> str:
    return ", ".join(items)


# --- conclusion.schema --------------------------------------------------------------------


class SchemaParams(CheckParams):
    confidence: list[str] = ["高", "中", "低", "high", "medium", "low"]
    risk_levels: list[str] = ["high", "medium", "low"]
    # Revisions of one conclusion in a session before its route is final (read by the route).
    max_revisions: int = Field(2, ge=0)


@register("conclusion.schema", SchemaParams)
def schema(ctx: CheckContext, params: SchemaParams) -> Outcome:
    """Confidence within the allowed values (exactly), a risk level absent or allowed,
    hypotheses and actions lists of objects, verify_first a boolean."""
    body = conclusion_of(ctx.assertion.payload)
    problems = _summary(ctx, body) + _confidence(ctx, body, params.confidence)
    problems += _hypotheses(ctx, body.get("hypotheses"), params.risk_levels)
    if "evidence_ids" in body and not isinstance(body["evidence_ids"], list):
        problems.append(ctx.msg("not_list", field="conclusion.evidence_ids"))
    route = {"max_revisions": params.max_revisions, "lang": ctx.lang}
    if not problems:
        return ok(ctx.msg("ok"), route=route)
    values = {"confidence": " / ".join(params.confidence), "risk": " / ".join(params.risk_levels)}
    return fail(ctx.msg("fail", problems="; ".join(problems)), ctx.msg("hint", **values),
                violations=problems, route=route)  # fmt: skip


def _summary(ctx: CheckContext, body: dict[str, Any]) -> list[str]:
    summary = body.get("summary")
    ok_ = isinstance(summary, str) and summary.strip()
    return [] if ok_ else [ctx.msg("missing", field="conclusion.summary")]


def _confidence(ctx: CheckContext, body: dict[str, Any], allowed: list[str]) -> list[str]:
    return _value(ctx, "conclusion.confidence", body.get("confidence"), allowed, required=True)


def _value(
    ctx: CheckContext, field: str, value: Any, allowed: list[str], *, required: bool
) -> list[str]:
    """Exactly one of ``allowed``: "High " and "HIGH" are near misses, named as such, since
    whatever reads the conclusion next (a pager, a runbook) matches the value exactly."""
    if value is None:
        return [ctx.msg("missing", field=field)] if required else []
    if isinstance(value, str) and value in allowed:
        return []
    near = next(
        (
            a
            for a in allowed
            if isinstance(value, str) and canonical_text(value).strip() == canonical_text(a)
        ),
        None,
    )
    shown = ", ".join(allowed)
    if near is not None:
        return [ctx.msg("near_miss", field=field, value=repr(value), near=near, allowed=shown)]
    return [ctx.msg("invalid", field=field, value=repr(value), allowed=shown)]


def _hypotheses(ctx: CheckContext, value: Any, risk_levels: list[str]) -> list[str]:
    if not isinstance(value, list):
        return [ctx.msg("not_list", field="conclusion.hypotheses")]
    problems: list[str] = []
    for i, hypothesis in enumerate(value):
        where = f"conclusion.hypotheses[{i}]"
        if not isinstance(hypothesis, dict):
            problems.append(ctx.msg("not_object", field=where))
            continue
        if not (isinstance(hypothesis.get("text"), str) and hypothesis["text"].strip()):
            problems.append(ctx.msg("missing", field=f"{where}.text"))
        risk = hypothesis.get("risk_level")
        problems += _value(ctx, f"{where}.risk_level", risk, risk_levels, required=False)
        problems += _actions(ctx, where, hypothesis.get("actions"))
    return problems


def _actions(ctx: CheckContext, where: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        return [ctx.msg("not_list", field=f"{where}.actions")]
    problems: list[str] = []
    for j, action in enumerate(value):
        at = f"{where}.actions[{j}]"
        if not isinstance(action, dict):
            problems.append(ctx.msg("not_object", field=at))
        elif not (isinstance(action.get("name"), str) and action["name"].strip()):
            problems.append(ctx.msg("missing", field=f"{at}.name"))
        elif "verify_first" in action and not isinstance(action["verify_first"], bool):
            problems.append(
                ctx.msg("not_bool", field=f"{at}.verify_first", value=repr(action["verify_first"]))
            )
    return problems


# --- conclusion.fabricated_evidence -------------------------------------------------------


@register("conclusion.fabricated_evidence", FindingsParams)
def fabricated_evidence(ctx: CheckContext, params: FindingsParams) -> Outcome:
    """Cited ids minus what the findings and the session's ledger really hold (a set
    difference; ids compared in one form; a placeholder finding holds nothing)."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    real = {id_key(i) for f in params.read(ctx) if not f.fallback for i in f.ids}
    cited = cited_ids(ctx.assertion.payload)
    missing = [c for c in cited if id_key(c) not in real and not held(ledger, c)]
    if not missing:
        return ok(ctx.msg("ok", count=len(cited)))
    return fail(
        ctx.msg("fail", ids=_ids(missing)), ctx.msg("hint", ids=_ids(missing)), fabricated=missing
    )


# --- conclusion.corroboration -------------------------------------------------------------


class CorroborationParams(FindingsParams):
    min_specialists: int = Field(2, ge=1)


@register("conclusion.corroboration", CorroborationParams)
def corroboration(ctx: CheckContext, params: CorroborationParams) -> Outcome:
    """At least ``min_specialists`` specialists back the conclusion, each with evidence of its
    own that the conclusion cites; a placeholder finding does not count, nor does a second
    finding that only repeats evidence another already gave."""
    cited = {id_key(c) for c in cited_ids(ctx.assertion.payload)}
    credited: set[str] = set()
    backing: list[str] = []
    placeholders: list[str] = []
    for finding in params.read(ctx):
        if finding.fallback:
            placeholders.append(finding.specialist)
            continue
        fresh = {id_key(i) for i in finding.ids} & cited - credited
        if fresh:
            backing.append(finding.specialist)
            credited |= fresh
    values = {"count": len(backing), "min": params.min_specialists, "names": _ids(backing) or "-"}
    if len(backing) >= params.min_specialists:
        return ok(ctx.msg("ok", **values), specialists=backing)
    reason = ctx.msg("fail", **values)
    if placeholders:
        reason += ctx.msg("placeholders", names=_ids(placeholders))
    return fail(
        reason,
        ctx.msg("hint", min=params.min_specialists),
        specialists=backing,
        placeholders=placeholders,
    )


# --- conclusion.verify_first --------------------------------------------------------------


class VerifyFirstParams(CheckParams):
    # Risk levels (canonical: "HIGH", " high", "ｈｉｇｈ" are high) whose actions need verify_first.
    high_risk: list[str] = ["high", "高", "高风险", "critical", "严重"]
    # Actions that need verify_first under any hypothesis: the name starts with one of these
    # (words of the name, in any case or separator: RollBack, roll-back, roll_back).
    risky_actions: list[str] = [
        "restart", "reboot", "rollback", "roll back", "revert", "redeploy", "failover",
        "drain", "delete", "kill", "scale to zero", "scale down to zero",
        "重启", "回滚", "删除", "下线", "切流", "缩容到0", "缩容至0", "缩到0",
    ]  # fmt: skip
    # Scaling to zero, whatever the action is called: one of these arguments set to 0.
    zero_args: list[str] = ["replicas", "instances", "count", "size", "desired"]

    @cached_property
    def phrases(self) -> tuple[str, ...]:
        """The risky action phrases as words, once per policy load."""
        return tuple(action_words(p) for p in self.risky_actions)

    @cached_property
    def high(self) -> frozenset[str]:
        return frozenset(canonical_text(h).strip() for h in self.high_risk)


_CAMEL = lazy_re(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = lazy_re(r"[\s_\-./:]+")


def action_words(name: str) -> str:
    """An action's name as words: ``RollBack``, ``roll-back`` and ``ROLL_BACK`` → "roll back"."""
    spaced = _CAMEL.sub(" ", name)
    return _SEPARATORS.sub(" ", canonical_text(spaced)).strip()


def _risky_name(words: str, phrases: tuple[str, ...]) -> bool:
    for target in phrases:
        if words == target or words.startswith(target + " "):
            return True
        if not target.isascii() and words.startswith(target):  # Chinese has no spaces
            return True
    return False


def _to_zero(action: dict[str, Any], keys: list[str]) -> bool:
    args = action.get("args")
    if not isinstance(args, dict):
        return False
    return any(
        k in keys and (v == 0 or v == "0") and not isinstance(v, bool) for k, v in args.items()
    )


@register("conclusion.verify_first", VerifyFirstParams)
def verify_first(ctx: CheckContext, params: VerifyFirstParams) -> Outcome:
    """Every action under a high-risk hypothesis, and every risky action (a restart, a
    rollback, scaling to zero) anywhere, carries ``verify_first: true``."""
    high = params.high
    problems: list[str] = []
    for i, hypothesis in enumerate(hypotheses(ctx.assertion.payload)):
        risk = hypothesis.get("risk_level")
        is_high = isinstance(risk, str) and canonical_text(risk).strip() in high
        for j, action in enumerate(actions(hypothesis)):
            if action.get("verify_first") is True:
                continue
            name = str(action.get("name", ""))
            risky = _risky_name(action_words(name), params.phrases) or _to_zero(
                action, params.zero_args
            )
            if is_high or risky:
                why = ctx.msg("high_risk", risk=risk) if is_high else ctx.msg("risky")
                problems.append(
                    ctx.msg("missing", at=f"hypotheses[{i}].actions[{j}]", name=name, why=why)
                )
    if not problems:
        return ok(ctx.msg("ok"))
    return fail(ctx.msg("fail", problems="; ".join(problems)), ctx.msg("hint"), violations=problems)


# --- conclusion.traces --------------------------------------------------------------------


class TracesParams(FindingsParams):
    tools: list[str] = ["query_traces"]  # the tools that find trace ids, named in the hint
    # Which ids are trace ids (canonical, lower case): 24-32 hex digits or the UUID form.
    pattern: Regex = r"[0-9a-f]{24,32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def trace(self, written: str) -> str | None:
        """The id's compared form when it is a trace id by the policy's pattern."""
        return trace_key(written) if self.compiled.fullmatch(written.strip().lower()) else None


@register("conclusion.traces", TracesParams)
def traces(ctx: CheckContext, params: TracesParams) -> Outcome:
    """Trace ids the conclusion or its findings give that no tool returned in this session
    are looked up in the trace backend; missing ones (404, no spans) fail. An outage raises:
    the entry's on_error decides, and the result is recorded as degraded."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    given = cited_ids(ctx.assertion.payload) + [
        i for f in params.read(ctx) if not f.fallback for i in f.ids
    ]
    keys = list(
        dict.fromkeys(
            k
            for i in given
            if (k := params.trace(i)) and not held(ledger, i) and not held(ledger, k)
        )
    )
    missing = unconfirmed(ctx, keys)
    if not missing:
        return ok(ctx.msg("ok", count=len(keys)), confirmed_by_lookup=keys)
    tools = ", ".join(params.tools)
    backend = ctx.services.traces is not None or ctx.services.trace_lookup is not None
    reason = ctx.msg("fail" if backend else "no_backend", ids=_ids(missing))
    return fail(
        reason, ctx.msg("evidence.traces.hint", ids=_ids(missing), tools=tools), missing=missing
    )
