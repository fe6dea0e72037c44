"""fact_verification: evidence comes from the session ledger, not from the assertion.

- cited evidence ids must have been recorded in this session (fabricated = cited − recorded);
- ids in the text that match configured patterns (kb:…, an-…, 24–32 hex trace ids in any
  case or in UUID form, commit SHAs) must be recorded, or confirmed by the configured lookup;
- URLs in the text must be among those tools returned in the session, compared in normal
  form (scheme and host case, www., default port, trailing slash, fragment); a URL spelled
  with look-alike letters is not the URL a tool returned;
- a fact about a verifiable subject must agree with its evidence: evidence.subject_supported,
  in :mod:`lingyi.checks.facts` (loaded with the built-in checks).

All of them read the canonical content (``ctx.canon``), whatever the declared type: a fact
sent as ``communication`` or ``action`` is still a fact. Inside another member's relayed
words, an id or a URL that member posted on the council record is on record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from lingyi.backends._trace_ids import trace_key
from lingyi.checks._asserted import masked
from lingyi.checks._registry import (
    CheckContext,
    CheckParams,
    Outcome,
    Regex,
    fail,
    nothing_to_read,
    ok,
    register,
)
from lingyi.checks.relays import Relay, find_relays
from lingyi.ledger import SessionLedger, evidence_key, is_hex_id
from lingyi.text import Canonical, canonical, canonical_text, extract_urls, fold_look_alikes


class NoParams(CheckParams):
    pass


@register("evidence.cited_ids_exist", NoParams)
def cited_ids_exist(ctx: CheckContext, params: NoParams) -> Outcome:
    """Every cited evidence id was recorded by a tool in this session (in any case or form)."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    cited = list(dict.fromkeys(ctx.assertion.evidence_ids))
    missing = [i for i in cited if not ledger.has(i)]
    if not missing:
        return ok(ctx.msg("ok", count=len(cited)))
    return fail(ctx.msg("fail", ids=", ".join(missing)), ctx.msg("hint"), fabricated=missing)


# --- ids and URLs in the text ------------------------------------------------------------


def relays(ctx: CheckContext) -> list[Relay]:
    """Where the content reports another member's words (canonical positions)."""
    return find_relays(ctx.canon.text, ctx.policies, ctx.member.id)


def _on_record(ctx: CheckContext, spans: list[Relay], at: int, written: str) -> bool:
    """Inside another member's relayed words, an id or URL that member posted is on record."""
    for relay in spans:
        if relay.start <= at < relay.end:
            member = ctx.policies.members.get(relay.member)
            names = member.names if member else [relay.member]
            posts = (m.content for n in names for m in ctx.council.messages_from(n))
            return any(written in canonical_text(p) for p in posts)
    return False


class IdPatternParams(CheckParams):
    # Regexes for canonical (lower-case) text; a group named "id" marks the id inside a
    # wider match (r"commit\s+(?P<id>[0-9a-f]{7,40})"). Word edges are added around each.
    patterns: dict[str, Regex] = {"trace": r"[0-9a-f]{32}"}
    tools: list[str] = []  # tools that look these ids up, named in the recommendation


@lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(rf"(?<![0-9a-z_])(?:{p})(?![0-9a-z_])") for p in patterns)


def ids_in(text: str, patterns: Iterable[str]) -> dict[str, tuple[str, int, str]]:
    """evidence_key → (the id as written, where, the whole match): each id once.

    A pattern's "id" group is the id; the whole match ("commit:4be91c7") may be how a
    tool recorded it.
    """
    found: dict[str, tuple[str, int, str]] = {}
    for pattern in _compiled(tuple(patterns)):
        for match in pattern.finditer(text):
            group = "id" if "id" in pattern.groupindex else 0
            written = match.group(group)
            found.setdefault(evidence_key(written), (written, match.start(group), match.group(0)))
    return found


@lru_cache(maxsize=64)
def _finds_in_nothing(patterns: tuple[str, ...]) -> bool:
    """Does a pattern match the empty text (a policy's odd regex)? Then "" is read too."""
    return bool(ids_in("", patterns))


def _recorded_urls_masked(ctx: CheckContext, ledger: SessionLedger) -> str:
    """The canonical text with the URLs a tool returned blanked: ids inside them are cited."""
    spans = [(s, e, " ") for url, s, e in urls_in(ctx) if ledger.has_url(url)]
    return masked(ctx.canon, spans).text


