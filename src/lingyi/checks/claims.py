"""Claims with structure: what a text says, clause by clause, in a form two languages share.

A relay ("灵通说 v0.18 审计发现两个中危问题，没有高危") and the council message it reports are
both read into :class:`Statement`: clauses, and in each clause the concepts of council work
(from the bilingual glossary: 审计 = audit), the words the glossary does not know (literals),
what it says there is none of (没有高危 → no sev.high), what numbers count, the states of the
work (from the status lexicon: 暂缓 = on hold), and its entities (numbers, dates, times,
versions, ids, 《titles》). :func:`compare` then says whether a message supports a clause,
contradicts it, or neither.

Everything here works on canonical text (lingyi.text): lower case, simplified Chinese,
full-width punctuation as ASCII. The vocabularies are data (validators/lexicons).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, lru_cache

from lingyi._regex import lazy_re
from lingyi.council import index_terms
from lingyi.text import Entities, Hit, TermMatcher, arabic_numerals, canonical_text, entities
from lingyi.text._lang import EN_STOP, ZH_STOP_CHARS

# Cue groups of the status lexicon and the light group of the glossary (see their headers).
LIGHT, FIND = "light", "find"
NEGATOR, CEASE, ZERO, PERFECTIVE, PLAIN = "negator", "cease", "zero", "perfective", "plain"
DONE, UNDONE, OPEN = "progress.done", "progress.undone", "progress.undone.open"
FAILED = "outcome.failed"
_CUES = frozenset({NEGATOR, CEASE, ZERO, PERFECTIVE, PLAIN})
_NEGATING = (NEGATOR, CEASE, ZERO)
NOTHING = "c:*"  # "found nothing": none of anything


@dataclass(frozen=True)
class Clause:
    """One clause: what it asserts, denies, counts and says about the state of the work."""

    text: str
    units: frozenset[str]  # asserted concepts ("c:…"), members, literals ("w:…", "z:…")
    negated: frozenset[str]  # what it says there is none of, or did not happen
    counted: frozenset[str]  # units a positive number counts (两个中危问题: sev.medium, issue)
    states: frozenset[str]
    entities: Entities
    times: frozenset[str]  # "18:00" (hours of day, 12-hour folded)
    titles: frozenset[str]  # 《…》 only
    bindings: frozenset[tuple[str, Decimal]]  # a number and the value it is given for
    names: frozenset[str]  # literals written as proper names (Kumarajiva): never tolerated
    cjk: bool
    latin: bool

    @property
    def empty(self) -> bool:
        """Says nothing checkable (a greeting, a lone connective)."""
        return not (self.units or self.negated or self.states or self.entities or self.times)

    @cached_property
    def topic(self) -> frozenset[str]:
        """Everything it mentions, either polarity, each term of several groups as each."""
        return expanded(self.units | self.negated)

    @cached_property
    def size(self) -> int:
        """How much a record can share with it at most (see :func:`compare`)."""
        ents = self.entities
        return len(self.topic) + len(ents.versions) + len(ents.ids)

    @cached_property
    def plain_units(self) -> frozenset[str]:
        return expanded(self.units)

    @cached_property
    def families(self) -> dict[str, frozenset[str]]:
        """Its values by family: {"day": {"c:day.monday"}}."""
        return _by_family(self.units | self.negated)


@dataclass(frozen=True)
class Statement:
    """A text as clauses, with the union of what they say (for message-level support)."""

    clauses: tuple[Clause, ...]

    @cached_property
    def units(self) -> frozenset[str]:
        return frozenset(a for c in self.clauses for u in c.units for a in alternatives(u))

    @cached_property
    def negated(self) -> frozenset[str]:
        return frozenset(a for c in self.clauses for u in c.negated for a in alternatives(u))

    @cached_property
    def topic(self) -> frozenset[str]:
        return self.units | self.negated

    @cached_property
    def families(self) -> dict[str, frozenset[str]]:
        return _by_family(self.topic)

    @cached_property
    def counted(self) -> frozenset[str]:
        return frozenset(a for c in self.clauses for u in c.counted for a in alternatives(u))

    @cached_property
    def states(self) -> frozenset[str]:
        return frozenset(s for c in self.clauses for s in c.states)

    @cached_property
    def values(self) -> frozenset[Decimal]:
        found = {v for c in self.clauses for v in c.entities.values}
        return frozenset(found | ({Decimal(0)} if self.negated else set()))

    def _all(self, attr: str) -> frozenset[str]:
        return frozenset(x for c in self.clauses for x in getattr(c.entities, attr))

    @cached_property
    def versions(self) -> frozenset[str]:
        return self._all("versions")

    @cached_property
    def ids(self) -> frozenset[str]:
        return self._all("ids")

    @cached_property
    def dates(self) -> frozenset[str]:
        return self._all("dates")

    @cached_property
    def times(self) -> frozenset[str]:
        return frozenset(t for c in self.clauses for t in c.times)

    @cached_property
    def titles(self) -> frozenset[str]:
        return frozenset(t for c in self.clauses for t in c.titles)

    @cached_property
    def bindings(self) -> frozenset[tuple[str, Decimal]]:
        return frozenset(b for c in self.clauses for b in c.bindings)

    @cached_property
    def cjk(self) -> bool:
        return any(c.cjk for c in self.clauses)

    @cached_property
    def latin_words(self) -> int:
        return sum(len(_LATIN_WORD.findall(c.text)) for c in self.clauses)


# ---- reading a text -------------------------------------------------------------------

_CJK = "\u3400-\u9fff"
_CJK_RUN = lazy_re(f"[{_CJK}]+")
_HAS_CJK = lazy_re(f"[{_CJK}]")
_LATIN_WORD = lazy_re(r"[a-z][a-z0-9_\-']*[a-z0-9]|[a-z]")
_DIGIT_WORD = lazy_re(r"[a-z0-9][a-z0-9_\-.]*[a-z0-9]")
# Clause boundaries: Chinese and ASCII punctuation (not a comma or colon inside a number or a
# URL), and connectives that add a claim. 、 and 和 join a list, not clauses.
_BREAK = lazy_re(
    r"[，；;。！？!?\n]|,(?!\d{3})|(?<!\d):(?!\d|//)|(?<=\s)-(?=\s)|—|"
    r"而且|并且|此外|另外|但是|还说|同时还|"
    r"\s(?:and|but|while|whereas|plus)\s+(?=(?:that|also|then|it|they|he|she|we|i|there|no|"
    r"not|all|both|has|have|had|was|were|is|are|ci|the|been|got|found|will|would|can|may|"
    r"must|should|[a-z]+ed)\b)|"
    r"\s(?:but|whereas)\s"
)
_PATHLIKE = lazy_re(r"(?<![\w/])[a-z0-9][\w.\-]+/[\w./\-]+|https?://\S+")
_TITLE = lazy_re(r"《([^》]{1,40})》")
_TIME = lazy_re(
    r"(?P<h>\d{1,2}):(?P<m>\d{2})(?:\s*(?P<ap>am|pm))?|"
    r"(?P<zh>上午|早上|中午|下午|晚上|今晚|明晚|明早)?\s*(?P<zhh>\d{1,2})\s*点(?P<half>半)?|"
    r"\b(?P<eh>\d{1,2})\s*(?P<eap>am|pm)\b"
)
_NUMBER_AT = lazy_re(r"(?<![a-z0-9_.\-#])\d+(?:,\d{3})*(?:\.\d+)?%?")
# "until PR #482 is merged", "once it is tagged": a condition, not work done.
_CONDITION = lazy_re(
    r"\b(?:until|unless|once|pending|if|when|before|after)\b|等到|之后|以后|之前|为止|一旦|如果|除非"
)
_EN_PERFECT = lazy_re(
    r"\b(?:has|have|had)\s+(?:already\s+|just\s+|now\s+|also\s+)?(?:been\s+)?"
    r"[a-z]+(?:ed|en|wn|ut|lt|ng|de|ne|un|ft)\b|"
    r"\b(?:is|are|was|were|got)\s+(?:all\s+|now\s+|already\s+|just\s+)?[a-z]+(?:ed|en|wn|lt)\b"
)
_VERSION_AT = lazy_re(
    r"(?<![a-z0-9.])v(\d+(?:\.\d+){0,2})(?![\d.]*\d)|(?<![\d.])(\d+\.\d+\.\d+)(?![\d.])"
)
_DATE_AT = lazy_re(
    r"\d{1,2}\s*月\s*\d{1,2}\s*[日号]|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?\b|"
    r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
)
_LETTER = lazy_re(r"(?<![a-z0-9/'])[a-e](?![a-z0-9/'])")
_MAY = lazy_re(r"(?<=[\s,(])May\b(?!\s+(?:I|we|you|he|she|it|they|be|have|not)\b)")
_PROPER = lazy_re(r"(?<=[\s(\"'“‘])[A-Z][a-z]{2,}")
_ONES = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_TEENS = ("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen")
_TENS = ("eighteen", "nineteen", "twenty")
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(_ONES + _TEENS + _TENS, start=1)} | {
    w: str(n) for n, w in ((30, "thirty"), (40, "forty"), (50, "fifty"), (60, "sixty"))
}
_NUMBER_WORDS["dozen"] = "12"  # "a dozen or so terms": about 12
_NUMBER_WORD = lazy_re(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b")
# Chinese measure words and particles count or join but say nothing; English filler words
# are in the glossary's "light" group (data).
_ZH_STOP = ZH_STOP_CHARS | frozenset(
    "个条份件项次本位名种组场轮页首部期届只张台把些吧呢吗啊呀哦嘛啦着过给让被从向到为以及之其所而则月日号才再就要完"
)


@dataclass(frozen=True)
class _Hit:
    start: int
    end: int
    group: str


class Vocabulary:
    """The glossary, the status words and the member names, matched in one pass each."""

    def __init__(
        self,
        glossary: Mapping[str, Iterable[str]],
        status: Mapping[str, Iterable[str]],
        members: Mapping[str, Iterable[str]],
    ) -> None:
        self._glossary = _matcher(glossary)
        self._status = _matcher(status)
        self._members = _matcher({f"member.{m}": names for m, names in members.items()})
        self.forms = {g: tuple(_form(t) for t in terms) for g, terms in glossary.items()}
        self.analyse = lru_cache(maxsize=16384)(self._analyse)
        self._index_forms: dict[str, frozenset[str]] = {}

    def index_forms(self, group: str) -> frozenset[str]:
        """The index terms (lingyi.council) a record holding this concept is found by."""
        if group not in self._index_forms:
            firsts = (f.split()[0] for f in self.forms.get(group, ()) if f.split())
            self._index_forms[group] = frozenset(t for f in firsts for t in index_terms(f))
        return self._index_forms[group]

    def _analyse(self, text: str) -> Statement:
        """``text`` (canonical; case kept or folded) read into clauses."""
        names = frozenset(f"w:{w.casefold()}" for w in _PROPER.findall(f" {text}"))
        text = _MAY.sub("in may", text)  # "…by member, May": the month, written as a name
        prepared = _prepare(text.casefold())
        spans = _spans(prepared)
        clauses = (self._clause(prepared[a:b], names) for a, b in spans)
        return Statement(tuple(c for c in clauses if not c.empty))

    def _clause(self, text: str, names: frozenset[str]) -> Clause:
        times, rest = _times(text)
        paths = [m.group(0).rstrip(".,;:)") for m in _PATHLIKE.finditer(rest)]
        plain = _PATHLIKE.sub(lambda m: " " * len(m.group(0)), rest)
        status = _longest(self._status.find(plain), plain, False)
        glossary = _longest(self._glossary.find(plain) + self._members.find(plain), plain, True)
        glossary = [g for g in glossary if not _inside_status(g, status)]
        literals = _literals(plain, glossary + status, paths)
        units = _concepts(glossary) + literals
        units.sort()
        negated, denied = _negations(plain, status, glossary, units)
        found = frozenset(u for _, u in units)
        return Clause(
            text=text,
            units=found - negated - denied,
            negated=negated,
            counted=_counted(plain, units),
            states=_states(
                status, [h for h in glossary if h.group.startswith("act.")], plain, bool(denied)
            ),
            entities=entities(rest),
            times=times,
            titles=frozenset(t.strip() for t in _TITLE.findall(rest)),
            bindings=_bindings(rest, units),
            names=found & names,
            cjk=bool(_HAS_CJK.search(text)),
            latin=bool(_LATIN_WORD.search(plain)),
        )


def _concepts(hits: list[_Hit]) -> list[tuple[int, str]]:
    """One unit per term: a term of several groups (推到: deploy or push) is satisfied by any."""
    by_span: dict[tuple[int, int], list[str]] = {}
    for hit in hits:
        if hit.group not in (LIGHT, FIND):
            by_span.setdefault((hit.start, hit.end), []).append(f"c:{hit.group}")
    return [(span[0], "|".join(sorted(groups))) for span, groups in by_span.items()]


def alternatives(unit: str) -> list[str]:
    return unit.split("|")


def expanded(units: Iterable[str]) -> frozenset[str]:
    """Units with each term of several groups counted as each of them."""
    return frozenset(a for u in units for a in alternatives(u))


def _form(term: str) -> str:
    return arabic_numerals(canonical_text(term.strip().rstrip("*"))).strip()


def _matcher(groups: Mapping[str, Iterable[str]]) -> TermMatcher:
    """Terms in the form texts are read in (canonical, Chinese numerals as digits)."""
    return TermMatcher(
        {
            g: [arabic_numerals(canonical_text(t)) + ("*" if t.endswith("*") else "") for t in ts]
            for g, ts in groups.items()
        }
    )


_MERIDIEM = lazy_re(r"(?<=\d)\s*([ap])\.m\.?")
_CLEAN = lazy_re(r"\b(?:came|comes|come|is|was|were|are)\s+(?:back\s+)?clean\b")
_PHRASAL = lazy_re(r"\b([a-z]+) (it|them|this|that|everything) (back|up|down|out|off|over)\b")


def _prepare(text: str) -> str:
    """Curly apostrophes, "rolled it back" as "rolled back it", number words as digits."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    text = _PHRASAL.sub(r"\1 \3 \2", text)
    text = _CLEAN.sub("found nothing", text)  # an audit that came back clean found nothing
    text = _MERIDIEM.sub(r"\1m", text)  # 10 a.m. is 10am
    text = _NUMERAL_AFTER_NAME.sub(" ", text)  # v3一万二千四百: v3 and 12400, not v312400
    text = _WEEKDAY.sub(r"\1 ", text)  # 周一分享会: Monday's talk, not 周 + 1分
    text = _NONE_LISTED.sub(_none_first, text)  # 阻塞：无 is 无阻塞, "blockers: none" no blockers
    text = _AUXILIARY.sub(" ", text)  # 不会在周四发布: won't ship Thursday, no meeting
    text = _NOT_ONE.sub(r"没有\2", text)  # 一条新记录都没有: none, not one
    text = _SCALED.sub(lambda m: _scaled(m.group(1), m.group(2)), text)  # 9.8 万 = 98000
    text = arabic_numerals(_NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group(1)], text))
    return _TENTHS.sub(lambda m: f"{_TENTH_DIGITS.get(m.group(1), m.group(1))}0%", text)


