"""The entities a statement commits to: numbers, dates, versions, ids and titles.

Two texts about the same work must agree on these, in any language: 12,400 = 一万二千四百
= 12.4k, 87.4% = 0.874, v0.16 = 第0.16版 is not v0.17, 7月15日 = July 15, exp-37 is not
exp-38, 《孟子》 is not 《论语》. Entities are read from canonical text; a number keeps every
value it may stand for (a percentage is also a fraction) so that comparison is a set overlap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from lingyi._regex import lazy_re
from lingyi.text._zh_numbers import arabic_numerals

_VERSION = lazy_re(
    r"(?<![a-z0-9.])v(\d+(?:\.\d+){0,2})(?![\d.]*\d)|(?<![\d.])(\d+\.\d+\.\d+)(?![\d.])"
)
_EDITION = lazy_re(r"第\s*(\d+)\s*版|\bversion\s+(\d+(?:\.\d+){0,2})\b")
_THING_ID = lazy_re(
    r"(?<![a-z0-9_.\-])(?!(?:week|day|month|year|sprint|quarter|phase|step|page|top|rc)-)"
    r"([a-z]{1,12}-\d+|#\d+)(?!\d|\.\d)"
)
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_EN_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATES = (
    re.compile(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"),
    re.compile(rf"\b{_EN_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b"),
    re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_EN_MONTH}"),
)
_NUMBER = lazy_re(r"(?<![a-z0-9_.])(\d+(?:,\d{3})*(?:\.\d+)?)(?:\s*(%|k\b|万|千))?")
_TITLE = lazy_re(r"《([^》]{1,40})》|“([^”]{1,40})”|\"([^\"]{2,40})\"")
_SCALE = {"k": Decimal(1000), "千": Decimal(1000), "万": Decimal(10000)}


# A number said to be approximate: "约 230ms", "about 22%", "0.8 左右", "~40".
_ABOUT_BEFORE = lazy_re(
    r"(?:约|大约|大概|大致|将近|接近|差不多|近|~|≈|\babout|\baround|\broughly|"
    r"\bapproximately|\bapprox\.?|\bnearly|\balmost|\bsome)\s*(?:为|是|在|有|到|占)?\s*$"
)
_ABOUT_AFTER = lazy_re(r"^\s*(?:%\s*)?(?:[a-z]{1,3}\s*)?(?:左右|上下|\bor\s+so\b)")


@dataclass(frozen=True)
class Number:
    text: str
    values: frozenset[Decimal]  # every value the written number may stand for
    margin: Decimal = Decimal(0)  # approximate: half a step of its last written digit

    def agrees(self, values: frozenset[Decimal] | set[Decimal]) -> bool:
        """One of ``values`` is this number, or rounds to it when it is approximate
        (约 230 is 231, about 22% is 21.7%; about 30% is not 21.7%)."""
        if self.values & values:
            return True
        return bool(self.margin) and any(near(self, v) for v in values)


def near(number: Number, value: Decimal) -> bool:
    """``value`` is within ``number``'s margin, scaled to each value it stands for."""
    top = max(number.values)
    return any(abs(value - w) <= number.margin * w / top for w in number.values if top)


def _margin(digits: str) -> Decimal:
    """Half a step of the last written digit: 0.8 → 0.05, 22 → 0.5, 230 → 5."""
    digits = digits.replace(",", "")
    if "." in digits:
        return Decimal(5) / Decimal(10) ** (len(digits.split(".")[1]) + 1)
    zeros = len(digits) - len(digits.rstrip("0"))
    return Decimal(5) * Decimal(10) ** (min(zeros, len(digits) - 1) - 1)


@dataclass(frozen=True)
class Entities:
    numbers: tuple[Number, ...] = ()
    dates: frozenset[str] = field(default_factory=frozenset)  # "07-15"
    versions: frozenset[str] = field(default_factory=frozenset)  # "0.16", "2.4.1"
    ids: frozenset[str] = field(default_factory=frozenset)  # "exp-37", "#482"
    titles: frozenset[str] = field(default_factory=frozenset)  # "论语"

    @property
    def values(self) -> frozenset[Decimal]:
        return frozenset(v for n in self.numbers for v in n.values)

    def __bool__(self) -> bool:
        return bool(self.numbers or self.dates or self.versions or self.ids or self.titles)


def _dates(text: str) -> tuple[frozenset[str], str]:
    found: set[str] = set()
    for i, pattern in enumerate(_DATES):
        for m in pattern.finditer(text):
            month, day = (m.group(1), m.group(2)) if i == 0 else _en_date(m, i)
            found.add(f"{int(month):02d}-{int(day):02d}")
        text = pattern.sub(" ", text)  # a date's digits are not numbers of their own
    return frozenset(found), text


def _en_date(match: re.Match[str], form: int) -> tuple[str, str]:
    name, day = (match.group(1), match.group(2)) if form == 1 else (match.group(2), match.group(1))
    return str(_MONTHS.index(name[:3]) + 1), day


def _number(match: re.Match[str]) -> Number | None:
    try:
        value = Decimal(match.group(1).replace(",", ""))
    except InvalidOperation:
        return None
    unit = match.group(2)
    if unit == "%":
        return Number(match.group(0), frozenset({value, value / 100}))
    if unit in _SCALE:
        return Number(match.group(0), frozenset({value * _SCALE[unit]}))
    return Number(match.group(0), frozenset({value}))


_RANGE_GAP = lazy_re(r"\s*(?:to|-|–|~|到|至)\s*")


def _approximated(text: str) -> tuple[Number, ...]:
    """The numbers of ``text``, each marked approximate as written; "about 0.80 to 0.91" is
    a range that is approximate at both ends."""
    out: list[Number] = []
    last: re.Match[str] | None = None
    for match in _NUMBER.finditer(text):
        if (number := _number(match)) is None:
            continue
        number = _about(number, text, match)
        ranged = last is not None and _RANGE_GAP.fullmatch(text, last.end(), match.start())
        if ranged and out and out[-1].margin and not number.margin:
            number = Number(number.text, number.values, _margin(match.group(1)))
        out.append(number)
        last = match
    return tuple(out)


def _about(number: Number, text: str, match: re.Match[str]) -> Number:
    before, after = text[max(0, match.start() - 16) : match.start()], text[match.end() :][:12]
    if _ABOUT_BEFORE.search(before) or _ABOUT_AFTER.match(after):
        return Number(number.text, number.values, _margin(match.group(1)))
    return number


@lru_cache(maxsize=8192)
def entities(text: str) -> Entities:
    """The entities of a canonical text (Chinese numerals read as numbers)."""
    text = arabic_numerals(text)
    titles = frozenset(a or b or c for a, b, c in _TITLE.findall(text))
    versions = {a or b for a, b in _VERSION.findall(text)} | {
        a or b for a, b in _EDITION.findall(text)
    }
    ids = frozenset(_THING_ID.findall(text))
    dates, rest = _dates(_THING_ID.sub(" ", _VERSION.sub(" ", text)))
    numbers = _approximated(rest)
    return Entities(numbers, dates, frozenset(versions), ids, titles)