@register("evidence.id_patterns", IdPatternParams)
def id_patterns(ctx: CheckContext, params: IdPatternParams) -> Outcome:
    """Ids that match configured patterns in the text must be recorded or confirmed."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    if nothing_to_read(ctx) and not _finds_in_nothing(tuple(params.patterns.values())):
        return ok(ctx.msg("ok", count=0), confirmed_by_lookup=[])
    found = ids_in(_recorded_urls_masked(ctx, ledger), params.patterns.values())
    spans = relays(ctx) if found else []
    unknown = [
        key
        for key, (written, at, whole) in found.items()
        if not (held(ledger, key) or ledger.has(whole) or _on_record(ctx, spans, at, written))
    ]
    missing = unconfirmed(ctx, unknown)  # raises on outage: the layer applies on_error
    if missing:
        tools = ", ".join(params.tools)
        traces = [k for k in missing if trace_key(k)]
        hint = ctx.msg("hint_tools", tools=tools) if tools else ctx.msg("hint")
        if traces:
            hint = ctx.msg(
                "evidence.traces.hint", ids=", ".join(traces), tools=tools or "query_traces"
            )
        return fail(ctx.msg("fail", ids=", ".join(missing)), hint, unconfirmed=missing)
    confirmed = [k for k in unknown if k not in missing]
    return ok(ctx.msg("ok", count=len(found)), confirmed_by_lookup=confirmed)


def held(ledger: SessionLedger, key: str) -> bool:
    """Recorded in the session, as written or (a trace id) in its padded 32-digit form."""
    padded = trace_key(key)
    return ledger.has(key) or (padded is not None and ledger.has(padded))


def unconfirmed(ctx: CheckContext, keys: list[str]) -> list[str]:
    """The ids the trace backend does not confirm (all of them when there is none).

    Trace ids go to the backend in one batch (looked up once each, at bounded concurrency,
    confirmed ones cached); other ids cannot be confirmed there. Raises on an outage.
    """
    traces, lookup = ctx.services.traces, ctx.services.trace_lookup
    if traces is not None:
        asked = {k: trace_key(k) for k in keys}
        found = traces.exists(v for v in asked.values() if v) if any(asked.values()) else {}
        return [k for k in keys if not found.get(asked[k] or "")]
    return [k for k in keys if lookup is None or not is_hex_id(k) or not lookup(k)]


# Full-width punctuation ends a URL as written, though NFKC makes it ASCII ("，" → ","); a
# full-width colon still belongs to a scheme ("https：／／"). Each becomes "、", which NFKC
# keeps and a URL never holds, so that positions stay those of the canonical text.
_STOPS = re.compile("[，。；！？（）【】「」『』《》\u3000]|：(?![／/])")


def urls_in(ctx: CheckContext) -> list[tuple[str, int, int]]:
    """(url, start, end) of each URL in the content, canonical (cased) and cut where it ends."""
    if "http" not in ctx.canon.text:
        return []
    return list(_urls(ctx.assertion.content, ctx.policies.names))


def urls_written(content: str, names: tuple[str, ...] = ()) -> list[str]:
    """The URLs of a text as :func:`urls_in` finds them (canonical, cased), without a context."""
    return [url for url, _, _ in _urls(content, names)]


@lru_cache(maxsize=1024)
def _urls(content: str, names: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    cased = canonical(_STOPS.sub("、", content), names).cased
    out, at = [], 0
    for url in extract_urls(cased):
        start = cased.find(url, at)
        out.append((url, start, start + len(url)))
        at = start + len(url)
    return tuple(out)


def _look_alike(canon: Canonical, url: str) -> bool:
    """Was the URL written with letters of another script that only look Latin?"""
    return any(fold_look_alikes(word) in url for word in canon.mixed)


class UrlParams(CheckParams):
    pass


@register("evidence.urls_recorded", UrlParams)
def urls_recorded(ctx: CheckContext, params: UrlParams) -> Outcome:
    """URLs in the text must be among those that tools returned in this session."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    urls = urls_in(ctx)
    spans = relays(ctx) if urls else []
    spoofed = [u for u, _, _ in urls if _look_alike(ctx.canon, u)]
    missing = [
        u
        for u, start, _ in urls
        if u in spoofed or not (ledger.has_url(u) or _on_record(ctx, spans, start, u.lower()))
    ]
    if not missing:
        return ok(ctx.msg("ok", count=len(urls)))
    reason = ctx.msg("fail", urls=", ".join(dict.fromkeys(missing)))
    if spoofed:
        reason += ctx.msg("sep") + ctx.msg("look_alike", urls=", ".join(spoofed))
    return fail(reason, ctx.msg("hint"), fabricated=missing, look_alike=spoofed)
