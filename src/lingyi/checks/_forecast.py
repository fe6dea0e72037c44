"""Reading a canonical text for forecasts: the machinery behind inference.labelled.

One pass of the inference lexicon finds every term; context settles what each one is (会 in
会议 is no modal, "May" after "in" is the month, 没有可能 is certainty); the text is cut into
sentences and clauses; labels are found where they stand; the rules decide per clause. Every
step looks only at a hit's neighbours through position indexes, so the cost grows with the
text, never with its square: an adversary may send the longest text the policy allows.

Texts are canonical (lingyi.text): case-folded, simplified, NFKC (，：；（）！？ are ASCII,
。【】“” stay as they are).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import pairwise
from operator import attrgetter

from lingyi._regex import lazy_re
from lingyi.policy import Lexicon
from lingyi.text import Hit, TermMatcher, canonical_text

_SENTENCE_END = lazy_re(r"[。!?\n]|\.(?=\s|$)")
_CLAUSE_BREAK = lazy_re(r"(?<!\d)[,:]|[,:](?!\d)|[;()\[\]【】〔〕—]")  # not 3,000 or 9:30
_QUOTED = lazy_re(r"“[^”]*”|\"[^\"]*\"|「[^」]*」|『[^』]*』|‘[^’]*’")
_SPACES = lazy_re(r"[^\S\n]+")
_NUMBER_AFTER = lazy_re(r"\s*[$¥€]?\s*[\d零一二两三四五六七八九十百千万]")
_DIGITS_BEFORE = lazy_re(r"\d+\s*$")
_DIGIT_AFTER = lazy_re(r"\s*\d")
_MARKUP = " *#>-_~•·\t"
_BRACKETS = {"【": "】", "[": "]", "(": ")", "〔": "〕"}
_QUOTE_MARKS = "“”\"「」『』‘’'"
_GAP = 24  # the farthest a neighbouring word is looked for, in characters
_REACH = 8  # between a negation and the label it denies (不用加【推演】)
# Every rule needs one of these; a text without them is no forecast, whatever else it holds.
_CORES = frozenset(
    {
        "strong",
        "certainty",
        "modal",
        "basis",
        "basis_lead",
        "assurance",
        "prediction",
        "expectation",
        "own_modal",
    }
)
_OWN_REACH = 3  # words (明天, then) between the speaker and the modal: 我明天会, "I'll then"


def tidy(text: str) -> str:
    """Runs of spaces as one, so that "based  on  the  trend" meets its lexicon term."""
    return _SPACES.sub(" ", text)


def groups_of(hits: Iterable[Hit]) -> set[str]:
    return {g for h in hits for g in h.groups}


# ---------------------------------------------------------------- hits and their neighbours


class _Near:
    """Hits sorted by where they start and end: a neighbour is found by bisection, never by a
    scan of the text."""

    def __init__(self, hits: Iterable[Hit]) -> None:
        self.by_start = sorted(hits, key=attrgetter("start"))
        self.by_end = sorted(self.by_start, key=attrgetter("end"))
        self._starts = [h.start for h in self.by_start]
        self._ends = [h.end for h in self.by_end]
        self.longest = max((h.end - h.start for h in self.by_start), default=0)

    def starting(self, lo: int, hi: int) -> list[Hit]:
        """Hits that start in [lo, hi]."""
        return self.by_start[bisect_left(self._starts, lo) : bisect_right(self._starts, hi)]

    def ending(self, lo: int, hi: int) -> list[Hit]:
        """Hits that end in [lo, hi]."""
        return self.by_end[bisect_left(self._ends, lo) : bisect_right(self._ends, hi)]

    def inside(self, outer: Hit) -> list[Hit]:
        """The other hits that ``outer`` contains."""
        near = self.starting(outer.start, outer.end)
        return [h for h in near if h is not outer and h.end <= outer.end]

    def straddles(self, word: Hit) -> bool:
        """Does another term overlap ``word`` across its edge (明年|会 against 年会)?"""
        inside_out = any(h.end > word.end for h in self.starting(word.start + 1, word.end - 1))
        return inside_out or any(
            h.start < word.start for h in self.ending(word.start + 1, word.end - 1)
        )


# Groups that matter only next to a term (after "by", before 前, after a label): looked up where
# they would stand, never matched over the whole text, so that "in", "on", 了 and 已 cost
# nothing elsewhere.
NEIGHBOURS = frozenset(
    {
        "month_lead",
        "future_lead",
        "future_trail",
        "duration_lead",
        "number_word",
        "perfect_aux",
        "past_mark",
        "question_end",
        "negation",
        "label_void",
        "determiner",
        "own_subject",
        "own_between",
    }
)


@dataclass(frozen=True)
class Vocabulary:
    """A lexicon split for reading: one matcher for the terms found anywhere, and the words
    looked up next to them (longest first)."""

    matcher: TermMatcher
    words: dict[str, tuple[str, ...]]


_VOCABULARIES: dict[int, tuple[Lexicon, Vocabulary]] = {}


def vocabulary(lexicon: Lexicon) -> Vocabulary:
    """The lexicon's vocabulary, built once per loaded lexicon (a policy reload makes a new one)."""
    held = _VOCABULARIES.get(id(lexicon))
    if held is None or held[0] is not lexicon:
        if len(_VOCABULARIES) >= 16:  # policy reloads leave old lexicons behind
            _VOCABULARIES.clear()
        held = _VOCABULARIES[id(lexicon)] = (lexicon, _split(lexicon))
    return held[1]


