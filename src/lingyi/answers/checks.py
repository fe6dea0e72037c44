"""The answer kind's own checks: an answer renders as written and cites only what was found.

Each runs on assertions of type ``answer`` (``types = ["answer"]`` in a policy) and reads the
answer's Markdown twice: as written (what the user's renderer draws) and in canonical form
(what a look-alike, a full-width or an invisible character hides), failing if either fails.
URLs are compared on the canonical text, in :mod:`lingyi.text`'s normal form, against what
tools returned in the session (:meth:`SessionLedger.has_url`), as ``evidence.urls_recorded``
does for assertions.

=========================  ====================================================================
``answer.fences``          every code fence closed by a fence of its character, at least as long
``answer.links``           links and images parse (no target left open, refused or undefined)
``answer.mermaid``         Mermaid blocks closed, of a supported type, with blocks ended
``answer.urls_returned``   every cited URL and image URL returned by a tool in this session
``answer.catalog_sources`` a catalog question cites at least ``min_sources`` distinct sources
``answer.attempts``        which attempt at this question this is, of ``max_attempts``
=========================  ====================================================================
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, Regex, fail, ok, register
from lingyi.checks.evidence import urls_written
from lingyi.ledger import SessionLedger
from lingyi.text import canonical, canonical_text, fold_look_alikes

if TYPE_CHECKING:  # the parser loads with the first answer checked, not with the registry
    from lingyi.answers.markdown import Fence, Parsed


class NoParams(CheckParams):
    pass


def _forms(ctx: CheckContext) -> list[Parsed]:
    """The answer as written and in canonical form (cased: URLs keep their case)."""
    from lingyi.answers.markdown import parse

    written, canon = ctx.assertion.content, ctx.canon.cased
    return [parse(written)] if canon == written else [parse(written), parse(canon)]


@register("answer.fences", NoParams)
def fences(ctx: CheckContext, params: NoParams) -> Outcome:
    """Every fenced code block is closed (CommonMark: the same character, at least as long)."""
    open_ = {f"{f.line}:{f.markup}{f.info}" for p in _forms(ctx) for f in p.fences if not f.closed}
    if not open_:
        return ok(ctx.msg("ok", count=len(_forms(ctx)[0].fences)))
    lines = sorted(open_, key=lambda s: int(s.split(":")[0]))
    return fail(ctx.msg("fail", fences=", ".join(lines)), ctx.msg("hint"), unclosed=lines)


@register("answer.links", NoParams)
def links(ctx: CheckContext, params: NoParams) -> Outcome:
    """Links and images parse: no target left open, refused (javascript:) or undefined."""
    broken = list(dict.fromkeys(b for p in _forms(ctx) for b in p.broken))
    if not broken:
        return ok(ctx.msg("ok", count=len(_forms(ctx)[0].cited)))
    return fail(ctx.msg("fail", broken=" · ".join(broken)), ctx.msg("hint"), broken=broken)


MERMAID_TYPES = [
    "flowchart", "graph", "sequenceDiagram", "classDiagram", "stateDiagram", "stateDiagram-v2",
    "erDiagram", "journey", "gantt", "pie", "quadrantChart", "requirementDiagram", "gitGraph",
    "C4Context", "C4Container", "C4Component", "C4Dynamic", "C4Deployment", "mindmap",
    "timeline", "sankey-beta", "xychart-beta", "block-beta", "packet-beta", "kanban",
    "architecture-beta", "radar-beta",
]  # fmt: skip


class MermaidParams(CheckParams):
    types: list[str] = MERMAID_TYPES  # the diagram types the answers' renderer draws


@register("answer.mermaid", MermaidParams)
def mermaid(ctx: CheckContext, params: MermaidParams) -> Outcome:
    """Mermaid blocks are closed, start with a supported diagram type, and end their blocks."""
    supported = {t.lower(): t for t in params.types}
    problems: dict[str, str] = {}
    forms = _forms(ctx)
    for form in forms:
        for fence in _mermaid_blocks(form):
            for problem in _diagram(fence.body, fence.closed, supported):
                problems.setdefault(f"{fence.line}:{problem}", ctx.msg(problem, line=fence.line))
    if not problems:
        return ok(ctx.msg("ok", count=len(_mermaid_blocks(forms[0]))))
    return fail(
        "; ".join(problems.values()),
        ctx.msg("hint", types=", ".join(params.types)),
        problems=sorted(problems),
    )


def _mermaid_blocks(form: Parsed) -> list[Fence]:
    return [f for f in form.fences if f.info.split(" ")[0].lower() == "mermaid"]


def _diagram(body: str, closed: bool, supported: dict[str, str]) -> list[str]:
    from lingyi.answers.markdown import mermaid_problems, mermaid_type

    found = [] if closed else ["unclosed"]
    kind, lines = mermaid_type(body)
    if kind is None:
        return [*found, "no_type"]
    if kind.lower() not in supported:
        return [*found, "unknown_type"]
    return found + mermaid_problems(kind, lines)


# --- URLs: cited, and returned in this session --------------------------------------------


def cited_urls(ctx: CheckContext) -> tuple[list[str], list[str]]:
    """(links, images) the answer cites: see :func:`urls_cited`."""
    return urls_cited(ctx.assertion.content, ctx.policies.names)


def urls_cited(content: str, names: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(links, images) a text cites, canonical and cased: Markdown targets, HTML
    ``href``/``src`` and bare URLs in the text, each once."""
    from lingyi.answers.markdown import parse

    parsed = parse(canonical(content, names).cased)
    images = [c.url for c in parsed.cited if c.image]
    links = [c.url for c in parsed.cited if not c.image]
    links += [u for u in urls_written(content, names) if u not in images]
    return list(dict.fromkeys(links)), list(dict.fromkeys(images))


