"""communication: what another member said or did must be on the record.

A claim names a council member (灵通说…, "LingFlow told me…"). It matches when a
message from that member on the council record, or recorded evidence of that member's
work, carries the same versions, the same topic and no contradicting status
(尚未开始 vs 已经完成). Reported speech of a non-member (用户说…) is not a council claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.checks._text import (
    bigrams,
    concepts,
    lang_of,
    neutral_terms,
    status,
    terms,
    versions,
    words,
)
from lingyi.policy import MemberPolicy, PolicySet

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
    ok: bool
    why: str  # English
    contradicts: bool = False  # the record says the opposite about the same work
    why_zh: str = ""

    def reason(self, lang: str) -> str:
        return self.why_zh if lang == "zh" and self.why_zh else self.why


_STATUS_ZH = {"done": "已完成", "not_done": "未完成"}


def compare(claim: str, record: str) -> Match:
    """Does ``record`` support ``claim``? Versions, status and topic must agree.

    The first clause carries the claim; every further clause (而且…, "and found…") must be
    supported too, so an embellished relay does not pass on the strength of its first half.
    """
    cv, rv = versions(claim), versions(record)
    if cv and not cv <= rv:
        shown = ", ".join(sorted(rv)) or "none"
        claimed = ", ".join(sorted(cv))
        return Match(
            False,
            f"version differs: claim {claimed}, record {shown}",
            why_zh=f"版本或编号不符：转述为 {claimed}，记录为 {shown}",
        )
    cn, rn = neutral_terms(claim), neutral_terms(record)
    if rn and not cn <= rn:  # 7月25日 is not 7月15日; 1932 is 1,932
        extra = ", ".join(sorted(cn - rn))
        return Match(
            False,
            f"numbers differ: {extra} not in the record",
            why_zh=f"数字不符：记录中没有 {extra}",
        )
    cs, rs = status(claim), status(record)
    if cs and rs and cs != rs:
        return Match(
            False,
            f"status contradicts the record: claim {cs}, record {rs}",
            True,
            f"状态与记录矛盾：转述为{_STATUS_ZH[cs]}，记录为{_STATUS_ZH[rs]}",
        )
    for extra in clauses(claim)[1:]:
        if not _extra_supported(extra, record):
            said = extra.strip()
            return Match(
                False, f"the record does not say: {said}", why_zh=f"记录中没有这句：{said}"
            )
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
    across = lang_of(claim) != lang_of(record)
    if cc and (missing := cc - rc):
        topics = ", ".join(sorted(missing))
        return Match(
            False, f"topic not in the record: {topics}", why_zh=f"记录中没有这个话题：{topics}"
        )
    if across:
        return _across_languages(claim, record, cc)
    if cc:
        return Match(True, "same topic", why_zh="话题一致")
    ct, rt = terms(claim), terms(record)
    share = len(ct & rt) / max(1, len(ct))
    return Match(
        share >= 0.4,
        f"{share:.0%} of the claim's terms are in the record",
        why_zh=f"转述的词语只有 {share:.0%} 见于记录",
    )


def _across_languages(claim: str, record: str, cc: frozenset[str]) -> Match:
    """Across languages only concepts, numbers, ids and shared literals (道家, PR #482) compare.

    Every number must agree when the record writes numbers in digits at all; the claim must
    share two concepts, or one concept plus a number, id or literal, with the record.
    """
    cn, rn = neutral_terms(claim), neutral_terms(record)
    if rn and not cn <= rn:
        extra = ", ".join(sorted(cn - rn))
        return Match(
            False,
            f"numbers differ: claim {extra} not in the record",
            why_zh=f"数字不符：记录中没有 {extra}",
        )
    literal = {t for t in terms(claim) & terms(record) if not t.startswith("@")}
    ok_ = len(cc) >= 2 or bool(cn & rn or literal)
    return Match(
        ok_,
        "concepts, numbers and ids agree" if ok_ else "too little in common",
        why_zh="概念、数字与编号一致" if ok_ else "与记录的共同之处太少",
    )


class CommunicationParams(CheckParams):
    use_work_evidence: bool = True


@register("communication.on_record", CommunicationParams)
def on_record(ctx: CheckContext, params: CommunicationParams) -> Outcome:
    """A claim about another member's words or work must match that member's record."""
    claim = find_claim(ctx.assertion.content, ctx.policies, ctx.member.id)
    if claim is None:
        return ok(ctx.t("未涉及其他成员的言论", "no claim about another council member"))
    member = ctx.policies.members[claim.member]
    records = _records(ctx, member, params.use_work_evidence)
    results = [(rid, text, compare(claim.text, text)) for rid, text in records]
    if found := _supporting(claim.text, results):
        return ok(
            ctx.t(f"与 {member.name} 的记录 {found} 一致", f"matches {member.id}'s record {found}"),
            member=member.id,
            matched=found,
        )
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


def _not_on_record(
    ctx: CheckContext, member: MemberPolicy, claim: Claim, results: list[tuple[str, str, Match]]
) -> Outcome:
    if not results:
        why = ctx.t(
            f"{member.name} 在议会记录中没有任何消息",
            f"{member.id} has no message on the council record",
        )
    else:
        rid, _, match = _closest(claim.text, results)
        why = ctx.t(
            f"{member.name} 的记录中没有相符的消息（最接近的 {rid}：{match.reason('zh')}）",
            f"no message from {member.id} matches (closest {rid}: {match.why})",
        )
    return fail(
        ctx.t("沟通内容无法证实：", "communication not on record: ") + why,
        ctx.t(
            f"请先查阅 {member.name}（{member.id}）在议会记录中的消息，按原话转述或注明未经证实",
            f"check {member.id}'s messages on the council record and quote what was really said",
        ),
        member=member.id,
        claim=claim.text,
    )


def _closest(claim: str, results: list[tuple[str, str, Match]]) -> tuple[str, str, Match]:
    """The record sharing the most terms with the claim: the one a person would compare."""
    wanted = terms(claim)
    return max(results, key=lambda r: len(wanted & terms(r[1])))
