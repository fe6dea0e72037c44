"""Does a fact agree with the evidence it rests on?

Related evidence is not yet supporting evidence. A clause of a fact is compared with the
evidence on its subject as a structure, not as a bag of words:

- every number, version, id and title it states must be in the evidence (dataset v4 is not
  v3, 3,000 samples is not 1,200), and every proper name (a classic, a master, a translator);
- a count of documents ("两篇", "three articles") must be what the evidence shows;
- a value tied to a label (a member, a variant) must be that label's value: 1,004 messages
  that the evidence gives to one member are not another member's;
- a comparison ("A 高于 B", "B beats A") must have the order of the recorded values;
- "no findings" is contradicted by evidence that lists findings, "none high" is not.

Any of these failing is a contradiction. A clause with none of them is judged by how much of
its wording the evidence covers, across languages through the terms lexicon: most of it →
supported, some → uncertain (related but not confirmed). Capitalised words the lexicons do not
know (a name, perhaps) that the evidence lacks also make it uncertain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, lru_cache

from lingyi._regex import lazy_re
from lingyi.checks._asserted import Clause
from lingyi.text import Entities, Hit, Number, TermMatcher, arabic_numerals, entities
from lingyi.text._lang import EN_STOP, ZH_STOP_CHARS

_EN_NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "_",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
    if w != "_"
}
_EN_NUMBER = lazy_re(rf"\b({'|'.join(_EN_NUMBERS)})\b", re.IGNORECASE)
# When or which, not how many: an ordinal ("第3周", "week 7"), a significance threshold
# ("在0.05水平上", "at the 0.05 level"), a month without a day, "3 天前", a clock time,
# "2 weeks ago". Each pattern runs only when its trigger word is in the text (cost).
_TIMES = (
    (
        ("第",),
        r"第\s*+\d+(?:\s*+[至到\-~]\s*+\d+)?\s*+(?:周|天|章|节|季度|期|次|名|轮|届|步|阶段|课|讲|部分)",
    ),
    (
        ("week", "day", "sprint", "phase", "step", "chapter", "lesson"),
        r"\b(?:week|day|sprint|phase|step|chapter|lesson)s?\s++\d+(?:\s*+(?:-|to)\s*+\d+)?\b",
    ),
    (("水平",), r"(?:在\s*+)?\d*\.\d+\s*+(?:的)?\s*+(?:显著性)?水平"),
    (
        ("level", "alpha", "α"),
        r"\bat\s++the\s++\d*\.\d+\s++level\b|(?:α|alpha|significance level)\s*+[=:]?\s*+\d*\.\d+",
    ),
    (("月",), r"(?<![\d.])\d{1,2}\s*+月(?!\s*+\d{1,2}\s*+[日号])"),
    (
        ("前", "后", "内"),
        r"\d+\s*+(?:天|周|小时|分钟|个月|年)(?:前|后|以前|以后|之前|之后|以内|内)",
    ),
    (("点", ":"), r"\d+\s*+点(?:\s*+\d+\s*+分?)?|\d{1,2}:\d{2}"),
    (
        ("ago", "later", "earlier", "before", "after"),
        r"\d+\s++(?:days?|weeks?|hours?|minutes?|months?|years?)\s++(?:ago|later|earlier|before|after)",
    ),
)
_TIME = tuple((words, lazy_re(p, re.IGNORECASE)) for words, p in _TIMES)
_DIGITS = lazy_re(r"(?<![a-z0-9_.])(\d+(?:,\d{3})*(?:\.\d+)?)(?:\s*+%)?", re.IGNORECASE)
_COUNT = lazy_re(
    r"(\d+(?:,\d{3})*)\s*+(?:篇|份|部|本|条(?!消息|记录|数据))|"
    r"(\d+(?:,\d{3})*)\s++(?:articles?|entries|documents?|docs|"
    r"items|papers|results|commentaries|translations|titles|books|videos|chapters)\b",
    re.IGNORECASE,
)
# A data source, a table or a column named in snake_case: the evidence must name it too.
# Titles as lingyi.text.entities reads them, from the text itself (names are not blanked).
_TITLE = lazy_re(r"《([^》]{1,40})》|“([^”]{1,40})”|\"([^\"]{2,40})\"")
_IDENTIFIER = lazy_re(r"(?<![\w-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w-])")
_OWNER_LETTER = lazy_re(r"(?<![A-Za-z/&])([A-H])(?![A-Za-z/&])")
_ARTICLE_A = lazy_re(r"A\s++[a-z]")
_STARTS = lazy_re(r"(?:^|[.!?:;,\"(\n])\s*+$")


def _is_article(pair: str, at: int) -> bool:
    """'A new entry…' opening a sentence is the article; 'cohort A scored' is a label."""
    return bool(_ARTICLE_A.match(pair, at)) and bool(_STARTS.search(pair[:at]))


_SEGMENT = lazy_re(r"[;。；()]|,(?!\d{3})|\bvs\.?\b|\bversus\b|对比")
# What a number counts: the measure word or the word after it (16 章, 1,200 samples, 2.3s).
_UNIT = lazy_re(r"\s*+(%|[\u3400-\u9fff]|[a-z]+)")
_CAPITALISED = lazy_re(r"(?<![\w'.])([A-Z][a-z]{2,}(?:-[A-Za-z]+)?)(?:'s)?\b")
_MONTH_DAY = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)
_SEVERITY = {
    "high": "high",
    "高危": "high",
    "medium": "medium",
    "中危": "medium",
    "low": "low",
    "低危": "low",
    "critical": "critical",
    "严重": "critical",
    "致命": "critical",
}
_SEV = r"(?P<q>high|medium|low|critical|高危|中危|低危|严重|致命)"
_FINDING = (
    r"(?:findings?|issues?|problems?|vulnerabilit(?:y|ies)|bugs?|defects?|问题|发现|漏洞|隐患|缺陷)"
)
_ABSENT = (
    lazy_re(rf"(?:没有|没|无|未|零)(?:发现|找到|检出|查出)?(?:任何)?的?{_SEV}?的?{_FINDING}"),
    lazy_re(rf"\b(?:no|zero|0)\s++(?:{_SEV}[- ]?(?:severity|risk)?\s++)?{_FINDING}"),
    lazy_re(rf"\bnone\s++(?:(?:are|is|were|was)\s++)?{_SEV}\b"),
    lazy_re(r"\b(?:found|reported|flagged|raised)\s++nothing\b|\bnothing\s++(?:found|flagged)\b"),
    lazy_re(r"\b(?:came back|comes back|is|was)\s++clean\b"),
)
_COUNTED = (
    lazy_re(rf"(\d+)\s*+(?:个|项|条)?\s*+{_SEV}?[- ]?(?:severity|risk)?\s*+(?:的)?{_FINDING}"),
    lazy_re(rf"(\d+)\s++{_SEV}\b"),
    lazy_re(rf"{_SEV}\s*+[:=]?\s*+(\d+)\b"),
)


Owners = Sequence[tuple[str, str]]  # (canonical member name, member id)


def english_numbers(text: str) -> str:
    """'two medium findings' → '2 medium findings' (one stays a word: it is often 'a')."""
    if not _EN_NUMBERS.keys() & set(re.findall(r"[a-z]+", text.lower())):
        return text
    return _EN_NUMBER.sub(lambda m: _EN_NUMBERS[m.group(1).lower()], text)


_TOTAL = lazy_re(
    r"\b(?:total|in total|altogether|combined|across|overall|sum)\b|总共|一共|合计|总计|共计|加起来|共(?=\s*+[\d一二两三四五六七八九十])"
)
_GAP = lazy_re(
    r"\b(?:more|fewer|less|higher|lower|than|gap|difference|ahead|behind|later|earlier)\b|"
    r"比|相差|差距|高出|多出|少了|多了|差了|晚了|早了|提高了|降低了|"
    r"[=−+]|\s-\s|减去|加上"  # arithmetic written out: 5,140 − 37 = 5,103
)
_ZH_NUMERAL = lazy_re("[零〇一二两三四五六七八九十百千万亿]")
_ANY_DIGIT = lazy_re(r"\d")
_MILLION = lazy_re(r"(\d+(?:\.\d+)?)\s*+(?:million|mn)\b|(\d+\.\d+)m\b", re.IGNORECASE)


def _millions(text: str) -> str:
    """'4.12M rows' → '4120000 rows' (as 412 万 reads)."""
    if "m" not in text and "M" not in text:
        return text
    return _MILLION.sub(lambda m: f"{Decimal(m.group(1) or m.group(2)) * 1_000_000:f}", text)


# Numbers that are no claim about the evidence (issue 25): list numbering ("1. ", "2)"), a
# round or an attempt ("round 4", "第 2 轮"), how many members there are ("the fewest of the
# four", 四位成员), HTTP status codes (504, "the 502s", "（502）"), week numbers (w16).
_INCIDENTAL = lazy_re(
    r"(?m)(?:^|(?<=\D[:：]))\s*+(?:[-*]\s*+)?\d{1,2}(?:[.)](?=\s|$)|、)|"
    r"\b(?:round|run|attempt|iteration|try|pass|step|no\.)\s*+#?\d+\b|第\s*+\d+\s*+(?:轮|次|遍|步)|"
    r"\b(?:of|among|all)\s++(?:the\s++)?\d{1,2}(?=\s*+(?:members?\b|of us\b|[.,;!?)]|$))|"
    r"\d{1,2}\s*+(?:位|个|名)?\s*+(?:成员|members?\b)|"
    r"(?:http|status|code|错误码|状态码|返回)\s*+[:=]?\s*+[1-5]\d{2}\b|"
    r"(?<![\d.,])[45]\d{2}(?=s\b|\s*+(?:errors?|responses?|status|错误|报错|响应)|\s*+[)）])|"
    r"\b(?:\d{4}-)?w(?:k|eek)?\s*+\d{1,2}\b"
)


def incidental_blanked(text: str) -> str:
    """``text`` with its incidental numbers blanked (same length: positions are kept)."""
    if not _ANY_DIGIT.search(text):
        return text
    return _INCIDENTAL.sub(lambda m: " " * len(m.group(0)), text)


def _timeless(text: str) -> str:
    lower = text.lower()
    for words, pattern in _TIME:
        if any(w in lower for w in words):
            text = pattern.sub(" ", text)
    return text


@lru_cache(maxsize=8192)
def numeric(text: str) -> str:
    """Numbers as digits (Chinese and English numerals), time expressions removed."""
    text = english_numbers(text)
    text = arabic_numerals(text) if _ZH_NUMERAL.search(text) else text
    return _timeless(_millions(text)) if _ANY_DIGIT.search(text) else text


@dataclass(frozen=True)
class Vocabulary:
    """The matchers a comparison uses: names, terms, relations, and what to ignore."""

    names: TermMatcher
    terms: TermMatcher
    assertions: TermMatcher  # its "generic" group is ignored; relation groups compare
    subjects: TermMatcher  # subject markers say what a fact is about, not what it states
    extra: TermMatcher  # a policy's own markers and stop terms, ignored like generic words
    owners: tuple[tuple[str, str], ...]  # (canonical member name, member id)
    # Derived from the matchers' lexicons, so they take no part in equality and hashing:
    # every form of every name and term group (to find evidence by), and one automaton
    # over names ("name:<group>"), terms ("term:<group>") and ignored words ("ignore:…").
    forms: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    combined: TermMatcher | None = field(default=None, compare=False)

    def hits(self, text: str) -> list[tuple[str, Hit]]:
        """Names, terms and ignored words in ``text``: the longest one wherever they overlap
        (a name before a term before an ignored word on the same span)."""
        matcher = self.combined
        found = self._separate(text) if matcher is None else self._combined(text, matcher)
        found.sort(key=lambda kh: (kh[1].start, -(kh[1].end - kh[1].start), _RANK[kh[0]]))
        out, end = [], -1
        for kind, hit in found:
            if hit.start >= end:
                out.append((kind, hit))
                end = hit.end
        return out

    @staticmethod
    def _combined(text: str, matcher: TermMatcher) -> list[tuple[str, Hit]]:
        out = []
        for hit in matcher.find(text):
            for kind in ("name", "term", "ignore"):
                groups = {g.split(":", 1)[1] for g in hit.groups if g.startswith(f"{kind}:")}
                if groups:
                    out.append((kind, Hit(hit.term, frozenset(groups), hit.start, hit.end)))
                    break
        return out

    def _separate(self, text: str) -> list[tuple[str, Hit]]:
        found = [("name", h) for h in self.names.find(text)]
        found += [("term", h) for h in self.terms.find(text)]
        found += [("ignore", h) for h in self.subjects.find(text) + self.extra.find(text)]
        return found + [("ignore", h) for h in self.assertions.find(text) if "generic" in h.groups]


_RANK = {"name": 0, "term": 1, "ignore": 2}


@dataclass
class Features:
    """What a text states: its entities, names, terms and structured relations."""

    values: set[Decimal] = field(default_factory=set)
    numbers: list[tuple[str, frozenset[Decimal]]] = field(default_factory=list)
    versions: frozenset[str] = frozenset()
    ids: frozenset[str] = frozenset()
    identifiers: frozenset[str] = frozenset()  # snake_case names: loans_2025, reading_survey
    titles: frozenset[str] = frozenset()
    counts: list[int] = field(default_factory=list)
    units: dict[str, set[Decimal]] = field(default_factory=dict)  # unit → values counted in it
    names: set[str] = field(default_factory=set)
    unknown_names: set[str] = field(default_factory=set)
    terms: set[str] = field(default_factory=set)
    owned: list[tuple[str, Decimal]] = field(default_factory=list)  # (owner, value)
    findings: dict[str | None, int] = field(default_factory=dict)  # severity → count
    absent: list[str | None] = field(default_factory=list)  # severities said to be none
    comparisons: list[tuple[str, str | None, int]] = field(default_factory=list)
    totals: bool = False  # says "in total", 一共: a number may be a sum of the evidence's
    gaps: bool = False  # says "higher by", 比…多: a number may be a difference of them
    approximate: dict[str, Number] = field(default_factory=dict)  # "约 230ms": rounds to it


def _run_terms(text: str) -> set[str]:
    """Bigrams of CJK runs (cut at function characters) and English content words."""
    out: set[str] = set()
    for run in re.findall(r"[\u3400-\u9fff]+", text):
        for piece in re.split(f"[{''.join(ZH_STOP_CHARS)}]", run):
            out.update(piece[i : i + 2] for i in range(len(piece) - 1))
    words = re.findall(r"[a-z][a-z0-9'\-]*", text.replace("_", " "))
    return out | {w for w in words if len(w) > 2 and w not in EN_STOP}


def _lexical(text: str, hits: list[tuple[str, Hit]]) -> tuple[set[str], set[str]]:
    """(names, terms) of canonical ``text``: lexicon groups as @tokens, other words raw."""
    names: set[str] = set()
    terms: set[str] = set()
    chars = list(text)
    for kind, hit in hits:
        if kind == "name":
            names.update(hit.groups)
        elif kind == "term":
            terms.update(f"@{g}" for g in hit.groups)
        chars[hit.start : hit.end] = " " * (hit.end - hit.start)
    rest = "".join(chars)
    rest = arabic_numerals(rest) if _ZH_NUMERAL.search(rest) else rest  # 两篇 is a count
    rest = re.sub(r"\d+(?:[.,]\d+)*", " ", rest)
    return names, terms | _run_terms(rest)


def names_in(text: str, vocab: Vocabulary) -> set[str]:
    """The name groups a canonical text mentions (of a title: 《道德经》 → daodejing)."""
    return _lexical(text, vocab.hits(text))[0]


def _numbers(text: str, ents: Entities) -> list[tuple[str, frozenset[Decimal]]]:
    """Numbers of canonical ``text``; a Chinese 一 (a, one) is no number of its own."""
    written = {m.group(1) for m in _DIGITS.finditer(text)} if "1" in text else set()
    return [(n.text, n.values) for n in ents.numbers if n.values != {Decimal(1)} or "1" in written]


def _titles(found: Iterable[str]) -> frozenset[str]:
    """Quoted titles: CJK, or at least two words (a quoted single word is a label)."""
    return frozenset(t for t in found if re.search(r"[\u3400-\u9fff]", t) or len(t.split()) > 1)


def _capitalised(cased: str, hits: list[tuple[str, Hit]], owners: Owners) -> set[str]:
    """Capitalised words that are not sentence-initial and that no lexicon knows."""
    known = {w for _, h in hits for w in re.findall(r"[a-z]+", h.term)}
    out = set()
    for match in _CAPITALISED.finditer(cased):
        word = match.group(1).lower()
        before = cased[: match.start()].rstrip()
        if not before or before.endswith((".", ":", "!", "?", "。", '"')):
            continue
        if word in EN_STOP or word in _MONTH_DAY or word in known or word in dict(owners):
            continue
        out.add(word)
    return out


def _blank(text: str, hits: list[tuple[str, Hit]]) -> str:
    """``text`` with proper names blanked: the Four Noble Truths are not a number."""
    chars = list(text)
    for kind, hit in hits:
        if kind == "name":
            chars[hit.start : hit.end] = " " * (hit.end - hit.start)
    return "".join(chars)


def features(text: str, cased: str, vocab: Vocabulary, *, claim: bool = True) -> Features:
    """The features of a clause, or (``claim`` false) of a piece of evidence, which states
    no comparison, absence, count or unknown name a check would compare."""
    hits = vocab.hits(text)
    names, terms = _lexical(text, hits)
    plain = _blank(text, hits)
    digits = incidental_blanked(numeric(plain)) if claim else numeric(plain)
    ents = entities(digits)  # names blanked: their numerals (Four Noble Truths) are no numbers
    pair = numeric(_blank(cased, hits) if len(cased) == len(text) else cased)
    found = Features(
        numbers=_numbers(plain, ents),
        versions=ents.versions,
        ids=ents.ids,
        titles=_titles(a or b or c for a, b, c in _TITLE.findall(text)),
        units=units_of(digits),
        names=names,
        terms=terms,
        owned=owned_values(pair, vocab.owners),
        findings=finding_counts(pair.lower()),
    )
    found.values = {v for _, values in found.numbers for v in values}
    found.approximate = {n.text: n for n in ents.numbers if n.margin}
    return _claimed(found, text, cased, digits, pair, hits, vocab) if claim else found


def _claimed(
    found: Features,
    text: str,
    cased: str,
    digits: str,
    pair: str,
    hits: list[tuple[str, Hit]],
    vocab: Vocabulary,
) -> Features:
    """What only a claim states: identifiers, counts, unknown names, absences, comparisons."""
    found.identifiers = frozenset(_IDENTIFIER.findall(text))
    found.counts = [
        c for a, b in _COUNT.findall(digits) if (c := int((a or b).replace(",", ""))) != 1
    ]
    found.unknown_names = _capitalised(cased, hits, vocab.owners)
    found.absent = absences(text)
    found.comparisons = comparisons(pair, vocab)
    found.totals = bool(_TOTAL.search(text))
    found.gaps = bool(_GAP.search(text))
    return found


def units_of(digits: str) -> dict[str, set[Decimal]]:
    """Values by what they count: '16章' → {'章': {16}}, '2.3s' → {'s': {2.3}}."""
    out: dict[str, set[Decimal]] = {}
    for match in _DIGITS.finditer(digits):
        unit = _UNIT.match(digits, match.end())
        if unit and not match.group(0).endswith("%"):
            value = Decimal(match.group(1).replace(",", ""))
            out.setdefault(unit.group(1), set()).add(value)
    return out


def _owners_in(pair: str, owners: Owners) -> list[tuple[int, str]]:
    """(position, owner) of members (by id) and variant letters (A, B) in ``pair``."""
    lower = pair.lower()
    letters = list(_OWNER_LETTER.finditer(pair))
    labelled = any(m.group(1) != "A" for m in letters)
    found = [
        (m.start(), m.group(1).lower())
        for m in letters
        if labelled or not _is_article(pair, m.start())
    ]
    pattern, members = _member_pattern(tuple(owners))
    found += [(m.start(), members[m.group(0)]) for m in pattern.finditer(lower)]
    return sorted(found)


@lru_cache(maxsize=16)
def _member_pattern(owners: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str], dict[str, str]]:
    """One regex for every member name, and the member id each name stands for."""
    names = sorted({n for n, _ in owners if n}, key=len, reverse=True)
    alt = "|".join(re.escape(n) for n in names) or "(?!)"
    return re.compile(rf"(?<![a-z])(?:{alt})(?![a-z])"), dict(owners)


_NEAR = 20  # characters between a label and its value, at most ("b satisfaction 4.6")


def owned_values(pair: str, owners: Owners) -> list[tuple[str, Decimal]]:
    """Numbers with the label just before them: 'lingyi 1,004' → (lingyi, 1004).

    Only a label close before the number, with no other number between, owns it: in
    "B reached 0.874 against 0.851 for A" the 0.851 has no owner (it is not B's).
    """
    out: list[tuple[str, Decimal]] = []
    start = 0
    for end in [m.start() for m in _SEGMENT.finditer(pair)] + [len(pair)]:
        segment = pair[start:end]
        labels = _owners_in(segment, owners)
        last_number = -1
        for number in _DIGITS.finditer(segment):
            before = [p for p in labels if last_number < p[0] < number.start()]
            if before and number.start() - before[-1][0] <= _NEAR + len(before[-1][1]):
                out.append((before[-1][1], Decimal(number.group(1).replace(",", ""))))
            last_number = number.start()
        start = end
    return out


def finding_counts(lower: str) -> dict[str | None, int]:
    """Findings by severity ('2 medium findings', '0 high'); None is a count of any severity."""
    out: dict[str | None, int] = {}
    for pattern in _COUNTED:
        for match in pattern.finditer(lower):
            number = next(g for g in match.groups() if g and g[0].isdigit())
            severity = _SEVERITY.get(match.group("q") or "")
            out.setdefault(severity, int(number))
    return out


def absences(text: str) -> list[str | None]:
    """Severities a text says there are none of (None: no findings at all)."""
    out: list[str | None] = []
    for pattern in _ABSENT:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            out.append(_SEVERITY.get(groups.get("q") or ""))
    return out


def comparisons(pair: str, vocab: Vocabulary) -> list[tuple[str, str | None, int]]:
    """(x, y, +1|-1): 'x is higher than y' is +1; y is None when only x is named."""
    if not _owners_in(pair, vocab.owners):
        return []  # nothing labelled, nothing compared
    lower = pair.lower()
    hits = vocab.assertions.find(lower)
    lower_better = any("lower_is_better" in h.groups for h in hits)
    out = []
    for hit in hits:
        sign = _sign(hit.groups, lower_better)
        if sign:
            labels = _owners_in(pair, vocab.owners)
            x = [o for pos, o in labels if pos < hit.start]
            y = [o for pos, o in labels if pos >= hit.end]
            if x:
                out.append((x[-1], y[0] if y else None, sign))
    return out + _bi_comparisons(pair, vocab.owners)


def _sign(groups: frozenset[str], lower_better: bool) -> int:
    merit = -1 if lower_better else 1
    if "higher" in groups:
        return 1
    if "lower" in groups:
        return -1
    return merit if "better" in groups else -merit if "worse" in groups else 0


_BI = lazy_re(r"比\s*+(\S{1,12}?)\s*+的?\s*+(?:准确率|\S{0,4})?(高|好|多|大|强|优|低|差|少|小|弱)")


def _bi_comparisons(pair: str, owners: Owners) -> list[tuple[str, str | None, int]]:
    """The 比 construction: 'X 比 Y 高' (y after 比, x the last label before it)."""
    out: list[tuple[str, str | None, int]] = []
    for match in _BI.finditer(pair):
        labels = _owners_in(pair, owners)
        x = [o for pos, o in labels if pos < match.start()]
        y = [o for pos, o in labels if match.start() < pos < match.end()]
        if x and y:
            out.append((x[-1], y[0], 1 if match.group(2) in "高好多大强优" else -1))
    return out


@lru_cache(maxsize=65536)
def evidence_features(text: str, cased: str, vocab: Vocabulary) -> Features:
    """Features of a piece of evidence, cached: evidence is compared again and again
    (callers must not change what they get)."""
    return features(text, cased, vocab, claim=False)


@lru_cache(maxsize=8192)
def _clause_features(text: str, cased: str, vocab: Vocabulary) -> Features:
    return features(text, cased, vocab)


@dataclass
class Findings:
    """The outcome of comparing a fact with its evidence."""

    contradictions: list[str] = field(default_factory=list)
    doubts: list[str] = field(default_factory=list)
    confirmed: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    """The evidence a fact rests on, merged: what the related items state together."""

    items: list[Features]
    text: str
    # The kinds of number (rate, year, amount) whose mere presence in the evidence makes a
    # missing value of that kind a contradiction. A whole document holds many amounts, so a
    # cited document is compared on rates and years, and on amounts of the same unit.
    kinds: frozenset[str] = frozenset({"rate", "year", "amount"})

    @property
    def values(self) -> set[Decimal]:
        return {v for f in self.items for v in f.values}

    @cached_property
    def derived(self) -> set[Decimal]:
        """Sums and differences of two values of the evidence, and the sum of all: a claim may
        state what follows from it (5,140 − 37 = 5,103; B − A = 2.6; 共 388 条) without the
        evidence writing it."""
        values = sorted(self.values)[:24]
        pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
        return {a + b for a, b in pairs} | {b - a for a, b in pairs} | {sum(values, Decimal(0))}

    @cached_property
    def units(self) -> dict[str, set[Decimal]]:
        out: dict[str, set[Decimal]] = {}
        for item in self.items:
            for unit, values in item.units.items():
                out.setdefault(unit, set()).update(values)
        return out

    def union(self, attr: str) -> set[str]:
        return {x for f in self.items for x in getattr(f, attr)}

    def owned(self) -> dict[str, set[Decimal]]:
        out: dict[str, set[Decimal]] = {}
        for f in self.items:
            for owner, value in f.owned:
                out.setdefault(owner, set()).add(value)
        return out

    def findings(self) -> dict[str | None, int]:
        out: dict[str | None, int] = {}
        for f in self.items:
            for severity, count in f.findings.items():
                out[severity] = out.get(severity, 0) + count
        return out


# A finding is (message name, values): rendered through the check's catalog entries.
Found = tuple[str, dict[str, str]]


@dataclass
class Verdict:
    """What comparing one clause with its evidence found."""

    contradictions: list[Found] = field(default_factory=list)
    doubts: list[Found] = field(default_factory=list)
    anchored: bool = False  # a number, version, id, count or relation agreed


def _number(text: Decimal | str) -> str:
    value = Decimal(text) if isinstance(text, str) else text
    return f"{value.normalize():f}"


def _entities(claim: Features, ev: Evidence, verdict: Verdict) -> None:
    """Numbers, versions and ids the clause states must be in the evidence."""
    values, counts = ev.values, set(claim.counts)
    derived: set[Decimal] | None = None
    for text, number in claim.numbers:
        if number & {Decimal(c) for c in counts}:
            continue  # a count of documents: compared with what was found
        if number & values or (
            text in claim.approximate and claim.approximate[text].agrees(values)
        ):
            verdict.anchored = True
            continue
        if derived is None:  # only a total or a difference the text speaks of is derived
            derived = ev.derived if claim.totals or claim.gaps else set()
        if number & derived:
            verdict.anchored = True
        elif _same_quantity(text, number, claim, ev):
            verdict.contradictions.append(("what_number", {"value": text}))
        else:  # the evidence gives this quantity no value at all: not settled
            verdict.doubts.append(("what_number_absent", {"value": text}))
    for kind, found in (("version", claim.versions), ("id", claim.ids | claim.identifiers)):
        known = ev.union(f"{kind}s")
        for x in sorted(found):
            if x in known or (
                kind == "id" and re.search(rf"(?<![\w-]){re.escape(x)}(?![\w-])", ev.text)
            ):
                verdict.anchored = True
            else:
                verdict.contradictions.append((f"what_{kind}", {"value": x}))


def _same_quantity(text: str, number: frozenset[Decimal], claim: Features, ev: Evidence) -> bool:
    """Does the evidence give a value of this number's kind (20 章 against 16 章, a rate
    against a rate, a year against a year)? Then a number missing from it is contradicted;
    when it gives none of its kind, the evidence does not settle it."""
    recorded = ev.units
    if any(v in vs for u, vs in claim.units.items() if u in recorded for v in number):
        return True
    kinds = {_kind(v, text) for v in number} & ev.kinds
    return any(_kind(v, "") in kinds for v in ev.values)


def _kind(value: Decimal, text: str) -> str:
    """A rate (87.4%, 0.874), a year (1991), or an amount (a count, 1.2 s against 840 ms)."""
    if text.endswith("%") or 0 < value < 1:
        return "rate"
    integral = value == value.to_integral_value()
    return "year" if integral and 1900 <= value <= 2100 and "," not in text else "amount"


def _names(claim: Features, ev: Evidence, titles: dict[str, set[str]], verdict: Verdict) -> None:
    """Titles and proper names must be in the evidence (in any language); unknown ones, doubts."""
    names = ev.union("names")
    for title in sorted(claim.titles):
        if title not in ev.text and not (titles.get(title) and titles[title] <= names):
            verdict.contradictions.append(("what_title", {"value": title}))
    for name in sorted(claim.names - names):
        verdict.contradictions.append(("what_name", {"value": name}))
    for word in sorted(w for w in claim.unknown_names if w not in ev.text):
        verdict.doubts.append(("what_unknown", {"value": word}))


def _counts(claim: Features, ev: Evidence, related: int, verdict: Verdict) -> None:
    """'两篇', 'three articles': as many as the evidence holds, or as many as the titles listed."""
    allowed = {related, len(claim.titles)}
    allowed |= {int(v) for v in ev.values if v == int(v)}
    for count in claim.counts:
        if count in allowed:
            verdict.anchored = True
        else:
            verdict.contradictions.append(
                ("what_count", {"value": str(count), "found": str(related)})
            )


def _owned(claim: Features, ev: Evidence, verdict: Verdict) -> None:
    """A value tied to a label must not be another label's value in the evidence."""
    recorded = ev.owned()
    for owner, value in claim.owned:
        if value in recorded.get(owner, ()):
            verdict.anchored = True
            continue
        others = [o for o, values in recorded.items() if o != owner and value in values]
        if owner not in recorded or not others:
            continue
        theirs = ", ".join(sorted(_number(v) for v in recorded[owner]))
        verdict.contradictions.append(
            ("what_owner", {"value": _number(value), "owner": owner, "recorded": theirs})
        )