def _split(lexicon: Lexicon) -> Vocabulary:
    matched = {g: t for g, t in lexicon.groups.items() if g not in NEIGHBOURS}
    words = {g: tuple(sorted(set(lexicon.terms(g)), key=len, reverse=True)) for g in NEIGHBOURS}
    return Vocabulary(TermMatcher(matched), words)


def _word_char(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _ends_at(text: str, end: int, term: str) -> bool:
    """Does ``term`` end at ``end``, standing on word edges if it is a Latin word?"""
    start = end - len(term)
    if start < 0 or not text.startswith(term, start):
        return False
    return not (_word_char(term[0]) and start > 0 and _word_char(text[start - 1]))


def _starts_at(text: str, start: int, term: str) -> bool:
    end = start + len(term)
    if not text.startswith(term, start):
        return False
    return not (_word_char(term[-1]) and end < len(text) and _word_char(text[end]))


@dataclass(frozen=True)
class _Context:
    text: str
    words: dict[str, tuple[str, ...]]

    def preceding(self, pos: int, group: str, skip: int = 0) -> int | None:
        """Where a word of ``group`` starts that ends before ``pos`` with only spaces (and up
        to ``skip`` other words) between, or None."""
        lo = max(0, pos - _GAP)
        end = lo + len(self.text[lo:pos].rstrip())
        for _ in range(skip + 1):
            found = next((t for t in self.words[group] if _ends_at(self.text, end, t)), None)
            if found is not None:
                return end - len(found)
            word = self.text.rfind(" ", lo, end)
            if word < lo:
                return None
            end = lo + len(self.text[lo:word].rstrip())
        return None

    def follows(self, pos: int, group: str) -> bool:
        """Does a word of ``group`` start after ``pos`` with only spaces between?"""
        window = self.text[pos : pos + _GAP]
        start = pos + len(window) - len(window.lstrip())
        return any(_starts_at(self.text, start, t) for t in self.words[group])


def tag(text: str, lexicon: Lexicon) -> list[Hit]:
    """The lexicon's hits in ``text`` with their groups settled by what surrounds them."""
    vocab = vocabulary(lexicon)
    hits = _cancel(vocab.matcher.find(text))
    ctx, out = _Context(text, vocab.words), []
    for hit in hits:  # each rule reads the words around a hit, which no rule changes
        for triggers, rule in _CONTEXT_RULES:
            if not triggers.isdisjoint(hit.groups):
                hit = rule(ctx, hit)
        if hit.groups:
            out.append(hit)
    return sorted(out, key=lambda h: (h.start, -h.end))


def _cancelled_by(groups: frozenset[str]) -> set[str] | None:
    """The groups a hit of ``groups`` cancels inside it (None: every group)."""
    if "nouns" in groups:
        return None
    out = {g[4:] for g in groups if g.startswith("not_")}
    return out | {"future", "day"} if "past" in groups else out


def _cancel(hits: list[Hit]) -> list[Hit]:
    """Drop the groups that a longer term around a hit cancels (会 in 会议, 可能 in 没有可能),
    unless that term is a false reading (下周|会 is no 周会); then drop terms that a longer one
    of the same groups contains (完 in 完成)."""
    if not _overlapping(hits):
        return hits
    near, drops = _Near(hits), dict[int, set[str]]()
    for outer in hits:
        cancels = _cancelled_by(outer.groups)
        if cancels == set() or (_denies(outer) and near.straddles(outer)):
            continue
        for inner in _reach(near, outer):
            drops.setdefault(id(inner), set()).update(inner.groups if cancels is None else cancels)
    out = [_regroup(h, h.groups - drops[id(h)]) if id(h) in drops else h for h in hits]
    kept = _Near(out)
    redundant = {id(i) for o in out for i in kept.inside(o) if i.groups <= o.groups}
    return [h for h in out if id(h) not in redundant]


def _denies(hit: Hit) -> bool:
    """A not_* word (会议 against 会) can be a false reading; a past time or a noun cannot."""
    return any(g.startswith("not_") for g in hit.groups)


def _reach(near: _Near, outer: Hit) -> list[Hit]:
    """What a canceller covers: the hits inside it, and for a past time also a day that
    begins inside it (上周一 is 上周 and 周一: the Monday that has passed)."""
    if "past" not in outer.groups:
        return near.inside(outer)
    return [h for h in near.starting(outer.start, outer.end - 1) if h is not outer]


def _regroup(hit: Hit, groups: frozenset[str]) -> Hit:
    return Hit(hit.term, groups, hit.start, hit.end)  # dataclasses.replace is slow


def _overlapping(hits: list[Hit]) -> bool:
    """Do any two hits overlap? (Most texts: no, and nothing needs cancelling.)"""
    furthest = -1
    for hit in sorted(hits, key=lambda h: (h.start, -h.end)):
        if hit.start < furthest:
            return True
        furthest = max(furthest, hit.end)
    return False


def _with(hit: Hit, *groups: str) -> Hit:
    return _regroup(hit, hit.groups | set(groups))


def _without(hit: Hit, *groups: str) -> Hit:
    return _regroup(hit, hit.groups - set(groups))


def _noun_hui(ctx: _Context, hit: Hit) -> Hit:
    """A one-character modal (会) with nothing to govern, or after 的/个, is a noun (明天的会)."""
    if "modal" not in hit.groups or len(hit.term) != 1:
        return hit
    text = ctx.text
    after, before = text[hit.end : hit.end + 8].lstrip()[:1], text[hit.start - 1 : hit.start]
    if not after.isalnum() or (hit.start > 0 and before in "的个"):
        return _without(hit, "modal")
    return hit


def _month_or_hedge(ctx: _Context, hit: Hit) -> Hit:
    """The month May after in/by/since… or next to a number, else the hedge "may"."""
    if not {"hedge", "day"} <= hit.groups:
        return hit
    month = (
        ctx.preceding(hit.start, "month_lead") is not None
        or _DIGITS_BEFORE.search(ctx.text, max(0, hit.start - _GAP), hit.start) is not None
        or _DIGIT_AFTER.match(ctx.text, hit.end) is not None
    )
    return _without(hit, "hedge") if month else _without(hit, "day")


def _participle(ctx: _Context, hit: Hit) -> Hit:
    """A participle (done, finished) is an event after be/been/have: "will be (all) done"."""
    if "event_participle" in hit.groups and ctx.preceding(hit.start, "perfect_aux", 1) is not None:
        return _with(hit, "event")
    return hit


def _metric_number(ctx: _Context, hit: Hit) -> Hit:
    """Some verbs (hit, pass, 破) are metrics only before a number: "pass 5,000", 破0.9."""
    if "metric_number" not in hit.groups:
        return hit
    if _NUMBER_AFTER.match(ctx.text, hit.end) or ctx.follows(hit.end, "number_word"):
        return _with(hit, "metric")
    return hit


def _day_ahead(ctx: _Context, hit: Hit) -> Hit:
    """A day after by/before/next, or before 前/之前, is a future time (by Friday, 周五前)."""
    if "day" not in hit.groups:
        return hit
    lead = ctx.preceding(hit.start, "future_lead") is not None
    if lead or ctx.follows(hit.end, "future_trail"):
        return _with(hit, "future")
    return hit


def _duration(ctx: _Context, hit: Hit) -> Hit:
    """in/within + a number + a unit is a future time: "within two weeks", "in 3 days"."""
    if "duration_unit" not in hit.groups:
        return hit
    number = ctx.preceding(hit.start, "number_word")
    if number is None and (
        digits := _DIGITS_BEFORE.search(ctx.text, max(0, hit.start - _GAP), hit.start)
    ):
        number = digits.start()
    if number is not None and ctx.preceding(number, "duration_lead") is not None:
        return _with(hit, "future")
    return hit


def _noun_event(ctx: _Context, hit: Hit) -> Hit:
    """An English event word after a determiner is a noun: "the release", "our launch"."""
    if (
        "event" in hit.groups
        and hit.term.isascii()
        and ctx.preceding(hit.start, "determiner") is not None
    ):
        return _without(hit, "event")
    return hit


def _done(ctx: _Context, hit: Hit) -> Hit:
    """A Chinese outcome next to 了/已经 has happened (周五完成了, 已经超过)."""
    if hit.groups.isdisjoint(("event", "metric")) or hit.term.isascii():
        return hit
    if ctx.preceding(hit.start, "past_mark") is not None or ctx.follows(hit.end, "past_mark"):
        return _with(hit, "done")
    return hit


def _own(ctx: _Context, hit: Hit) -> Hit:
    """A modal whose subject is the speaker (I'll post…, 我明天会…) states a plan, and one
    whose subject is the reader (you should…) gives advice: neither forecasts."""
    pos = hit.start
    for _ in range(_OWN_REACH + 1):
        if ctx.preceding(pos, "own_subject") is not None:
            return _regroup(hit, frozenset({"own_modal"}))
        between = ctx.preceding(pos, "own_between")
        if between is None:
            return hit
        pos = between
    return hit


# Each rule with the groups that call for it, in order (a rule may add or drop a group).
_CONTEXT_RULES = (
    (frozenset({"modal", "expectation"}), _own),
    (frozenset({"modal"}), _noun_hui),
    (frozenset({"hedge"}), _month_or_hedge),
    (frozenset({"event_participle"}), _participle),
    (frozenset({"metric_number"}), _metric_number),
    (frozenset({"day"}), _day_ahead),
    (frozenset({"duration_unit"}), _duration),
    (frozenset({"event"}), _noun_event),
    (frozenset({"event", "metric"}), _done),
)


# ------------------------------------------------------------------------ segmentation


@dataclass
class Clause:
    start: int
    end: int
    hits: list[Hit] = field(default_factory=list)

    @cached_property
    def _first(self) -> dict[str, Hit]:
        first: dict[str, Hit] = {}
        for hit in self.hits:
            for group in hit.groups:
                first.setdefault(group, hit)
        return first

    def find(self, *groups: str) -> Hit | None:
        """The first hit of any of ``groups`` (read once the clause holds all its hits)."""
        first = self._first
        if len(groups) == 1:
            return first.get(groups[0])
        found = [first[g] for g in groups if g in first]
        return min(found, key=attrgetter("start")) if found else None

    @property
    def hedged(self) -> bool:
        """A hedge makes the clause no assertion, unless certainty or a forecast overrides it."""
        return (
            self.find("hedge") is not None
            and self.find("certainty", "strong", "prediction", "expectation") is None
        )


@dataclass
class Sentence:
    start: int
    end: int
    clauses: list[Clause]
    question: bool = False

    @cached_property
    def clause_starts(self) -> list[int]:
        return [c.start for c in self.clauses]


class Segments:
    """A text's sentences and clauses, with the hits of each; positions found by bisection."""

    def __init__(self, text: str, hits: Sequence[Hit], asking: Sequence[str]) -> None:
        ends = [m.end() for m in _SENTENCE_END.finditer(text)]
        breaks = sorted(  # a clause starts after its punctuation, or at its contrast word
            {m.end() for m in _CLAUSE_BREAK.finditer(text)}
            | {h.start for h in hits if "contrast" in h.groups}
        )
        spans = [(a, b) for a, b in pairwise([0, *ends, len(text)]) if b > a] or [(0, len(text))]
        self.sentences = [_sentence(a, b, breaks) for a, b in spans]
        self._starts = [s.start for s in self.sentences]
        for hit in hits:
            self.where(hit.start)[1].hits.append(hit)
        for sentence in self.sentences:
            sentence.question = _asks(text, sentence, asking)

    def where(self, pos: int) -> tuple[Sentence, Clause]:
        """The sentence and the clause that hold position ``pos``."""
        sentence = self.sentences[max(bisect_right(self._starts, pos) - 1, 0)]
        i = bisect_right(sentence.clause_starts, pos) - 1
        return sentence, sentence.clauses[max(i, 0)]


def _sentence(start: int, end: int, breaks: list[int]) -> Sentence:
    inner = breaks[bisect_right(breaks, start) : bisect_left(breaks, end)]
    return Sentence(start, end, [Clause(a, b) for a, b in pairwise([start, *inner, end])])


def _asks(text: str, sentence: Sentence, particles: Sequence[str]) -> bool:
    """A question asserts nothing (…吗？ Will it…?), but a tag question (…，对吧？ …, right?)
    does."""
    body = text[sentence.start : sentence.end].rstrip(" .。!")
    end = sentence.start + len(body.rstrip("?"))
    particle = any(_ends_at(text, end, p) for p in particles)
    return (body.endswith("?") or particle) and sentence.clauses[-1].find("tag_question") is None


# ------------------------------------------------------------------------------ labels


def label_words(labels: Iterable[str]) -> tuple[str, ...]:
    """The words of configured labels, canonical: "【推演】" and "Inference:" are 推演, inference."""
    return _label_words(tuple(labels))


@lru_cache(maxsize=32)
def _label_words(labels: tuple[str, ...]) -> tuple[str, ...]:
    strip = "".join(_BRACKETS) + "".join(_BRACKETS.values()) + ": "
    return tuple(w for w in (canonical_text(x).strip(strip) for x in labels) if w)


@lru_cache(maxsize=32)
def _label_matcher(words: tuple[str, ...]) -> TermMatcher:
    return TermMatcher({"label": words})


@dataclass(frozen=True)
class Form:
    """A label word where it stands: as a tag (【推演】), a prefix (推演：) or a bare word."""

    start: int  # the opening bracket of a tag, else the word
    end: int  # after the closing bracket or the colon, else after the word
    kind: str  # "tag", "prefix" or "bare"


@dataclass(frozen=True)
class Label:
    form: Form
    covers_from: int  # the clause (prefix) or sentence (tag) from which it covers the text


def _form(text: str, hit: Hit) -> Form:
    lo = max(0, hit.start - _GAP)
    left, right = text[lo : hit.start].rstrip(), text[hit.end : hit.end + _GAP]
    after = right.lstrip()
    if left and left[-1] in _BRACKETS and after[:1] == _BRACKETS[left[-1]]:
        return Form(lo + len(left) - 1, hit.end + len(right) - len(after) + 1, "tag")
    colon = right.lstrip(_MARKUP)  # **推演**：, Inference :
    if colon.startswith(":"):
        return Form(hit.start, hit.end + len(right) - len(colon) + 1, "prefix")
    return Form(hit.start, hit.end, "bare")


class _Quotes:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans = [(m.start(), m.end()) for m in _QUOTED.finditer(text)]
        self._starts = [s for s, _ in self.spans]

    def around(self, pos: int) -> bool:
        """Is ``pos`` inside quotes, or right after a quote mark (“【推演】”, "Inference:)?"""
        i = bisect_left(self._starts, pos) - 1
        inside = i >= 0 and pos < self.spans[i][1]
        before = self.text[max(0, pos - _GAP) : pos].rstrip(_MARKUP)
        return inside or (before != "" and before[-1] in _QUOTE_MARKS)


# ------------------------------------------------------------------------------ reading


class _Spans:
    """Relayed spans, merged and sorted: is a hit inside one?"""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        merged: list[tuple[int, int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        self.spans, self._starts = merged, [s for s, _ in merged]

    def __contains__(self, hit: Hit) -> bool:
        i = bisect_right(self._starts, hit.start) - 1
        return i >= 0 and hit.end <= self.spans[i][1]


class Reading:
    """One canonical text read for forecasts: its hits, segments and labels, without the spans
    that relay other members' words."""

    def __init__(
        self,
        text: str,
        hits: Sequence[Hit],
        vocabulary: Vocabulary,
        words: tuple[str, ...],
        relayed: Iterable[tuple[int, int]] = (),
    ) -> None:
        self.text, self.vocabulary, self.words = text, vocabulary, words
        spans = _Spans(relayed)
        self.hits = [h for h in hits if h not in spans]
        forms = [_form(text, h) for h in self._label_hits() if h not in spans]
        taken_back = {f: self._taken_back(f) for f in forms}
        self.denied = any(taken_back.values())
        quotes = _Quotes(text)
        labels = [self._label(f, quotes) for f in forms if not taken_back[f]]
        self.labels = [x for x in labels if x is not None]
        self._cover = self._coverage()

    def _label_hits(self) -> list[Hit]:
        if not any(w in self.text for w in self.words):  # most texts name no label at all
            return []
        return _label_matcher(self.words).find(self.text)

    @cached_property
    def segments(self) -> Segments:
        return Segments(self.text, self.hits, self.vocabulary.words["question_end"])

    def _taken_back(self, form: Form) -> bool:
        """Negated in its clause (这不是推演, 不用加【推演】, not an "Inference:"), or voided
        right after (【推演】不成立)."""
        clause, text = self.segments.where(form.start)[1], self.text
        window = text[max(clause.start, form.start - _GAP) : form.start]
        negated = any(
            _ends_at(text, end, t)
            for t in self.vocabulary.words["negation"]
            if t in window
            for end in range(max(clause.start + len(t), form.start - _REACH), form.start + 1)
        )
        return negated or self._context.follows(form.end, "label_void")

    @cached_property
    def _context(self) -> _Context:
        return _Context(self.text, self.vocabulary.words)

    def _label(self, form: Form, quotes: _Quotes) -> Label | None:
        """The label a form not taken back makes: a tag anywhere, a prefix at the start of a
        clause; neither when quoted."""
        if form.kind == "bare" or quotes.around(form.start):
            return None
        sentence, clause = self.segments.where(form.start)
        if form.kind == "tag":
            return Label(form, sentence.start)
        if self.text[clause.start : form.start].strip(_MARKUP):
            return None  # 这是推演：… speaks about a label, it is none
        return Label(form, clause.start)

    def _coverage(self) -> tuple[list[int], list[bool]]:
        """Where labels begin to cover the text, and where a declared fact (事实是, fact:) ends
        what they cover (at the start of its clause)."""
        facts = [h for h in self.hits if "fact_marker" in h.groups] if self.labels else []
        ends = [self.segments.where(h.start)[1].start for h in facts]
        events = [(x.covers_from, True) for x in self.labels] + [(p, False) for p in ends]
        events.sort(key=lambda e: (e[0], not e[1]))  # at one place, a declared fact wins
        return [p for p, _ in events], [labelled for _, labelled in events]

    def covered(self, pos: int) -> bool:
        positions, labelled = self._cover
        i = bisect_right(positions, pos) - 1
        return i >= 0 and labelled[i]

    @cached_property
    def signal(self) -> str | None:
        """The words that make the uncovered text a forecast asserted as fact, or None."""
        if not self.denied and _CORES.isdisjoint(groups_of(self.hits)):
            return None  # every rule needs one of these: no need to segment the text
        for sentence in self.segments.sentences:
            clauses = [c for c in sentence.clauses if not self.covered(c.start)]
            if not sentence.question and (found := _sentence_signal(clauses, self.denied)):
                return found
        return None

    @property
    def hedged(self) -> bool:
        """Every sentence that says something hedges (可能, might): nothing asserted as fact."""
        said = [
            s
            for s in self.segments.sentences
            if self.text[s.start : s.end].strip() and not s.question
        ]
        return bool(said) and all(any(c.hedged for c in s.clauses) for s in said)


# --------------------------------------------------------------------------- the rules


def _sentence_signal(clauses: list[Clause], denied: bool) -> str | None:
    live = [c for c in clauses if not c.hedged]
    whole = Clause(0, 0, [h for c in live for h in c.hits])
    # Certainty anywhere in a sentence with a time and an outcome (下周一上线，板上钉钉).
    vouched = denied or whole.find("assurance", "certainty") is not None
    basis = _basis(whole)
    for clause in live:
        if found := _clause_signal(clause, whole, basis, vouched):
            return " … ".join(dict.fromkeys(h.term for h in found if h is not None))
    return None


def _clause_signal(
    c: Clause, s: Clause, basis: Hit | None, vouched: bool
) -> list[Hit | None] | None:
    """The hits that make clause ``c`` (in sentence ``s``) a forecast, or None."""
    sure, modal, event = c.find("certainty"), c.find("modal"), c.find("event")
    if modal is None and c.find("metric"):  # "we will hit 99.9%": a figure is no one's plan
        modal = c.find("own_modal")
    outcome = event or c.find("metric")
    when = s.find("future", "day")
    if strong := c.find("strong", "prediction"):
        return [strong]
    if found := _expected(c, s):
        return found
    if sure and (modal or (c.find("ability") and (outcome or c.find("future", "day")))):
        return [sure, modal or c.find("ability")]
    if modal and (c.find("metric") or basis):
        return [basis or c.find("metric"), modal]
    if modal and event and when and not s.find("plan", "condition"):
        return [when, modal, event]
    if sure and (c.find("future") or (c.find("day") and _undone(c))):
        return [sure, c.find("future", "day")]
    ahead = s.find("future") or (s.find("day") if _undone(c) else None)
    if basis and ahead and outcome:
        return [basis, ahead, outcome]
    if vouched and ahead and outcome:
        return [s.find("assurance", "certainty"), ahead, outcome]
    return None


def _expected(c: Clause, s: Clause) -> list[Hit | None] | None:
    """A modal or an expectation governing an outcome after it, with no time word needed:
    "the 502s won't come back", "should hold", 大概下周能完成 (not 失败时会重试)."""
    lead = c.find("expectation", "modal")
    if lead is None or s.find("plan", "condition"):
        return None
    turns = ("event", "outcome")
    turn = next((h for h in c.hits if h.start >= lead.end and not h.groups.isdisjoint(turns)), None)
    return [lead, turn] if turn is not None and "done" not in turn.groups else None


def _basis(s: Clause) -> Hit | None:
    """A basis on its own (at this rate), or a lead before its noun (照这个速度, based on the
    trend)."""
    if found := s.find("basis"):
        return found
    lead, noun = s.find("basis_lead"), [h.start for h in s.hits if "basis_noun" in h.groups]
    return lead if lead is not None and noun and max(noun) >= lead.end else None


def _undone(c: Clause) -> bool:
    """An outcome in the clause that has not happened (完成, not 完成了 or 已完成)."""
    return any(
        not h.groups.isdisjoint(("event", "metric")) and "done" not in h.groups for h in c.hits
    )
