"""communication: what another member said or did must be on the record.

A claim names a council member (灵通说…, "LingFlow told me…"). It matches when a
message from that member on the council record, or recorded evidence of that member's
work, carries the same versions, the same topic and no contradicting status
(尚未开始 vs 已经完成). Reported speech of a non-member (用户说…) is not a council claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.policy import MemberPolicy, PolicySet
from lingyi.text._lang import (
    bigrams,
    concepts,
    lang_of,
    neutral_terms,
    status,
    terms,
    versions,
    words,
)

_VERB_ZH = r"(?:刚才|之前|刚刚|已经|昨天|今天|上午|下午)?(?:跟我|对我|和我)?(?:说过|说|表示|告诉我|告诉|称|提到|提醒|强调|透露|说明|确认|报告|反馈|通知|讲|回复|宣布|在群里说)(?:了|过)?"
_VERB_EN = (
    r"(?:has |had )?(?:said|says|told (?:me|us)|tells (?:me|us)|reported|reports|confirmed|"
    r"confirms|mentioned|mentions|announced|announces|stated|states|wrote|writes|noted|notes|"
    r"claims|claimed)(?: that)?"
)


@dataclass(frozen=True)
class Claim:
    member: str
    text: str


@lru_cache(maxsize=64)
def _claim_pattern(names: tuple[str, ...], speech: bool) -> re.Pattern[str]:
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    verb = f"(?:{_VERB_ZH}|{_VERB_EN})" + ("" if speech else "?")
    return re.compile(
        rf"(?:据|according to\s+)?(?P<name>{alt})(?:的消息|'s message)?\s*{verb}[\s,，:：]*(?P<claim>.*)",
        re.IGNORECASE | re.DOTALL,
    )


def find_claim(
    text: str, policies: PolicySet, speaker: str, *, speech: bool = False
) -> Claim | None:
    """The first claim in ``text`` about a member other than ``speaker``.

    With ``speech``, only reported speech counts (灵通说…), not any mention of the member.
    """
    names = tuple(n for m in policies.members.values() for n in m.names)
    for match in _claim_pattern(names, speech).finditer(text):
        member = policies.resolve(match.group("name"))
        if member and member.id != speaker and _is_word(text, match):
            return Claim(member.id, match.group("claim").strip() or text)
    return None


def _is_word(text: str, match: re.Match[str]) -> bool:
    """Latin names must stand alone ("LingFlow", not "LingFlowBot")."""
    start, end = match.span("name")
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())


@dataclass(frozen=True)
class Match:
    """Whether a record supports a claim, and why: a message of ``communication.on_record``."""

    ok: bool
    why: str  # the message name in the catalog, filled with ``values``
    values: dict[str, str] = field(default_factory=dict)
    contradicts: bool = False  # the record says the opposite about the same work


def compare(claim: str, record: str) -> Match:
    """Does ``record`` support ``claim``? Versions, status and topic must agree.

    The first clause carries the claim; every further clause (而且…, "and found…") must be
    supported too, so an embellished relay does not pass on the strength of its first half.
    """
    cv, rv = versions(claim), versions(record)
    if cv and not cv <= rv:
        values = {"claim": ", ".join(sorted(cv)), "record": ", ".join(sorted(rv))}
        return Match(False, "version_differs" if rv else "version_absent", values)
    cn, rn = neutral_terms(claim), neutral_terms(record)
    if rn and not cn <= rn:  # 7月25日 is not 7月15日; 1932 is 1,932
        return Match(False, "numbers_differ", {"numbers": ", ".join(sorted(cn - rn))})
    cs, rs = status(claim), status(record)
    if cs and rs and cs != rs:
        return Match(False, f"status_claimed_{cs}", contradicts=True)
    for extra in clauses(claim)[1:]:
        if not _extra_supported(extra, record):
            return Match(False, "clause_missing", {"clause": extra.strip()})
    return _topic_match(claim, record)


# Chinese clauses end at ，；。 or a connective. English commas mostly join appositives
# ("PR #482, the power fix, is merged") and numbers (2,316), so English splits only at
# ';' and at connectives that add a claim.
_CLAUSE = re.compile(
    r"[，；;。]\s*(?:而且|并且|另外|同时|此外|但是|但)?|而且|并且|另外|此外|"
    r",?\s+and\s+(?=also |found |there |it |no |she |he |they |we |i )|,?\s+(?:but|while)\s+",
    re.IGNORECASE,
)


def clauses(claim: str) -> list[str]:
    """The claim split at clause boundaries; empty pieces dropped."""
    return [c for c in _CLAUSE.split(claim) if c and c.strip(" .。")] or [claim]


def _extra_supported(clause: str, record: str) -> bool:
    """Same language: half its words, or two of them, are in the record. Across: its concepts."""
    if lang_of(clause) != lang_of(record):
        return concepts(clause) <= concepts(record)
    ct = bigrams(clause) | words(clause)
    shared = len(ct & (bigrams(record) | words(record)))
    return not ct or shared >= 2 or shared / len(ct) >= 0.5


def _topic_match(claim: str, record: str) -> Match:
    cc, rc = concepts(claim), concepts(record)
    if cc and (missing := cc - rc):
        return Match(False, "topic_missing", {"topics": ", ".join(sorted(missing))})
    if lang_of(claim) != lang_of(record):
        return _across_languages(claim, record, cc)
    if cc:
        return Match(True, "same_topic")
    ct, rt = terms(claim), terms(record)
    share = len(ct & rt) / max(1, len(ct))
    return Match(share >= 0.4, "terms_shared", {"share": f"{share:.0%}"})


def _across_languages(claim: str, record: str, cc: frozenset[str]) -> Match:
    """Across languages only concepts, numbers, ids and shared literals (道家, PR #482) compare.

    :func:`compare` has already required every number to agree; the claim must share two
    concepts, or one concept plus a number, id or literal, with the record.
    """
    shared_numbers = neutral_terms(claim) & neutral_terms(record)
    literal = {t for t in terms(claim) & terms(record) if not t.startswith("@")}
    agree = len(cc) >= 2 or bool(shared_numbers or literal)
    return Match(agree, "across_agree" if agree else "across_little")


class CommunicationParams(CheckParams):
    use_work_evidence: bool = True


@register("communication.on_record", CommunicationParams)
def on_record(ctx: CheckContext, params: CommunicationParams) -> Outcome:
    """A claim about another member's words or work must match that member's record."""
    claim = find_claim(ctx.assertion.content, ctx.policies, ctx.member.id)
    if claim is None:
        return ok(ctx.msg("no_claim"))
    member = ctx.policies.members[claim.member]
    records = _records(ctx, member, params.use_work_evidence)
    results = [(rid, text, compare(claim.text, text)) for rid, text in records]
    if found := _supporting(claim.text, results):
        return ok(ctx.msg("ok", **_who(member), record=found), member=member.id, matched=found)
    return _not_on_record(ctx, member, claim, results)


def _supporting(claim: str, results: list[tuple[str, str, Match]]) -> str | None:
    """The id of the record that supports the claim, unless a closer record contradicts it.

    "iOS v2.4.1 is done" matches "Android v2.4.1 submitted" loosely, but the iOS message
    that says it failed is closer: the claim is about that one.
    """
    wanted = terms(claim) | neutral_terms(claim)

    def closeness(text: str) -> int:
        return len(wanted & (terms(text) | neutral_terms(text)))

    supported = [(closeness(t), rid) for rid, t, m in results if m.ok]
    contradicted = [closeness(t) for _, t, m in results if m.contradicts]
    if not supported:
        return None
    best, rid = max(supported)
    return rid if best >= max(contradicted, default=-1) else None


def _records(ctx: CheckContext, member: MemberPolicy, use_work: bool) -> list[tuple[str, str]]:
    msgs = [(m.id, m.content) for name in member.names for m in ctx.council.messages_from(name)]
    if use_work:
        msgs += [
            (e.id, f"{entry.tool} {entry.arguments} {e.title} {e.snippet}")
            for entry in ctx.ledger.entries_by(member.id)
            for e in entry.evidence
        ]
    return list(dict.fromkeys(msgs))


def _who(member: MemberPolicy) -> dict[str, str]:
    """A member as messages name it: by display name (灵通) or by id (lingflow)."""
    return {"name": member.name, "id": member.id}


def _not_on_record(
    ctx: CheckContext, member: MemberPolicy, claim: Claim, results: list[tuple[str, str, Match]]
) -> Outcome:
    if not results:
        why = ctx.msg("no_messages", **_who(member))
    else:
        rid, _, match = _closest(claim.text, results)
        closest = ctx.msg(match.why, **match.values)
        why = ctx.msg("no_match", **_who(member), record=rid, closest=closest)
    return fail(
        ctx.msg("fail", why=why),
        ctx.msg("hint", **_who(member)),
        member=member.id,
        claim=claim.text,
    )


def _closest(claim: str, results: list[tuple[str, str, Match]]) -> tuple[str, str, Match]:
    """The record sharing the most terms with the claim: the one a person would compare."""
    wanted = terms(claim)
    return max(results, key=lambda r: len(wanted & terms(r[1])))