def _compared(claim: Features, ev: Evidence, verdict: Verdict) -> None:
    """'X higher than Y' must have the order of X's and Y's recorded values."""
    single = {o: next(iter(v)) for o, v in ev.owned().items() if len(v) == 1}
    for x, y, sign in claim.comparisons:
        others = [o for o in single if o != x]
        y = y if y is not None else (others[0] if len(others) == 1 else None)
        if x not in single or y not in single or single[x] == single[y]:
            continue
        if (single[x] > single[y]) == (sign > 0):
            verdict.anchored = True
        else:
            values = {"x": x, "y": y, "vx": _number(single[x]), "vy": _number(single[y])}
            verdict.contradictions.append(("what_order", values))


def _findings(claim: Features, ev: Evidence, verdict: Verdict) -> None:
    """'No findings' against evidence that lists some; '2 high' against '0 high'."""
    recorded = ev.findings()
    total = recorded.get(None, sum(v for k, v in recorded.items() if k is not None))
    for severity in claim.absent:
        known = total if severity is None and recorded else recorded.get(severity)
        if known is None:
            continue
        if known == 0:
            verdict.anchored = True
        else:
            verdict.contradictions.append(("what_absent", {"count": str(known)}))
    for severity, count in claim.findings.items():
        if severity in recorded and recorded[severity] != count:
            values = {"value": str(count), "recorded": str(recorded[severity])}
            verdict.contradictions.append(("what_findings", values))


