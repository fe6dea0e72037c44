"""fact_verification: evidence comes from the session ledger, not from the assertion.

- cited evidence ids must have been recorded in this session (fabricated = cited − recorded);
- ids matching configured patterns in free text (32-hex trace ids) must be recorded, or
  confirmed by the configured lookup (its failures follow ``on_error``);
- a fact about a verifiable subject (the KB, a repo, a data set) needs related evidence
  recorded earlier in the same session by a tool that covers that subject;
- cited URLs must be among the URLs tools returned in the session.
"""

from __future__ import annotations

import re

from lingyi.checks._registry import (
    CheckContext,
    CheckParams,
    Outcome,
    Regex,
    fail,
    ok,
    register,
)
from lingyi.checks.inference import is_inference
from lingyi.models import Evidence
from lingyi.text._lang import concepts, content_query, terms


class NoParams(CheckParams):
    pass


@register("evidence.cited_ids_exist", NoParams)
def cited_ids_exist(ctx: CheckContext, params: NoParams) -> Outcome:
    """Every cited evidence id was recorded by a tool in this session."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    missing = [i for i in ctx.assertion.evidence_ids if not ledger.has(i)]
    if not missing:
        return ok(ctx.msg("ok", count=len(ctx.assertion.evidence_ids)))
    return fail(ctx.msg("fail", ids=", ".join(missing)), ctx.msg("hint"), fabricated=missing)


class IdPatternParams(CheckParams):
    patterns: dict[str, Regex] = {"trace": r"\b[0-9a-f]{32}\b"}
    tools: list[str] = []  # tools that look these ids up, named in the recommendation


@register("evidence.id_patterns", IdPatternParams)
def id_patterns(ctx: CheckContext, params: IdPatternParams) -> Outcome:
    """Ids that match configured patterns in the text must be recorded or confirmed."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    found = {m for p in params.patterns.values() for m in re.findall(p, ctx.assertion.content)}
    unknown = sorted(i for i in found if not ledger.has(i))
    lookup = ctx.services.trace_lookup  # raises on outage: the layer applies on_error
    missing = [i for i in unknown if lookup is None or not lookup(i)]
    if missing:
        tools = ", ".join(params.tools)
        return fail(
            ctx.msg("fail", ids=", ".join(missing)),
            ctx.msg("hint_tools", tools=tools) if tools else ctx.msg("hint"),
            unconfirmed=missing,
        )
    return ok(
        ctx.msg("ok", count=len(found)),
        confirmed_by_lookup=[i for i in unknown if i not in missing],
    )


class SubjectSpec(CheckParams):
    markers: list[str]
    tools: list[str]
    lookup: str | None = None  # a lookup service the server provides, e.g. "knowledge_base"


class SubjectParams(CheckParams):
    subjects: dict[str, SubjectSpec]
    stop_terms: list[str] = []


@register("evidence.subject_supported", SubjectParams)
def subject_supported(ctx: CheckContext, params: SubjectParams) -> Outcome:
    """A fact about a verifiable subject needs related evidence from this session.

    Where a lookup service is configured for the subject (the KB), the check may verify
    actively: it searches, and passes with what it found in ``Outcome.found``.
    """
    text = ctx.assertion.content
    lower = text.lower()
    subjects = {
        n: s for n, s in params.subjects.items() if any(m.lower() in lower for m in s.markers)
    }
    if not subjects or ctx.assertion.evidence_ids or _mentions_recorded(ctx):
        return ok(ctx.msg("nothing"))
    if is_inference(text):  # a prediction is not a fact; inference.labelled handles it
        return ok(ctx.msg("inference"))
    found: list[Evidence] = []
    for name, spec in subjects.items():
        claim = _claim_terms(ctx, spec, params.stop_terms)
        if _supported(ctx, spec, claim):
            continue
        looked_up = _look_up(ctx, spec, claim, params.stop_terms)
        if not looked_up:
            return _unsupported(ctx, name, spec)
        found += looked_up
    if found:
        return _found(ctx, found)
    return ok(ctx.msg("ok", subjects=ctx.msg("sep").join(subjects)))


def _mentions_recorded(ctx: CheckContext) -> bool:
    """The text itself names an id or URL a tool returned in this session: a citation."""
    text = ctx.assertion.content
    ledger = ctx.ledger.session(ctx.assertion.session)
    return any(u in text for u in ledger.urls) or any(
        len(i) >= 5 and i in text for i in ledger.by_id
    )


def _claim_terms(ctx: CheckContext, spec: SubjectSpec, stop: list[str]) -> set[str]:
    stripped = _strip(ctx.assertion.content, [*spec.markers, *stop])
    # Markers say what the fact is about; their concepts (准确率 = accuracy) still relate.
    return terms(stripped) | {f"@{c}" for c in concepts(ctx.assertion.content)}


def _related(claim: set[str], item: Evidence) -> bool:
    return bool(claim & terms(f"{item.title} {item.snippet}"))


def _supported(ctx: CheckContext, spec: SubjectSpec, claim: set[str]) -> bool:
    ledger = ctx.ledger.session(ctx.assertion.session)
    return any(_related(claim, item) for item in ledger.from_tools(set(spec.tools)))


def _look_up(
    ctx: CheckContext, spec: SubjectSpec, claim: set[str], stop: list[str]
) -> list[Evidence]:
    """Search the subject ourselves (raises on outage: the layer applies on_error)."""
    lookup = ctx.services.lookups.get(spec.lookup) if spec.lookup else None
    if lookup is None:
        return []
    query = content_query(_strip(ctx.assertion.content, [*spec.markers, *stop]))
    return [item for item in lookup(query) if _related(claim, item)] if query else []


def _found(ctx: CheckContext, found: list[Evidence]) -> Outcome:
    ids = ", ".join(e.id for e in found)
    return Outcome(True, ctx.msg("found", ids=ids), found=tuple(found))


def _strip(text: str, words: list[str]) -> str:
    for word in sorted(words, key=len, reverse=True):
        text = re.sub(re.escape(word), " ", text, flags=re.IGNORECASE)
    return text


def _unsupported(ctx: CheckContext, name: str, spec: SubjectSpec) -> Outcome:
    return fail(
        ctx.msg("fail", subject=name),
        ctx.msg("hint", tools=", ".join(spec.tools)),
        subject=name,
        tools=spec.tools,
    )


class UrlParams(CheckParams):
    pass


_URL = re.compile(r"https?://[^\s)）\]>\"'，。]+")


@register("evidence.urls_recorded", UrlParams)
def urls_recorded(ctx: CheckContext, params: UrlParams) -> Outcome:
    """URLs cited in the text must be among those that tools returned in this session."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    urls = [u.rstrip(".,;") for u in _URL.findall(ctx.assertion.content)]
    missing = [u for u in urls if u not in ledger.urls]
    if not missing:
        return ok(ctx.msg("ok", count=len(urls)))
    return fail(ctx.msg("fail", urls=", ".join(missing)), ctx.msg("hint"), fabricated=missing)