# A label whose value is none: "阻塞：无", "Blockers: none" say there is none of it.
_NONE_LISTED = lazy_re(
    r"(?<![\w])([\u4e00-\u9fff]{1,6}|[a-z][a-z\- ]{1,24}?)\s*:\s*(无|没有|none|nil|n/a)"
    r"(?=\s*(?:[,.;!?。，；]|$))"
)


def _none_first(match: re.Match[str]) -> str:
    label, none = match.group(1), match.group(2)
    return f"无{label}" if none in ("无", "没有") else f"no {label}"


# 会 after 不, 将, 就…: the auxiliary (will), not a meeting (会议, 会上, 开会 are meetings).
_AUXILIARY = lazy_re(r"(?<=[不将就才也还都])会(?![议上后前场期谈签面话员])")
# 周一分享会 is Monday's talk; 这周一条 is one item this week (a measure word follows).
_WEEKDAY = lazy_re(r"((?:周|星期|礼拜)[一二三四五六日天])(?![条个篇次份项件位名批张])")
_NOT_ONE = lazy_re(r"一([条个篇次份项件位])([^,.;:!?，。；：！？]{0,8}?)(?:都|也)(?:没有|没)")
_SCALED = lazy_re(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(万|千|亿)")
_SCALE = {"千": Decimal(1000), "万": Decimal(10000), "亿": Decimal(100_000_000)}


def _scaled(number: str, unit: str) -> str:
    return format((Decimal(number) * _SCALE[unit]).normalize(), "f")


# 两成流量 is 20% of the traffic, 三成 30%: tenths written as 成.
_TENTHS = lazy_re(r"(?<![\d.])([1-9]|[一二两三四五六七八九])\s*成(?=[^功为立员本果绩交就熟]|$)")
_TENTH_DIGITS = dict(zip("一二两三四五六七八九", "1223456789", strict=True))


_NUMERAL_AFTER_NAME = lazy_re(
    r"(?<=[a-z0-9])(?=[零〇一二两三四五六七八九十百千万亿]+[个条份人名位天周月日号年次篇本项版倍岁元块种组场轮页章节首部期届点%])"
)


def _spans(text: str) -> list[tuple[int, int]]:
    """Clause spans. An English appositive between commas ("PR #482, the power fix, is
    merged") stays with the noun it describes."""
    spans, start = [], 0
    for match in _BREAK.finditer(text):
        spans.append((start, match.start(), match.group()))
        start = match.end()
    spans.append((start, len(text), ""))
    merged: list[tuple[int, int]] = []
    appositive = False
    for i, (a, b, brk) in enumerate(spans):
        after_comma = i > 0 and spans[i - 1][2] == ","
        if merged and after_comma and brk == "," and _APPOSITIVE.match(text, a):
            merged[-1], appositive = (merged[-1][0], b), True
        elif merged and appositive and _PREDICATE.match(text, a):
            merged[-1], appositive = (merged[-1][0], b), False  # "…, the power fix, is merged"
        elif merged and _ONLY_NUMBERS.match(text[a:b]):
            merged[-1] = (merged[-1][0], b)  # "C is ahead, 0.91 vs 0.88": the numbers of it
        else:
            merged.append((a, b))
            appositive = False
    return [s for s in merged if text[s[0] : s[1]].strip()]


_ONLY_NUMBERS = lazy_re(r"^[\s\d.,%]*\d[\s\d.,%]*(?:(?:vs\.?|versus|to|比|对)[\s\d.,%]+)*$")
_PREDICATE = lazy_re(r"\s*(?:is|are|was|were|has|have|had|will|got)\b")
_APPOSITIVE = lazy_re(r"\s*(?:the|a|an)\s+[a-z0-9\- ]{1,40}$|\s*(?:the|a|an)\s")


def _times(text: str) -> tuple[frozenset[str], str]:
    """Times of day folded to 12 hours (18:00 = 晚上六点) and months (五月 = May), and the
    text without them: their digits are no counts."""
    found = set()
    for m in _TIME.finditer(text):
        hour = int(m.group("h") or m.group("zhh") or m.group("eh"))
        minute = m.group("m") or ("30" if m.group("half") else "00")
        found.add(f"{hour % 12:02d}:{minute}")
    text = _TIME.sub(" ", text)
    dates = [m.span() for m in _DATE_AT.finditer(text)]
    months = [m for m in _EN_MONTH.finditer(text) if not any(a <= m.start() < b for a, b in dates)]
    found |= {f"month-{int(m.group(1))}" for m in _ZH_MONTH.finditer(text)}
    found |= {f"month-{_MONTHS.index(m.group(1)[:3]) + 1}" for m in months}
    for m in reversed(months):
        text = text[: m.start()] + " " * (m.end() - m.start()) + text[m.end() :]
    return frozenset(found), _ZH_MONTH.sub(" ", text)


_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_ZH_MONTH = lazy_re(r"(?<![\d.])(1[0-2]|0?[1-9])\s*月(?!\s*\d{1,2}\s*[日号])(?!份?\s*\d)")
# A month named without a day (a date with its day is read by lingyi.text.entities). "May"
# is a month only after a word that takes one: "in May", not "it may".
_EN_MONTH = lazy_re(
    r"\b(january|february|march|april|june|july|august|september|october|november|december|"
    r"(?:(?<=in )|(?<=of )|(?<=by )|(?<=for )|(?<=since )|(?<=until )|(?<=last )|(?<=next )|"
    r"(?<=this )|(?<=early )|(?<=late )|(?<=mid-))may)\b(?!\s*\d)"
)


def _longest(hits: list[Hit], text: str, words: bool) -> list[_Hit]:
    """Hits not inside a longer one; with ``words``, a lone Chinese character only when it
    stands alone (气 domain), not inside a word (空气). Cues (已, 不) count anywhere."""
    out: list[_Hit] = []
    for hit in sorted(hits, key=lambda h: (h.start, -(h.end - h.start))):
        inside = [k for k in out[-3:] if k.start <= hit.start and hit.end <= k.end]
        if inside and not _two_values(hit, inside):
            continue  # inside a longer term (完成 in 已经完成); partial overlaps stay (本周|周五)
        if words and len(hit.term) == 1 and _HAS_CJK.match(hit.term) and _inside_word(text, hit):
            continue
        out += [_Hit(hit.start, hit.end, g) for g in sorted(hit.groups)]
    return out


def _two_values(hit: Hit, around: list[_Hit]) -> bool:
    """ "next monday" is a week and a day: a value of one family inside a value of another."""
    mine = {g.split(".")[0] for g in hit.groups if "." in g and not g.startswith("act.")}
    theirs = {
        k.group.split(".")[0] for k in around if "." in k.group and not k.group.startswith("act.")
    }
    return bool(mine and theirs and not mine & theirs)


def _inside_status(hit: _Hit, status: list[_Hit]) -> bool:
    """A lone character inside a status word (办 in 不办了) is that word's, not a concept."""
    return hit.end - hit.start == 1 and any(
        s.start <= hit.start and hit.end <= s.end and s.group not in _CUES for s in status
    )


def _inside_word(text: str, hit: Hit) -> bool:
    """Inside a Chinese word, unless a negation or an aspect marks it a verb (没修, 拍了)."""
    before = text[hit.start - 1] if hit.start else " "
    after = text[hit.end] if hit.end < len(text) else " "
    if before in "没不未别已" or after in "了完好过掉":
        return False
    return bool(_HAS_CJK.match(before) or _HAS_CJK.match(after))


# "约 230ms", "about 0.8", "7% 左右": the number says it is approximate (its value compares
# within its rounding, lingyi.text.Number.agrees); the word is no claim of its own.
_APPROXIMATE = lazy_re(
    r"(?:大约|大概|大致|将近|接近|差不多|约)(?=\s*(?:为|是|在|有|到|占)?\s*\d)"
    r"|(?<=[\d%a-z])\s*(?:左右|上下)"
    r"|\b(?:about|around|roughly|approximately|nearly|almost)(?=\s+\d)"
)


def _literals(text: str, hits: list[_Hit], paths: list[str]) -> list[tuple[int, str]]:
    """Words no vocabulary knows: Latin words, ids with digits, Chinese bigrams, paths."""
    chars = list(text)
    for hit in hits:
        chars[hit.start : hit.end] = " " * (hit.end - hit.start)
    rest = _APPROXIMATE.sub(lambda m: " " * len(m.group(0)), "".join(chars))
    found = [(m.start(), f"w:{w}") for m in _LATIN_WORD.finditer(rest) if _keep(w := m.group())]
    found += [
        (m.start(), f"w:{part}")
        for m in _DIGIT_WORD.finditer(rest)
        for part in _name_parts(m.group())
    ]
    found += [(0, f"w:{p}") for p in paths]
    for run in _CJK_RUN.finditer(rest):
        found += [(run.start() + i, f"z:{g}") for i, g in _grams(run.group())]
    return found


def _keep(word: str) -> bool:
    return len(word) > 2 and word not in EN_STOP and not word.isdigit()


def _name_parts(word: str) -> list[str]:
    """The word, or the parts of it that are no version or id (v0.18-rc1 → rc1)."""
    if _is_name(word):
        return [word]
    return [p for p in word.split("-")[1:] if _is_name(p)] if "-" in word else []


_MEASURE = lazy_re(r"\d+(?:\.\d+)?(?:ms|s|sec|min|h|hr|kb|mb|gb|tb|k|x|rpm|qps)")


def _is_name(word: str) -> bool:
    """A name with digits (dataset_v3_labels, b7, rev-c2), not a version or an id (entities)."""
    if not (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
        return False
    if _MEASURE.fullmatch(word):
        return False  # 231ms, 2.3s: a quantity (its number compares), not a name
    found = entities(word)
    return not (found.versions or found.ids or found.dates)


def _grams(run: str) -> list[tuple[int, str]]:
    chars = [(i, c) for i, c in enumerate(run)]
    kept = [(i, c) for i, c in chars if c not in _ZH_STOP]
    if len(kept) <= 1:
        return [(i, c) for i, c in kept]
    return [(kept[j][0], kept[j][1] + kept[j + 1][1]) for j in range(len(kept) - 1)]


def _zeros(text: str) -> list[_Hit]:
    """ "0 blocking issues" says there are none, like "no blocking issues"."""
    return [
        _Hit(m.start(), m.end(), ZERO)
        for m in _NUMBER_AT.finditer(text)
        if m.group() in ("0", "0%") and text[m.end() : m.end() + 1] not in ".:"
    ]


def _negations(
    text: str, status: list[_Hit], glossary: list[_Hit], units: list[tuple[int, str]]
) -> tuple[frozenset[str], frozenset[str]]:
    """The units a negator or a zero word points at, and the actions it denies.

    A negator inside a longer word (无崩溃 as a glossary term) negates nothing. "Found nothing"
    with nothing after it denies everything it could have found (:data:`NOTHING`).
    """
    negated: set[str] = set()
    denied: set[str] = set()
    cues = [h for h in status if h.group in _NEGATING] + _zeros(text)
    for cue in cues:
        if any(
            g.start <= cue.start < cue.end <= g.end and g.end - g.start > cue.end - cue.start
            for g in glossary
        ):
            continue
        start = cue.end
        found = next(
            (g for g in glossary if g.group == FIND and start <= g.start <= start + 3), None
        )
        if found is not None:  # 没有发现高危问题, could not find…: nothing (of it) was found
            negated.add(NOTHING)
            start = found.end
        target = next((u for pos, u in units if start <= pos <= start + 12), None)
        trailing = cue.group == NEGATOR and (target is None or _participle(target))
        if trailing and _negated_before(cue, status, units):
            denied.add(_UNDONE_BEFORE)  # the work is not done; what it is stays the topic
            continue
        if target is None:
            if cue.group == ZERO:
                negated.add(NOTHING)
        elif target.startswith("c:act.") and cue.group == NEGATOR:
            denied.add(target)  # 没有修, not pushed: the work is not done (a state, not a unit)
        else:
            negated.add(target)
    return frozenset(negated), frozenset(denied)


_UNDONE_BEFORE = "s:undone"  # no unit: a denial of the work named before the negator


def _participle(unit: str) -> bool:
    """A word no vocabulary knows that ends like a participle: "not created", "not done"."""
    return unit.startswith("w:") and unit.endswith(("ed", "done", "made", "built", "set"))


def _negated_before(cue: _Hit, status: list[_Hit], units: list[tuple[int, str]]) -> bool:
    """A negator that ends its clause, or only a participle after it, negates what stands
    just before it: "tag v0.17 not created yet" says the tag is not done. Not when a state follows it
    ("the build did not fail")."""
    if any(h.start >= cue.end and h.group not in _CUES for h in status):
        return False
    return any(cue.start - 12 <= pos < cue.start for pos, _ in units)


def _counted(text: str, units: list[tuple[int, str]]) -> frozenset[str]:
    """Units that a positive number right before them counts (两个中危问题, 2 medium findings)."""
    counted: set[str] = set()
    for number in _NUMBER_AT.finditer(text):
        if Decimal(number.group().rstrip("%").replace(",", "")) == 0:
            continue
        after = [u for pos, u in units if number.end() <= pos <= number.end() + 14]
        counted.update(after[:2])
    return frozenset(counted)


def _bindings(text: str, units: list[tuple[int, str]]) -> frozenset[tuple[str, Decimal]]:
    """Each number with the values named just before it: 气 domain 48 篇 → (domain.qi, 48);
    B 方案准确率 0.874 → (variant b, 0.874). Swapped numbers then disagree."""
    found: set[tuple[str, Decimal]] = set()
    start = 0
    skip = [m.span() for m in _VERSION_AT.finditer(text)] + [
        m.span() for m in _DATE_AT.finditer(text)
    ]
    for number in _NUMBER_AT.finditer(text):
        if any(a <= number.start() < b for a, b in skip):
            continue
        value = Decimal(number.group().rstrip("%").replace(",", ""))
        before = text[start : number.start()]
        named = [u for pos, u in units if start <= pos < number.start() and _labels(u)]
        named += [f"label:{m.group()}" for m in _LETTER.finditer(before)]
        named += [f"version:{a or b}" for a, b in _VERSION_AT.findall(before)]
        found.update((u, value) for u in named)
        start = number.end()
    return frozenset(found)


# What a negated state says: not done is undone; not delayed, not paused or not yet to start
# is going ahead; not running is held; not cancelled is still open; not failed is passed.
_NEGATED_STATE = {
    DONE: UNDONE,
    OPEN: f"{OPEN}.running",
    f"{OPEN}.held": f"{OPEN}.running",
    f"{OPEN}.not_started": f"{OPEN}.running",
    f"{OPEN}.running": f"{OPEN}.held",
    "progress.undone.cancelled": OPEN,
    "outcome.failed": "outcome.passed",
    "outcome.passed": "outcome.failed",
}


def _labels(unit: str) -> bool:
    """A value a number may be given for (a domain, a variant), not a direction (dropped from)."""
    fam = family(unit)
    return fam is not None and fam != "trend"


_POSTPOSED = ("之后", "以后", "之前", "为止")
# A clause that opens by waiting ("等安全评审完成") states what it waits for, not that it is done.
_WAITING = lazy_re(r"^\W*(?:等到|等待|等)(?!等)")
# Only words that make what follows a condition; "after"/"before"/"when" also narrate what
# happened ("after the review it was cancelled" claims the cancellation).
_PREPOSED = frozenset({"until", "unless", "once", "pending", "if", "等到", "一旦", "如果", "除非"})


def _conditions(text: str, said: list[_Hit]) -> bool:
    """Does the clause hold a condition ("ships once it is tagged", 等到…之后)? A preposed one
    only after something the main clause says (``said``: its states and actions): "if you
    ask me, it is released" claims the release."""
    for found in _CONDITION.finditer(text):
        if found.group() in _POSTPOSED:
            return True
        if found.group() in _PREPOSED and any(h.end <= found.start() for h in said):
            return True
    return False


def _conditional(text: str, hit: _Hit, status: list[_Hit]) -> bool:
    """A state inside a condition is not asserted: "on hold until the review is done",
    "安全评审完成之后再发" (the release is held; the review's state is not claimed). A condition
    word counts only after the main clause's own state: in "if you ask me, it is released"
    the condition comes first and the release is claimed."""
    if _WAITING.match(text) and hit is max(status, key=lambda h: h.end):
        return True
    for found in _CONDITION.finditer(text):
        if found.group() in _POSTPOSED:
            if hit.end <= found.start() <= hit.end + 2:
                return True
        elif (
            found.group() in _PREPOSED
            and found.end() <= hit.start
            and any(h.end <= found.start() and h.group not in _CUES for h in status)
        ):
            return True
    return False


def _states(status: list[_Hit], actions: list[_Hit], text: str, denied_act: bool) -> frozenset[str]:
    """States the clause asserts. A negated done is not done; a perfective with no other
    progress state is done; a negated action is work not done."""
    states: set[str] = set()
    negators = [h for h in status if h.group in _NEGATING]
    for hit in status:
        if hit.group in _CUES or _conditional(text, hit, status):
            continue
        negated = any(n.end <= hit.start <= n.end + 5 for n in negators)
        states.add(_NEGATED_STATE.get(hit.group, "") if negated else hit.group)
    states.discard("")
    progress = any(s.startswith("progress.") for s in states)
    if denied_act and not progress:
        states.add(UNDONE)
        progress = True
    marked = any(h.group == PERFECTIVE for h in status) or bool(_EN_PERFECT.search(text))
    after_action = any(text[h.end : h.end + 3].lstrip().startswith("了") for h in actions)
    said = [h for h in (*status, *actions) if h.group not in _CUES]
    perfective = (marked and not _conditions(text, said)) or after_action
    if perfective and not progress and not negators:
        states.add(DONE)
    return frozenset(states)


# ---- comparing ------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What one record says about one clause; ``why`` names a catalog message."""

    # "supports", "contradicts", "gap" (all of it but one detail the record has no counterpart
    # for: not settled), "partial" (some of it: the rest is on no record), "unrelated"
    kind: str
    why: str
    values: dict[str, str] = field(default_factory=dict)
    shared: int = 0  # how much the two have in common: the closest record is the one to show

    @property
    def supports(self) -> bool:
        return self.kind == "supports"


def conflicting(a: str, b: str) -> bool:
    """Two states contradict when they are in one tree and neither is the other's ancestor."""
    if a.split(".")[0] != b.split(".")[0]:
        return False
    return not (a == b or a.startswith(b + ".") or b.startswith(a + "."))


def _by_family(units: Iterable[str]) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for unit in units:
        if (fam := family(unit)) is not None:
            found.setdefault(fam, set()).add(unit)
    return {fam: frozenset(values) for fam, values in found.items()}


def family(unit: str) -> str | None:
    """The family of a value unit ("c:day.monday" → "day"); actions are no family."""
    if not unit.startswith("c:") or "." not in unit or unit.startswith("c:act.") or "|" in unit:
        return None
    return unit[2:].split(".")[0]


def compare(claim: Clause, record: Statement) -> Verdict:
    """Does ``record`` (one message, or one piece of recorded work) support ``claim``?"""
    aligned = _aligned(claim, record)
    shared = _shared(claim, record)
    for test in (
        _entities_agree,
        _states_agree,
        _families_agree,
        _polarity_agrees,
        _bindings_agree,
    ):
        if (found := test(claim, record, aligned)) is not None:
            kind = "contradicts" if shared else "unrelated"
            return Verdict(kind, found[0], found[1], shared)
    return _coverage(claim, record, shared)


def _aligned(claim: Clause, record: Statement) -> Clause | None:
    """The record clause that says most of what ``claim`` is about."""

    mine, versions, ids = claim.topic, claim.entities.versions, claim.entities.ids

    def score(c: Clause) -> tuple[int, int]:
        shared = 2 * len(mine & c.topic) + len(versions & c.entities.versions)
        return (shared + len(ids & c.entities.ids), -abs(len(c.text) - len(claim.text)))

    best = max(record.clauses, key=score, default=None)
    return best if best is not None and score(best)[0] > 0 else None


def _shared(claim: Clause, record: Statement) -> int:
    topic = claim.topic & record.topic
    ents = (claim.entities.versions & record.versions) | (claim.entities.ids & record.ids)
    return len(topic) + len(ents)


Found = tuple[str, dict[str, str]] | None


def _entities_agree(claim: Clause, record: Statement, aligned: Clause | None) -> Found:
    """Versions, ids, dates, times, titles and numbers of the claim must all be the record's."""
    ents = claim.entities
    if missing := ents.versions - record.versions:
        why = "version_differs" if record.versions else "version_absent"
        return why, {"claim": _list(missing), "record": _list(record.versions)}
    if missing := ents.ids - record.ids:
        return "id_differs", {"claim": _list(missing), "record": _list(record.ids)}
    if missing := (ents.dates - record.dates) | (claim.times - record.times):
        return "date_differs", {
            "claim": _list(missing),
            "record": _list(record.dates | record.times),
        }
    titles = claim.titles if record.cjk else frozenset()  # across scripts its words compare
    if unknown := {t for t in titles if not _title_known(t, record)}:
        return "title_differs", {"claim": _list(unknown), "record": _list(record.titles)}
    numbers = [n for n in ents.numbers if not n.agrees(record.values)]
    if numbers:
        return "numbers_differ", {"numbers": ", ".join(n.text for n in numbers)}
    return None


def _title_known(title: str, record: Statement) -> bool:
    return any(title in t or t in title for t in record.titles)


def _states_agree(claim: Clause, record: Statement, aligned: Clause | None) -> Found:
    """Each state the claim asserts must not contradict what the record says of that work:
    what the record's clauses that share something with the claim say; the whole record
    only when no clause shares anything (挪到下周一 is about the clause that moves the
    meeting, not the one that cancels Friday's); a clause that shares only a version with it
    when another shares what it is about ("pushed v0.23; tag v0.23 not created yet")."""
    related = [c for c in record.clauses if claim.topic & c.topic]
    related = related or [c for c in record.clauses if _related(claim, c)]  # a version only
    pool = [s for c in related for s in c.states] if related else list(record.states)
    for state in sorted(claim.states):
        tree = state.split(".")[0]
        said = {s for s in pool if s.split(".")[0] == tree}
        if said and all(conflicting(state, s) for s in said):
            shown = max(sorted(said), key=len)  # the most specific state the record gives
            return "status_differs", {"claim": _state_name(state), "record": _state_name(shown)}
    failed_only = FAILED in pool and DONE not in pool
    if DONE in claim.states and FAILED not in claim.states and failed_only:
        return "status_differs", {"claim": "done", "record": "failed"}  # "done" is no failure
    return None


def _related(claim: Clause, clause: Clause) -> bool:
    ents, theirs = claim.entities, clause.entities
    return bool(
        claim.topic & clause.topic or ents.versions & theirs.versions or ents.ids & theirs.ids
    )


def _state_name(state: str) -> str:
    """The catalog name of a state: progress.undone.open.held → held, progress.undone → undone."""
    return state.rsplit(".", 1)[-1]


def _families_agree(claim: Clause, record: Statement, aligned: Clause | None) -> Found:
    """A day, an environment, a severity, a domain: the claim's value must be the record's.

    Against the whole record, a value it never gives while it gives another contradicts.
    Against the clause the claim is about, so does a single value in the wrong slot (周四
    代码冻结 when the record freezes code on 周二 and finalises notes on 周四).
    """
    for fam, mine in sorted(claim.families.items()):
        said = record.families.get(fam, frozenset())
        near = aligned.families.get(fam, frozenset()) if aligned else frozenset()
        for unit in sorted(mine):
            if (said and unit not in said) or (len(mine) == 1 and near and unit not in near):
                return "value_differs", {
                    "claim": _name(unit),
                    "record": _list(map(_name, near or said)),
                }
    return None


def _polarity_agrees(claim: Clause, record: Statement, aligned: Clause | None) -> Found:
    """ "No issues" against two findings, "one high-severity issue" against none.

    A count in the record contradicts a claimed none anywhere in it; the clause the claim is
    about contradicts it when it says the thing plainly, without any negation of its own
    (尚未得出结论 and 目前没有结论 are both negative about the conclusion).
    """
    near = aligned.plain_units if aligned is not None else frozenset()
    plain = aligned is not None and not aligned.negated
    for unit in sorted(claim.negated):
        options = alternatives(unit)
        if unit == NOTHING:
            if record.counted:
                return "negation_differs", {
                    "claim": "none",
                    "record": _list(map(_name, record.counted)),
                }
            continue
        if any(a in record.negated for a in options):
            continue
        if any(a in record.counted for a in options) or (plain and any(a in near for a in options)):
            return "negation_differs", {"claim": f"no {_name(unit)}", "record": _name(unit)}
    for unit in sorted(claim.units if NOTHING not in claim.negated else ()):
        options = alternatives(unit)
        if any(a in record.negated for a in options) and not any(
            a in record.units for a in options
        ):
            return "negation_differs", {"claim": _name(unit), "record": f"no {_name(unit)}"}
    return None


def _bindings_agree(claim: Clause, record: Statement, aligned: Clause | None) -> Found:
    """Variant B at 0.874 is not variant A at 0.874; 气 48 篇 is not 气 35 篇."""
    said: dict[str, set[Decimal]] = {}
    for name, value in record.bindings:
        said.setdefault(name, set()).add(value)
    approximate = [n for n in claim.entities.numbers if n.margin]
    for name, value in sorted(claim.bindings):
        if name in said and value not in said[name]:
            if any(value in n.values and n.agrees(said[name]) for n in approximate):
                continue  # "about 0.8" for a recorded 0.82
            values = ", ".join(str(v) for v in sorted(said[name]))
            return "label_differs", {
                "claim": f"{_name(name)} {value}",
                "record": f"{_name(name)} {values}",
            }
    return None


_COMPARATIVE = frozenset({"c:trend.up", "c:trend.down", "c:winner"})


# States a record must give for a relay to claim them: an outcome (passed or failed) or a turn
# of the work that the record does not mention is invented. Done and not-done are the default reading of
# most texts and only have to not contradict.
_REQUIRED_STATES = (
    "outcome.failed",
    "outcome.passed",
    "progress.undone.cancelled",
    "progress.undone.open.not_started",
    "progress.undone.open.running",
    "progress.undone.open.held",
)


def _coverage(claim: Clause, record: Statement, shared: int) -> Verdict:
    """Everything the claim asserts must be in the record. A word in the other language's
    script cannot be looked up in it, and a paraphrase swaps a word or two: a few such words
    are tolerated next to firm matches, never a concept, a state or a proper name."""
    wanted = (claim.units | claim.negated) - _implied_by_numbers(claim, record)
    have = record.units | record.negated | ({NOTHING} if record.negated else set())
    missing = {u for u in wanted if not any(a in have for a in alternatives(u))}
    states = frozenset(_REQUIRED_STATES)
    missing |= {f"s:{s}" for s in claim.states & states if not _said(s, record.states)}
    firm = len(wanted) - len(missing & wanted) + len(claim.entities.numbers)
    firm += len(claim.entities.versions) + len(claim.entities.ids)
    firm += sum(1 for s in claim.states if _said(s, record.states))
    counted = claim.counted & missing if claim.entities.numbers else frozenset()
    counted = frozenset(u for u in counted if family(u) is None)  # never a value (develop)
    hard = {u for u in missing - counted if u[:2] in ("c:", "s:")}
    named = {u for u in missing if u in claim.names or any(c.isdigit() for c in u)}
    hard |= {u for u in named if _comparable(u, record)}  # Kumarajiva, rc2: names, not words
    words = {u for u in missing - hard - counted if _comparable(u, record)}
    foreign = missing - hard - words
    loose = {u for u in hard if _plain(u)} if firm >= 5 and len(hard) == 1 else set()
    if not hard - loose and len(words) <= firm // 3 and len(foreign) <= max(1, firm):
        return Verdict("supports", "same_claim", {}, shared)
    if not shared and not firm:
        return Verdict("unrelated", "nothing_shared", {}, 0)
    if hard or words:
        absent = _list(map(_name, hard | words))
        kind = "gap" if _one_detail(hard - loose, words, firm) else "partial"
        return Verdict(
            kind, "clause_missing", {"clause": claim.text.strip(), "words": absent}, shared
        )
    return Verdict("partial", "words_unknown", {"words": _list(map(_name, foreign))}, shared)


def _one_detail(hard: set[str], words: set[str], firm: int) -> bool:
    """Is what the record lacks one detail next to firm agreement ("先做描述统计" against
    "跑描述统计")? Then the record neither backs nor contradicts the clause: not settled.
    A state, an outcome, an action (deleted, pushed), a value of a family (a day, a domain)
    or a second missing concept is a claim of its own that the record does not make."""
    if firm < 2 or len(hard) > 1 or len(hard) + len(words) > max(1, firm // 2):
        return False
    return all(_plain(u) and not u.startswith("c:act.") for u in hard)


def _plain(unit: str) -> bool:
    """A concept (a fix, a page) that one paraphrase may render with another word in a long
    clause; never a value of a family (a day, a name), a comparison, a state or a literal."""
    return unit.startswith("c:") and family(unit) is None and unit not in _COMPARATIVE


def _said(state: str, said: frozenset[str]) -> bool:
    """The record gives this state, or one it refines or that refines it."""
    return any(r.split(".")[0] == state.split(".")[0] and not conflicting(state, r) for r in said)


def _implied_by_numbers(claim: Clause, record: Statement) -> frozenset[str]:
    """ "B ahead at 0.874 vs 0.851": a comparison that the record's own numbers show."""
    values = record.values
    agree = [n for n in claim.entities.numbers if n.agrees(values)]
    return (
        _COMPARATIVE
        if len(agree) >= 2 and len(agree) == len(claim.entities.numbers)
        else frozenset()
    )


def _comparable(unit: str, record: Statement) -> bool:
    """Concepts and members are language-neutral; a literal only in its own script."""
    if unit.startswith("c:"):
        return True
    if unit.startswith("z:"):
        return record.cjk and len(unit) > 3  # a lone character says too little
    return record.latin_words >= 3


def _name(unit: str) -> str:
    return unit.split(":", 1)[1] if ":" in unit else unit


def _list(items: Iterable[str]) -> str:
    return ", ".join(sorted(set(items))) or "-"