def _covered(claim: Features, ev: Evidence, coverage: float, verdict: Verdict) -> None:
    """A clause with nothing else to check: enough of its wording must be in the evidence."""
    wanted = claim.terms | {f"name:{n}" for n in claim.names}
    if not wanted or verdict.anchored or verdict.contradictions:
        return
    have = ev.union("terms") | {f"name:{n}" for n in ev.union("names")}
    missing = sorted(wanted - have)
    if len(wanted) - len(missing) < coverage * len(wanted):
        shown = ", ".join(m.removeprefix("name:").removeprefix("@") for m in missing[:6])
        verdict.doubts.append(("what_uncovered", {"value": shown}))


def _units(claim: Features, ev: Evidence, verdict: Verdict) -> None:
    """A number counting what the evidence counts differently: 20 章 against 16 章."""
    recorded = ev.units
    for unit, values in claim.units.items():
        if unit in recorded and not values & recorded[unit]:
            for value in sorted(values):
                verdict.contradictions.append(("what_number", {"value": _number(value)}))


def compare(
    claim: Features,
    ev: Evidence,
    *,
    related: int,
    titles: dict[str, set[str]],
    coverage: float,
) -> Verdict:
    """Compare one clause's features with the evidence it rests on."""
    verdict = Verdict()
    _entities(claim, ev, verdict)
    _counts(claim, ev, related, verdict)
    _owned(claim, ev, verdict)
    _compared(claim, ev, verdict)
    _findings(claim, ev, verdict)
    _names(claim, ev, titles, verdict)
    _covered(claim, ev, coverage, verdict)
    return verdict