def _spoofed(ctx: CheckContext, url: str) -> bool:
    """Written with letters of another script that only look Latin (as evidence.urls_recorded)."""
    return any(fold_look_alikes(word) in url for word in ctx.canon.mixed)


@register("answer.urls_returned", NoParams)
def urls_returned(ctx: CheckContext, params: NoParams) -> Outcome:
    """Every cited URL and image URL is one a tool returned in this session (normal form)."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    links, images = cited_urls(ctx)

    def unknown(urls: list[str]) -> list[str]:
        return [u for u in urls if _spoofed(ctx, u) or not ledger.has_url(u)]

    bad_links, bad_images = unknown(links), unknown(images)
    if not bad_links and not bad_images:
        return ok(ctx.msg("ok", count=len(links) + len(images)))
    parts = [ctx.msg("links", urls=", ".join(bad_links))] if bad_links else []
    parts += [ctx.msg("images", urls=", ".join(bad_images))] if bad_images else []
    return fail(
        ctx.msg("fail", what="; ".join(parts)),
        ctx.msg("hint"),
        unknown_urls=bad_links,
        unknown_images=bad_images,
    )


# --- catalog questions --------------------------------------------------------------------

CATALOG_PATTERNS = [
    r"有哪些", r"哪些(?:文章|资料|文献|条目|内容)", r"有什么(?:文章|资料|文献)", r"列[出举]",
    r"清单", r"目录", r"都有什么",
    r"\bwhich (?:articles|documents|sources|entries|texts)\b",
    r"\bwhat (?:articles|documents|sources|entries|texts)\b",
    r"\blist (?:of |the |all )?(?:articles|documents|sources|entries)\b",
    r"\b(?:articles|documents) (?:on|about)\b",
]  # fmt: skip


class CatalogParams(CheckParams):
    min_sources: int = 4  # distinct retrieved sources a catalog answer must cite
    # Questions that ask for a list of what exists (canonical text: simplified, lower case).
    # A question that matches is a catalog question whatever intent the caller declared.
    patterns: list[Regex] = CATALOG_PATTERNS


@lru_cache(maxsize=64)
def _catalog_re(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def intent_of(ctx: CheckContext, patterns: list[str]) -> str:
    """``catalog`` when declared so or when the question asks for a list; else ``general``."""
    question = canonical_text(str(ctx.assertion.payload.get("question", "")))
    declared = ctx.assertion.payload.get("intent")
    asks = bool(patterns) and _catalog_re(tuple(patterns)).search(question) is not None
    return "catalog" if declared == "catalog" or asks else "general"


def distinct_sources(ledger: SessionLedger, urls: list[str]) -> list[str]:
    """The evidence ids behind the cited URLs that tools returned: two URLs of one document
    are one source."""
    ids = (item.key for url in urls for item in ledger.by_url(url)[:1])
    return list(dict.fromkeys(ids))


@register("answer.catalog_sources", CatalogParams)
def catalog_sources(ctx: CheckContext, params: CatalogParams) -> Outcome:
    """A catalog question ("which articles are there on …") cites enough distinct sources."""
    intent = intent_of(ctx, params.patterns)
    if intent != "catalog":
        return ok(ctx.msg("general"), intent=intent)
    ledger = ctx.ledger.session(ctx.assertion.session)
    links, _ = cited_urls(ctx)
    found = distinct_sources(ledger, [u for u in links if not _spoofed(ctx, u)])
    values = {"have": len(found), "need": params.min_sources}
    if len(found) >= params.min_sources:
        return ok(ctx.msg("ok", **values), intent=intent, sources=found)
    hint = ctx.msg("hint", **values)
    return fail(ctx.msg("fail", **values), hint, None, intent=intent, sources=found, **values)


# --- attempts per question -----------------------------------------------------------------


class AttemptParams(CheckParams):
    max_attempts: int = 3  # per question, member and session; at the limit: degraded


def attempts_key(member: str, question: str) -> str:
    """Where a session counts the attempts at one question (in canonical form) by a member."""
    digest = hashlib.sha256(canonical_text(question).strip().encode()).hexdigest()[:16]
    return f"answer.attempts:{member}:{digest}"


@register("answer.attempts", AttemptParams)
def attempts(ctx: CheckContext, params: AttemptParams) -> Outcome:
    """Which attempt this is; past ``max_attempts`` no answer to the question is verified."""
    key = attempts_key(ctx.member.id, str(ctx.assertion.payload.get("question", "")))
    state = ctx.ledger.session(ctx.assertion.session).state
    attempt, limit = int(state.get(key, 0)) + 1, params.max_attempts
    values = {"attempt": attempt, "max": limit}
    # What the answer becomes if it is degraded, in the member's language (lingyi.answers).
    degraded = {
        "degraded_answer": ctx.msg("answer.degraded.content"),
        "degraded_note": ctx.msg("answer.degraded.note"),
    }
    if attempt <= limit:
        return ok(ctx.msg("ok", **values), attempt=attempt, max_attempts=limit, **degraded)
    reason = ctx.msg("fail", **values)
    return fail(reason, ctx.msg("hint"), None, attempt=attempt, max_attempts=limit, **degraded)
