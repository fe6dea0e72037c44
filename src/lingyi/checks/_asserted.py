"""What a text asserts: the clauses that state a fact, apart from everything else.

A question or a request asserts nothing; a hedged clause asserts nothing; a member saying
what it is doing or will do reports its own work; a lead-in ("Quick update:", "跟大家说一下：")
says how the fact is delivered, not what it is. The rest are statements of fact, and only
they are held to evidence. A clause is the unit: "知识库里有三篇X，对吧？" still states that
the KB has three, and "…，可能是因为Y" hedges only its own clause.

Decided on canonical text with the groups of an assertions lexicon (see
``validators/lexicons/assertions.toml``); the cased text is carried along, span for span,
for what needs case (names, variant labels).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from lingyi._regex import lazy_re
from lingyi.text import Canonical, Hit, TermMatcher

_SENTENCE = lazy_re(r"[。！？!?\n]+|\.(?=\s|$)")
_CLAUSE = lazy_re(r"(?<!\d),|,(?!\d)|;")
_LEAD_IN = lazy_re(r":(?!\d)")
_TRIM = " \t\"'“”‘’()[]{}<>《》「」【】-–—*•·,.:;"
_CONNECTIVES = lazy_re(
    r"^(?:and|but|so|also|then|plus|and then|然后|另外|还有|而且|并且|同时|但是|但|不过|此外)\s*"
)
_QUESTION_END = lazy_re(r"(?:\?|吗|呢|么|嘛|吧)\W*$")
# "May" the month: after a preposition, before a day or year, or closing a phrase.
_MONTH_MAY = lazy_re(
    r"(?:\b(?:in|of|since|until|till|by|from|during|early|late|mid|last|next|this|before|after)"
    r"\s+may\b|\bmay\s+\d|\bmay\s*[,.]|\bmay$)"
)
_ING = lazy_re(r"^\W*(?:[a-z']+\s+){0,2}?([a-z][a-z\-]*ing)\b")


@dataclass(frozen=True)
class Span:
    """A piece of the text, in canonical (``text``) and cased form, with where it starts."""

    text: str
    cased: str
    start: int


@dataclass(frozen=True)
class Clause(Span):
    sentence: int  # index of the sentence it belongs to


def masked(canon: Canonical, spans: Iterable[tuple[int, int, str]]) -> Span:
    """The text with ``spans`` replaced by a filler (URLs, ids, relays), lengths kept."""
    text, cased = list(canon.text), list(canon.cased)
    aligned = len(text) == len(cased)  # case folding may change lengths (ß → ss)
    for start, end, fill in spans:
        for i in range(start, min(end, len(text))):
            text[i] = fill
            if aligned:
                cased[i] = fill
    joined = "".join(text)
    return Span(joined, "".join(cased) if aligned else joined, 0)


def _split(
    span: Span, pattern: re.Pattern[str], *, keep: bool = False, empty: bool = False
) -> list[Span]:
    """``span`` cut at ``pattern``; with ``keep``, each part keeps the separator it ends with;
    with ``empty``, parts with nothing in them are kept too."""
    parts, last = [], 0
    for match in pattern.finditer(span.text):
        parts.append(_part(span, last, match.end() if keep else match.start()))
        last = match.end()
    parts.append(_part(span, last, len(span.text)))
    return [p for p in parts if empty or p.text.strip(_TRIM)]


def _part(span: Span, start: int, end: int) -> Span:
    return Span(span.text[start:end], span.cased[start:end], span.start + start)


def sentences(span: Span) -> list[Span]:
    """The sentences of ``span``, each with its end mark (a question keeps its "?")."""
    return _split(span, _SENTENCE, keep=True)


def clauses(sentence: Span, index: int) -> list[Clause]:
    return [Clause(c.text, c.cased, c.start, index) for c in _split(sentence, _CLAUSE)]


def _glued(text: str, hit: Hit) -> bool:
    """Is a Latin term part of a compound name ("search-api", "may_2025", "check/verify")?"""
    if not hit.term[-1:].isascii():
        return False
    after, before = text[hit.end : hit.end + 2], text[max(0, hit.start - 2) : hit.start]
    return bool(re.match(r"[-_/][a-z0-9]", after) or re.search(r"[a-z0-9][-_/]$", before))


@lru_cache(maxsize=64)
def _vocative(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """A member addressed at the start of a clause: "灵通，", "lingflow —", "灵研:"."""
    if not names:
        return None
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"^(?:{alt})(?![a-z0-9])\s*(?:[,:;—–\-]+|$)\s*")


class Assertions:
    """The groups of an assertions lexicon, applied to clauses."""

    def __init__(self, matcher: TermMatcher, names: tuple[str, ...] = ()) -> None:
        self.matcher = matcher
        self.vocative = _vocative(names)

    def _hits(self, text: str) -> dict[str, list[Hit]]:
        found: dict[str, list[Hit]] = {}
        for hit in self.matcher.find(text):
            if _glued(text, hit):
                continue  # "search-api" is a name, not the verb "search"
            for group in sorted(hit.groups):  # not the frozenset's hash-seeded order
                found.setdefault(group, []).append(hit)
        return found

    def opens(self, text: str, hits: dict[str, list[Hit]], group: str) -> Hit | None:
        """The hit of ``group`` the clause begins with, if any."""
        start = len(text) - len(text.lstrip(_TRIM))
        return next((h for h in hits.get(group, []) if h.start == start), None)

    def is_question(self, text: str, hits: dict[str, list[Hit]]) -> bool:
        if _QUESTION_END.search(text):
            return True
        return bool(hits.get("question_words") or self.opens(text, hits, "question_openers"))

    def is_request(self, text: str, hits: dict[str, list[Hit]]) -> bool:
        if self.opens(text, hits, "request_openers"):
            return True
        search = self.opens(text, hits, "search_openers") or hits.get("search_verbs")
        return bool(search) and not hits.get("results")

    def is_hedged(self, text: str, hits: dict[str, list[Hit]]) -> bool:
        certain = hits.get("not_hedges", [])
        for hedge in hits.get("hedges", []):
            if any(c.start <= hedge.start and hedge.end <= c.end for c in certain):
                continue  # 不可能, "could not": certain, not a hedge
            if hedge.term == "may" and _MONTH_MAY.search(text[max(0, hedge.start - 12) :]):
                continue
            return True
        return False

    def is_reported(self, hits: dict[str, list[Hit]]) -> bool:
        """Someone else's words ("my manager said…"), unless a document speaks."""
        said = hits.get("reported_speech")
        if not said:
            return False
        return not any(d.start < said[0].start for d in hits.get("documents", []))

    def asks(self, part: Span) -> bool:
        """A part before a colon that asks or looks up ("检索：", "Search KB:"): the whole
        sentence is a request, unless it reports what was found."""
        text = part.text.strip(_TRIM)
        hits = self._hits(text)
        if hits.get("results"):
            return False
        lookup = (
            hits.get("search_openers") or hits.get("request_openers") or hits.get("search_verbs")
        )
        return bool(lookup or hits.get("task_lists")) or self.is_question(text, hits)

    def is_own_work(self, text: str, hits: dict[str, list[Hit]]) -> bool:
        """The speaker's planned or ongoing work: what it does, not what is the case."""
        if hits.get("plans") or self.opens(text, hits, "plan_openers"):
            return True
        opener = self.opens(text, hits, "progressive_openers")
        if opener is None or hits.get("results") or hits.get("reporting"):
            return False
        if not opener.term.isascii():
            return True
        rest = text[opener.end :]
        return opener.term.endswith("ing") or bool(_ING.match(rest))

    def unconditional(self, found: list[Clause]) -> list[Clause]:
        """The clauses of a sentence without its premises ("如果…", "if…") and what they
        say then follows ("…我们就切到 v3", "…LingFlow will tag it"): neither is asserted."""
        out: list[Clause] = []
        premise = False
        for clause in found:
            text = clause.text.strip(_TRIM)
            hits = self._hits(text)
            if self.opens(text, hits, "conditions"):
                premise = True
            elif not (premise and hits.get("consequents")):
                premise = False
                out.append(clause)
        return out

    def asserts(self, clause: Clause) -> bool:
        """Does the clause state something as fact? A member addressed at its start
        ("灵通，…", "LingFlow — …") is who it is said to, not part of what is said."""
        text = _CONNECTIVES.sub("", clause.text.strip(_TRIM))
        if self.vocative is not None:
            text = self.vocative.sub("", text).strip(_TRIM)
        if not re.search(r"\w", text):
            return False
        hits = self._hits(text)
        return not (
            self.is_question(text, hits)
            or self.is_request(text, hits)
            or self.is_hedged(text, hits)
            or bool(hits.get("normative"))
            or self.is_reported(hits)
            or self.is_own_work(text, hits)
        )


Test = Callable[[Span], bool]


def asserted(span: Span, assertions: Assertions, is_lead_in: Test, is_fact: Test) -> list[Clause]:
    """The clauses of ``span`` that state a fact, in order.

    A sentence ``is_fact`` rejects (a labelled or predicted inference) or that opens by
    asking ("检索：…") states none. A part before a colon is dropped when ``is_lead_in``
    says it carries nothing to check ("Quick update:", "先说结论：", a caption before a
    link); the part after the last colon always stays.
    """
    out: list[Clause] = []
    for index, sentence in enumerate(sentences(span)):
        parts = _split(sentence, _LEAD_IN, empty=True)
        if not is_fact(sentence) or (len(parts) > 1 and assertions.asks(parts[0])):
            continue
        kept = [p for i, p in enumerate(parts) if i == len(parts) - 1 or not is_lead_in(p)]
        found = [c for p in kept for c in clauses(p, index)]
        out += [c for c in assertions.unconditional(found) if assertions.asserts(c)]
    return out