def has_entities(text: str) -> bool:
    """Does canonical ``text`` state a number, a version, an id or a title?"""
    ents = entities(numeric(text))
    return bool(ents.numbers or ents.versions or ents.ids or _titles(ents.titles))


def overlaps(claims: Iterable[Features], ev: Evidence) -> bool:
    """Do the claims share any wording or name with the evidence at all?"""
    terms, names = ev.union("terms"), ev.union("names")
    return any(c.terms & terms or c.names & names for c in claims)


def contradicts(claim: Features, ev: Evidence) -> Verdict:
    """For a fact that claims no subject but names recorded evidence: contradictions only.

    Not being in the evidence is not held against it (it claims nothing about the session's
    evidence); a value the evidence gives differently, in the same unit or for the same
    label, or an order or a finding the evidence reverses, is.
    """
    verdict = Verdict()
    _units(claim, ev, verdict)
    _owned(claim, ev, verdict)
    _compared(claim, ev, verdict)
    _findings(claim, ev, verdict)
    verdict.anchored = False
    return verdict


def clause_features(clause: Clause, vocab: Vocabulary) -> Features:
    """Features of a clause (cached like evidence: a check asks for them more than once).

    Callers must not change what they get.
    """
    return _clause_features(clause.text, clause.cased, vocab)
