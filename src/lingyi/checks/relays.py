"""Relays: where a text reports what another council member said or did.

A text may hold several relays ("灵通说…，灵研也说…", "LingFlow and LingZhi both said…"); each
names a member as the speaker of a claim, or as the one who did the work ("灵通已经完成了审计",
"LingFlow merged PR #12"). Reported speech takes many forms: a speech verb (说, 表示, told me,
reckons), a lead (据…, 按…的说法, according to…, per…, as … put it), the member's words
(灵通的原话：…), a transcript-style "灵通：…" at the start of a sentence, an attribution after
the claim ("…，灵通说的", "…, per LingFlow", "…，灵通也确认了"), and a pronoun that continues
the last relay (他说的是…, "he said…"). A denial ("灵通并没有说…", "LingFlow did
not say…") is a relay too: what it says the member did not say must not be on the record.

What is no relay: the speaker's own name ("灵研：灵知说…" relays 灵知 only); a member's name
alone (a to-do list assigning work, a message or a request addressed to a member, a
description of its role); a question; the marker quoted as a phrase ('not a "灵通说"').

Texts are canonical (lingyi.text), so the verbs and names here are in canonical form:
case-folded, simplified, full-width punctuation as ASCII.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, replace
from functools import lru_cache

from lingyi._regex import lazy_re
from lingyi.checks._structure import labelled as _labelled
from lingyi.checks._structure import layout
from lingyi.policy import PolicySet
from lingyi.text import canonical_text

_ADVERB_ZH = r"(?:刚才|之前|刚刚|已经|昨天|今天|上午|下午|早上|晚上|也|都|还|又|一致|亲口|明确|再次|特别|专门|公开|私下)*"
_TO_ME_ZH = r"(?:跟我|对我|和我|向我|给我|在群里|在会上|在议事会上|在频道里)?"
_SPEECH_ZH = (
    r"(?:说的是|说过|说|表示|告诉我|告诉|称|提到|提醒|强调|透露|说明|确认|报告|反馈|通知|讲|回复|"
    r"宣布|汇报|指出|认为|觉得|表态|留言|写道|补充|同步|播报|声称|承认|保证|答复|发消息说|口头说|"
    # 写/发/贴 name work too ("写了报告"); before a colon they introduce the words.
    r"(?:写|发|贴|回)(?=了?\s*:))"
)
# 说道 is "said", but 说道家… is 说 + 道家: 道 belongs to the verb only before punctuation.
_VERB_ZH = (
    rf"{_ADVERB_ZH}{_TO_ME_ZH}{_SPEECH_ZH}(?:了|过|道(?=[\s,:\"“]))?(?:大家|各位|我们|团队|所有人)?"
)
_WORDS_ZH = r"(?:的原话|的说法|的意思|的消息|的回复|的通知|的报告|的反馈|的话)"
_ADVERB_EN = r"(?:(?:also|both|all|has|had|have|just|already|personally|clearly|again|then)\s+)*"
_SPEECH_EN = (
    r"(?:said|says|say|told\s+(?:me|us|them|him|her|the\s+\w+|everyone)|tells\s+(?:me|us|them|everyone)|"
    r"reported|reports|confirmed|confirms|mentioned|mentions|announced|announces|stated|states|"
    r"noted|notes|claims|claimed|let\s+(?:me|us)\s+know|reckons|reckoned|thinks|believes|"
    r"put\s+it|insisted|admitted|assured\s+(?:me|us)|informed\s+(?:me|us)|updated\s+(?:me|us)|"
    r"pointed\s+out|agreed|agrees|agree|"
    # Verbs that also name work ("posted 611 messages", "added two tests") report speech
    # only when a clause or a quote follows.
    r"(?:wrote|writes|posted|posts|added|shared|flagged|explained|replied|answered)"
    r"(?=\s+that\b|\s*[:\"“]|\s+(?:in|on)\s+the\s+(?:council|channel|group)))"
)
_VERB_EN = rf"{_ADVERB_EN}{_SPEECH_EN}(?:\s+that)?"
# "LingFlow's update: …" is its words; "LingFlow's message count dipped" is a figure about it.
_WORDS_EN = (
    r"(?:'s\s+(?:message|words|note|update|reply|report|post)"
    r"(?=\s*[:\"“]|\s+(?:says|said|reads|read|was\s+that|is\s+that)\b))"
)
_VERB = rf"(?:{_VERB_ZH}|{_WORDS_ZH}|{_VERB_EN}|{_WORDS_EN})"
_DENY_ZH = rf"(?:并|可)?(?:没有|没|未|从未|从没|不曾){_ADVERB_ZH}{_SPEECH_ZH}(?:过)?"
_DENY_EN = r"(?:did\s+not|didn't|never|has\s+not|hasn't|does\s+not|doesn't)\s+(?:say|said|tell\s+(?:me|us)|claim|mention|report|confirm)(?:\s+that)?"
# Work done, reported without a speech verb: 已经/已 or a verb of council work with 了/完,
# and English past tenses. Plans, duties and to-do items (会, 负责, fixes) are none.
_WORK_ZH = (
    r"(?:刚刚|刚|昨天|今天|上午|下午|早上|也|都|还|又)*(?:已经|已)"
    r"|(?:刚刚|刚|昨天|今天|上午|下午|早上|也|都|还|又)*(?:完成|合并|新增|修复|修好|部署|发布|上线|"
    r"推送|提交|删除|删掉|移除|下线|更新|重建|备份|导入|导出|标注|清洗|训练|跑完|做完|搞定|找到|发现|"
    r"回滚|切出|拆分|上传|整理|审计|测试|分析|统计|收录|录入|加了|做了|写完|改完|跑了)(?:了|完|好|掉|过)"
)
_WORK_EN = (
    r"(?:(?:has|have|had)\s+)?(?:(?:already|just|also|finally|now|successfully)\s+)?"
    r"(?:[a-z]+ed|found|ran|cut|built|rebuilt|made|sent|put|wrote|began|split|set\s+up|took|"
    r"brought|did|shipped|held|got|went|kept|left|won|lost|saw|spent|undid|withdrew)\b"
)
_JOIN = r"\s*(?:和|与|跟|及|、|,|&|and|as\s+well\s+as)\s*"
# Leads that make a relay without a verb. Weaker ones (按…的说法, 听…讲, as … put it) carry
# their own verb and are found by it.
_LEAD = r"(?:据|according\s+to\s+|per\s+|quoting\s+|转达)"
# "As LingFlow posted, …": a verb that also names work reports speech after "as" and a comma.
_AS_VERB = r"(?:posted|wrote|shared|added|explained|replied|answered|said|noted|mentioned)(?=\s*,)"
# Attribution after the claim: "v3 ships Friday, LingFlow said." / "…（据灵通）".
_TRAIL_LEAD = r"(?:(?:and|while)\s+)?(?P<lead>据|according\s+to\s+|per\s+|as\s+|so\s+says\s+|says\s+|said\s+)?"
_TRAIL_ADVERB = r"(?:\s*(?:也|都|还|同样|亦|also|too|as\s+well)\s*)*"
_TRAIL_VERB = (
    rf"(?P<verb>{_TRAIL_ADVERB}\s*(?:{_SPEECH_EN}|{_SPEECH_ZH}(?:的|了|过)?|讲的|说的)"
    rf"(?:\s+(?:it|so|this|that))?{_TRAIL_ADVERB})?"
)
_TRAIL_END = r"\s*[)）]?\s*(?=[.。!！]?\s*$|[.。!！;\n])"
_PRONOUN = lazy_re(rf"(?:他|她|ta|他们|她们|对方){_VERB_ZH}|\b(?:he|she|they)\s+{_VERB_EN}")
_AFTER_VERB = lazy_re(r"[\s,:\"'“”‘’]*")
_SENTENCE_END = lazy_re(r"[。！？!?\n;]|\.(?:\s|$)")
# Where the relayer's own reasoning starts: "…, so v0.17 ships Monday" is not the member's.
_OWN_CONCLUSION = lazy_re(
    r"[,\s]*(?:所以|因此|因而|据此|于是|这说明|这意味着|可见|\bso\b|\btherefore\b|\bhence\b|\bthus\b|"
    r"which\s+means|that\s+means|meaning\s+that)"
)
# Before a name: the name is an addressee or an object ("请灵通确认", "ask LingFlow"), not a speaker.
_ADDRESSED = lazy_re(
    r"(?:请|让|叫|麻烦|跟|和|对|给|向|问|帮|替|由|等|提醒|通知|催|cc)\s*$"
    r"|\b(?:ask|asked|asking|tell|told|ping|pinged|thank|thanks|to|for|with|cc|dear|hi|hey|let|did|does|do|has|have|is|was)\s+$"
)
_OPEN_QUOTE = lazy_re(r"[\"'“‘「『]\s*$")
_CLOSE_QUOTE = lazy_re(r"^\s*[\"'”’」』]")
# Before a name: a condition ("if LingFlow says…", "如果灵通说…") relays nothing yet.
_CONDITION = lazy_re(
    r"(?:如果|假如|假设|要是|万一|倘若|如若|若是|若|一旦)\s*$"
    r"|\b(?:if|unless|suppose|supposing|whether|in\s+case|what\s+if|even\s+if)\s+$"
)
_QUESTION = lazy_re(r"(?:[?？]|吗|么|呢)\s*$")
_REQUEST = lazy_re(
    r"\s*(?:请|麻烦|能不能|能否|可否|可以|帮忙|please|can\s+you|could\s+you|would\s+you|pls)"
)


@dataclass(frozen=True)
class Relay:
    """One member named as the speaker of a claim, and where the claim is in the text."""

    member: str  # canonical member id
    name: str  # the name as it appears (canonical)
    start: int  # where the relay begins (the name, 据/according to, or a claim attributed after)
    claim_start: int
    end: int  # where the claim ends (the next relay or the end of the sentence)
    kind: str = "speech"  # "speech" (said), "work" (did), "denied" (did not say)

    def claim(self, text: str) -> str:
        return text[self.claim_start : self.end].strip(" ,.;:。，；")


@lru_cache(maxsize=64)
def _patterns(names: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    name = rf"(?<![a-z0-9])(?:{alt})(?![a-z0-9])"
    group = rf"(?P<names>{name}(?:{_JOIN}{name})*)"
    return (
        re.compile(
            rf"(?:,|，|\(|（|(?P<dash>—+|--)|\s-)\s*{_TRAIL_LEAD}{group}{_TRAIL_VERB}{_TRAIL_END}"
        ),
        re.compile(rf"{group}(?:\s*{_DENY_ZH}|\s+{_DENY_EN})"),
        re.compile(
            rf"(?P<lead>{_LEAD}|as\s+(?={name}\s+{_AS_VERB}))?{group}"
            rf"\s*(?(lead)(?:{_AS_VERB}|{_VERB})?|{_VERB})"
        ),
        # A speaker label: "灵通: …", "灵通 — …", "【灵通】…", "[LingFlow] …" (not a link).
        re.compile(
            # after a sentence, or after a label of its own ("灵依：【灵通】…")
            rf"(?:^|(?<=[。！？!?\n.:]))\s*(?:[\[【](?={name}[\]】](?!\())|(?<![\[【]))"
            rf"{group}(?:[\]】]\s*:?|(?:\s+here|这边|在此)?\s*(?::(?!//)|—+|--|-\s))"
        ),
        re.compile(rf"{group}(?=\s*(?:{_WORK_ZH})|\s+{_WORK_EN})"),
        re.compile(name),
    )


MAX_RELAYS = 64  # more in one text is no council message; its check refuses it (split it)


def find_relays(text: str, policies: PolicySet, speaker: str) -> Relays:
    """Every relay in canonical ``text`` of a member other than ``speaker``, in order.

    A text with more than ``MAX_RELAYS`` is read no further: the list says ``truncated``,
    and a check refuses the text rather than pass what it did not read."""
    names = tuple(n.casefold() for n in policies.names)
    return Relays(*_found(text, speaker, names, _Members.of(policies)))


_BLANKS = lazy_re(r" +")
_CODE_SPAN = lazy_re(r"`[^`\n]{1,400}`")


def quoted_spans(text: str, policies: PolicySet) -> list[tuple[int, int]]:
    """Where canonical ``text`` quotes rather than claims: fenced and indented code,
    blockquotes no one introduced, struck-through text, code spans. The speaker asserts
    none of it (a fixture "don't write: ```…```" is no forecast of the speaker's)."""
    one = _patterns(tuple(n.casefold() for n in policies.names))[-1]
    read = layout(text, one)
    spans = [m.span() for m in _BLANKS.finditer(read) if text[m.start() : m.end()].strip()]
    return spans + [(m.start() + 1, m.end() - 1) for m in _CODE_SPAN.finditer(read)]


class Relays(list[Relay]):
    """The relays of a text; ``truncated`` when there were too many to read them all."""

    def __init__(self, relays: tuple[Relay, ...] = (), truncated: bool = False) -> None:
        super().__init__(relays)
        self.truncated = truncated


@dataclass(frozen=True)
class _Members:
    """Which member each name means: all that reading a text needs of the policies."""

    aliases: tuple[tuple[str, str], ...]
    not_names: tuple[str, ...] = ()

    @staticmethod
    def of(policies: PolicySet) -> _Members:
        words = tuple(canonical_text(w) for w in policies.not_names)
        return _Members(tuple(sorted(policies.aliases.items())), words)

    def unnamed(self, text: str) -> str:
        """``text`` with the words that hold a name and are none (小通道) blanked."""
        for word in self.not_names:
            if word in text:
                text = text.replace(word, " " * len(word))
        return text

    def resolve(self, name: str) -> str | None:
        return self._map.get(name.strip().lower())

    @property
    def _map(self) -> dict[str, str]:
        return _alias_map(self.aliases)


@lru_cache(maxsize=16)
def _alias_map(aliases: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(aliases)


@lru_cache(maxsize=256)
def _found(
    text: str, speaker: str, names: tuple[str, ...], policies: _Members
) -> tuple[tuple[Relay, ...], bool]:
    """:func:`find_relays`, once per text: the relay, fact and inference checks all ask."""
    trail, deny, speech, colon, work, one = _patterns(names)
    if not one.search(text):  # no member named: nothing to relay (most texts)
        return (), False
    text = _unquoted(layout(policies.unnamed(text), one), one, speech)
    ends = _Sentences(text)
    found: list[Relay] = _trailing(text, ends, trail, one, policies)
    taken = _Spans([(r.end, r.claim_start) for r in found])
    for kind, pattern in (("denied", deny), ("speech", speech), ("quote", colon), ("work", work)):
        for match in pattern.finditer(text):
            if len(found) > MAX_RELAYS:
                break
            if taken.overlaps(match.span()) or not _is_claim(text, ends, match, kind, one):
                continue
            taken.add(match.span())
            found += _named(text, match, kind, one, policies)
    found += _pronouns(text, found, taken, one, policies)
    relays = _bounded(text, ends, sorted(found, key=lambda r: (r.start, r.member)))
    # The speaker's own name ends the claim before it, but is no relay.
    return tuple(r for r in relays if r.member != speaker), len(found) > MAX_RELAYS


def _named(
    text: str, match: re.Match[str], kind: str, one: re.Pattern[str], policies: _Members
) -> list[Relay]:
    """One relay per member the match names ("灵通和灵研都说…" names two)."""
    claim_start = _AFTER_VERB.match(text, match.end()).end()  # type: ignore[union-attr]
    out = []
    for name in one.finditer(match.group("names")):
        member = policies.resolve(name.group(0))
        if member is not None:
            out.append(Relay(member, name.group(0), match.start(), claim_start, len(text), kind))
    return out


# Quotes that may hold a relay: “…”, "…", 「…」, 『…』 and code spans.
_QUOTED = lazy_re(
    r"“[^”\n]{1,400}”|\"[^\"\n]{1,400}\"|「[^」\n]{1,400}」|『[^』\n]{1,400}』|`[^`\n]{1,400}`"
    r"|(?<![a-z0-9])'[^'\n]{1,400}'(?![a-z0-9])"  # 'single quotes' (not an apostrophe: don't)
)
_PRONOUN_NAME = r"(?:他|她|ta|他们|她们|对方|\bhe|\bshe|\bthey)"


def _unquoted(text: str, one: re.Pattern[str], speech: re.Pattern[str]) -> str:
    """Quoted text that names a member is blanked unless it is someone's words.

    "不要写“灵通说v0.17已发布”" quotes a sentence; "灵通说：“v0.17已发布”" and
    "“v0.17已发布”——灵通" relay one. Offsets are kept (blanks of the same length)."""
    if not any(q in text for q in "“\"「『`'"):
        return text
    parts, last = [], 0
    for quote in _QUOTED.finditer(text):
        inner = quote.group(0)[1:-1]
        if not one.search(inner) or _introduced(text, quote, one, speech):
            continue
        parts += [text[last : quote.start() + 1], " " * len(inner)]
        last = quote.end() - 1
    return "".join(parts) + text[last:] if parts else text


def _introduced(
    text: str, quote: re.Match[str], one: re.Pattern[str], speech: re.Pattern[str]
) -> bool:
    """Someone's words: a relay ends right before the quote, or a name follows it, or the
    quote opens with a speaker label."""
    before = text[max(0, quote.start() - 60) : quote.start()].rstrip(" :,")
    for match in speech.finditer(before):
        if match.end() == len(before):
            return True
    if re.search(rf"(?:{one.pattern}|{_PRONOUN_NAME})\s*(?:{_VERB})?$", before):
        return True
    after = text[quote.end() : quote.end() + 40].lstrip(" ,—-")
    after = re.sub(r"^(?:据|per\s+|according\s+to\s+|says\s+|said\s+)", "", after)
    return bool(one.match(after)) or _labelled(quote.group(0)[1:-1], one)


class _Sentences:
    """Where the sentences of a text end, found once: every relay asks for the sentence
    around it, and asking the text each time made long texts cost quadratic time."""

    def __init__(self, text: str) -> None:
        self.stops = [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text)]
        self._starts = [a for a, _ in self.stops]
        self.size = len(text)

    def start_of(self, at: int) -> int:
        """Where the sentence holding ``at`` starts (after the last stop ending by ``at``)."""
        i = bisect_right(self._starts, at) - 1
        while i >= 0 and self.stops[i][1] > at:
            i -= 1
        return self.stops[i][1] if i >= 0 else 0

    def next_stop(self, at: int) -> tuple[int, int] | None:
        """The first stop at or after ``at``."""
        i = bisect_left(self._starts, at)
        return self.stops[i] if i < len(self.stops) else None


class _Spans:
    """Disjoint spans already read, kept sorted so that an overlap test is a bisection."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self._spans = sorted(spans)

    def overlaps(self, span: tuple[int, int]) -> bool:
        i = bisect_left(self._spans, span)
        near = self._spans[max(0, i - 1) : i + 1]
        return any(a < span[1] and span[0] < b for a, b in near)

    def add(self, span: tuple[int, int]) -> None:
        insort(self._spans, span)


def _trailing(
    text: str, ends: _Sentences, pattern: re.Pattern[str], one: re.Pattern[str], policies: _Members
) -> list[Relay]:
    """Relays whose speaker comes after the claim: the claim is the sentence before it.

    ``claim_start`` marks where the attribution ends (so that no other pattern reads it
    again) until :func:`_bounded` sets the real span, kept in ``start``..``end``.
    """
    found = []
    for match in pattern.finditer(text):
        start = ends.start_of(match.start())
        if not text[start : match.start()].strip() or not (
            match.group("lead") or match.group("verb") or match.group("dash")
        ):
            continue  # "Thanks, LingFlow." addresses a member; "… — 灵通" signs the words
        for name in one.finditer(match.group("names")):
            member = policies.resolve(name.group(0))
            if member is not None:
                found.append(
                    Relay(member, name.group(0), start, match.end(), match.start(), "trailing")
                )
    return found


def _trailed(relay: Relay, before: list[Relay], starts: list[int]) -> Relay:
    """ "灵研说 X，灵通也确认了": the same claim as the relay it follows, else the sentence.

    ``before`` is sorted by start and ``starts`` are those starts."""
    lo, hi = bisect_left(starts, relay.start), bisect_left(starts, relay.end)
    inside = [r for r in before[lo:hi] if r.claim_start < r.end]
    if inside:
        return replace(relay, claim_start=inside[-1].claim_start, end=inside[-1].end, kind="speech")
    return replace(relay, claim_start=relay.start, kind="speech")


def _is_claim(
    text: str, ends: _Sentences, match: re.Match[str], kind: str, one: re.Pattern[str]
) -> bool:
    """Not an addressee, not a quoted marker, not a question, not a request ("灵通：请…"),
    not an item after a heading ("Action items: 灵通 — …" assigns, "灵依：【灵通】…" quotes)."""
    start, end = match.start("names"), match.end()
    if kind == "quote" and not _labels_after_label(text, ends, match.start(), one):
        return False
    before = text[max(0, start - 12) : start]
    if not match.groupdict().get("lead") and _ADDRESSED.search(before):
        return False
    if _CONDITION.search(before):
        return False
    if kind == "quote" and _REQUEST.match(text, end):
        return False
    if _OPEN_QUOTE.search(text[max(0, match.start() - 2) : match.start()]) and _CLOSE_QUOTE.match(
        text[end : end + 2]
    ):
        return False
    stop = ends.next_stop(end)
    tail = stop[1] if stop else len(text)
    # Only the sentence's last characters can make it a question (?, 吗, 呢).
    return not _QUESTION.search(text[max(end, tail - 12) : tail].rstrip(" .。"))


_PRONOUN_REACH = 200  # "灵通发了消息。他说…": the member named shortly before


def _labels_after_label(text: str, ends: _Sentences, at: int, one: re.Pattern[str]) -> bool:
    """A label after a colon is one only when a speaker's label stands before it."""
    head = text[ends.start_of(at) : at].strip()
    if not head.endswith(":"):
        return True
    return bool(one.fullmatch(head[:-1].strip(" []【】")))


def _pronouns(
    text: str, found: list[Relay], taken: _Spans, one: re.Pattern[str], policies: _Members
) -> list[Relay]:
    """ "他说的是…", "he said…": the member named last before it said it."""
    out: list[Relay] = []
    for match in _PRONOUN.finditer(text):
        if len(found) + len(out) > MAX_RELAYS or taken.overlaps(match.span()):
            continue
        reach = max(0, match.start() - _PRONOUN_REACH)
        named = [m for m in one.finditer(text, reach, match.start())]
        member = policies.resolve(named[-1].group(0)) if named else None
        if member is None:
            continue
        claim_start = _AFTER_VERB.match(text, match.end()).end()  # type: ignore[union-attr]
        out.append(Relay(member, match.group(0), match.start(), claim_start, len(text)))
    return out


_PREMISE = lazy_re(
    r"(?:\b(?:since|because|as|given\s+that|now\s+that)|既然|因为|由于|鉴于)[^。！？!?\n;]*$"
)


_COMMA = lazy_re(r"[,，]")
_PREMISE_REACH = 200  # a premise's "since"/既然 stands near the relay it introduces


def _premise(text: str, ends: _Sentences, relay: Relay) -> bool:
    """The relay is the premise of the speaker's own conclusion (since…, 既然…)."""
    start = max(ends.start_of(relay.start), relay.start - _PREMISE_REACH)
    return bool(_PREMISE.search(text[start : relay.start]))


def _bounded(text: str, ends: _Sentences, relays: list[Relay]) -> list[Relay]:
    """Each claim ends at the next relay that starts after it, or at the end of its sentence;
    a claim attributed after it ("…，灵通说的") ends where the attribution starts."""
    starts = sorted(
        {r.start for r in relays if r.kind != "trailing"}
        | {r.end for r in relays if r.kind == "trailing"}
    )
    out = [_one(text, ends, r, starts) for r in relays if r.kind != "trailing"]
    before = sorted(out, key=lambda r: r.start)
    firsts = [r.start for r in before]
    out += [_trailed(r, before, firsts) for r in relays if r.kind == "trailing"]
    return sorted(out, key=lambda r: (r.start, r.member))


def _one(text: str, ends: _Sentences, relay: Relay, starts: list[int]) -> Relay:
    i = bisect_right(starts, relay.claim_start)
    limit = starts[i] if i < len(starts) else len(text)
    stop = _SENTENCE_END.search(text, relay.claim_start, limit)
    end = stop.start() if stop else limit
    own = _OWN_CONCLUSION.search(text, relay.claim_start, end)
    comma = _COMMA.search(text, relay.claim_start, end)
    if relay.kind == "denied" and comma:  # "灵通没有说 X，Y": Y is the speaker's own word
        end = comma.start()
    elif own and own.start() > relay.claim_start:
        end = own.start()
    elif _premise(text, ends, relay) and comma:  # "since LingFlow said X, …": the rest is ours
        end = comma.start()
    return replace(relay, end=end)
