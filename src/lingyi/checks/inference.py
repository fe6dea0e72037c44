"""inference: a prediction stated as fact must carry an inference label.

The check reads the canonical text (lingyi.text) with one pass of its lexicon
(``validators/lexicons/inference.toml``: modals, certainty, hedges, metrics, events, times,
bases, labels' negations…) and decides per clause, because a hedge or a label covers the words
near it, not the whole message. A clause is a forecast asserted as fact when it holds:

- a strong marker (势必, is bound to), or certainty with a modal (一定会, will definitely);
- certainty with a future time (下个月肯定…), or with a day and an outcome not yet done;
- a modal with a metric (会超过, will exceed), or with a basis in its sentence (照这个速度);
- a modal with an event (上线, ship) and a time in its sentence, unless it states a plan;
- a basis, a time and an outcome without a modal (照这个速度，周五前做完);
- a time and an outcome in a sentence the writer vouches for (mark my words, 事实是) or in a
  text that denies being an inference (这不是推演：…).

Words are read in context: 会 in 会议/读书会 is no modal, "May" after "in" is the month,
没有可能 is certainty rather than a hedge, 上周一 is past. A hedged clause (可能, might) asserts
nothing; a question asks. A label counts in label position: 推演：/Inference: at the start of a
clause (after the speaker's own "灵研：" or "LingFlow here."), or a tag 【推演】/[Inference]
anywhere, but not when quoted or negated; it covers the text from there on. What a relay
reports in another member's words (lingyi.checks.relays) is left to communication.on_record;
what the speaker adds outside the relayed span is checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from itertools import pairwise

from pydantic import ValidationInfo, field_validator

from lingyi.checks._registry import (
    CheckContext,
    CheckParams,
    Outcome,
    PerLanguage,
    fail,
    ok,
    register,
)
from lingyi.checks.relays import find_relays
from lingyi.models import Fallback
from lingyi.policy import Lexicon, LexiconRef, load_lexicon
from lingyi.text import Hit, TermMatcher, canonical_text
from lingyi.text._lang import lang_of

_PREFIX = {"zh": "【推演】", "en": "Inference: "}
_LEXICON = "lexicons/inference.toml"
# Regexes on canonical text: NFKC made ，：；（）！？ ASCII; 。【】“” stay as they are.
_SENTENCE_END = re.compile(r"[。!?\n]|\.(?=\s|$)")
_CLAUSE_BREAK = re.compile(r"(?<!\d)[,:]|[,:](?!\d)|[;()\[\]【】〔〕—]")
_QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|「[^」]*」|『[^』]*』|‘[^’]*’")
_SPACES = re.compile(r"[^\S\n]+")
_NUMBER_AFTER = re.compile(r"\s*[$¥€]?\s*[\d零一二两三四五六七八九十百千万]")
_DIGIT_BEFORE = re.compile(r"\d\s*$")
_DIGITS_BEFORE = re.compile(r"\d+\s*$")
_DIGIT_AFTER = re.compile(r"\s*\d")
_MARKUP = " *#>-_~•·\t"
_BRACKETS = {"【": "】", "[": "]", "(": ")", "〔": "〕"}
_QUOTE_MARKS = "“”\"「」『』‘’'"
_REACH = 8  # characters between a negation and the label it denies (不用加【推演】)
_PAST_CANCELS = ("future", "day")


class InferenceParams(CheckParams):
    lexicon: LexiconRef = _LEXICON
    # The label words; each counts as a tag (【推演】, [Inference]) or as a prefix (推演：,
    # Inference:). Written as forms ("【推演】") they are read as their words.
    labels: list[str] = ["推演", "推断", "Inference", "Prediction"]
    # The label a fallback puts before the content, by the content's language (a label in
    # label position, so that the relabelled text passes); a policy may override either.
    prefix: PerLanguage = _PREFIX

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        words = label_words(info.data.get("labels", []))
        if bad := [p for p in value.values() if not starts_with_label(p, words)]:
            raise ValueError(f"{bad[0]!r} is not a label (labels: {', '.join(words)})")
        return {**_PREFIX, **value}


# ------------------------------------------------------------------------------ labels


def label_words(labels: Iterable[str]) -> tuple[str, ...]:
    """The words of configured labels, canonical: "【推演】" and "Inference:" are 推演, inference."""
    strip = "".join(_BRACKETS) + "".join(_BRACKETS.values()) + ": "
    return tuple(w for w in (canonical_text(x).strip(strip) for x in labels) if w)


@lru_cache(maxsize=32)
def _label_matcher(words: tuple[str, ...]) -> TermMatcher:
    return TermMatcher({"label": words})


def starts_with_label(text: str, words: Sequence[str]) -> bool:
    """Does ``text`` open with a label in label position (a fallback prefix must)?"""
    reading = _Reading(_tidy(canonical_text(text)), (), tuple(words))
    return any(label.covers_from == 0 for label in reading.labels)


@dataclass(frozen=True)
class _Form:
    """A label word where it stands: as a tag (【推演】), a prefix (推演：) or a bare word."""

    start: int  # the opening bracket of a tag, else the word
    end: int  # after the closing bracket or the colon, else after the word
    kind: str  # "tag", "prefix" or "bare"


@dataclass(frozen=True)
class _Label:
    form: _Form
    covers_from: int  # the clause (prefix) or sentence (tag) from which it covers the text


# --------------------------------------------------------------------- reading a text


def _tidy(text: str) -> str:
    """Runs of spaces as one, so that "based  on  the  trend" meets its lexicon term."""
    return _SPACES.sub(" ", text)


@dataclass
class _Clause:
    start: int
    end: int
    hits: list[Hit] = field(default_factory=list)

    def find(self, *groups: str) -> Hit | None:
        return next((h for h in self.hits if not h.groups.isdisjoint(groups)), None)

    @property
    def hedged(self) -> bool:
        """A hedge makes the clause no assertion, unless certainty overrides it."""
        return self.find("hedge") is not None and self.find("certainty", "strong") is None


@dataclass
class _Sentence:
    start: int
    end: int
    clauses: list[_Clause]
    question: bool = False


class _Reading:
    """One canonical text read for predictions: its tagged hits, segments, labels, relays."""

    def __init__(
        self,
        text: str,
        hits: Sequence[Hit],
        words: tuple[str, ...],
        relayed: Sequence[tuple[int, int]] = (),
    ) -> None:
        self.text = text
        self.relayed = list(relayed)
        self.hits = [h for h in hits if not self._in_relay(h)]
        self.sentences = _segments(text, self.hits)
        self._quotes = [(m.start(), m.end()) for m in _QUOTED.finditer(text)]
        found = [h for h in _label_matcher(words).find(text) if not self._in_relay(h)]
        forms = [_form(text, h) for h in found]
        self.denied = any(self._taken_back(f) for f in forms)
        self.labels = [x for x in map(self._label, forms) if x is not None]
        self._cover = self._coverage()

    def _in_relay(self, hit: Hit) -> bool:
        return any(s <= hit.start and hit.end <= e for s, e in self.relayed)

    def _where(self, pos: int) -> tuple[_Sentence, _Clause]:
        sentence = next((s for s in self.sentences if s.start <= pos < s.end), self.sentences[-1])
        clause = next((c for c in sentence.clauses if c.start <= pos < c.end), sentence.clauses[-1])
        return sentence, clause

    def _taken_back(self, form: _Form) -> bool:
        """Negated in its clause (这不是推演, 不用加【推演】, not an "Inference:"), or voided
        right after (【推演】不成立)."""
        clause = self._where(form.start)[1]
        negated = any(
            "negation" in h.groups and clause.start <= h.start and 0 <= form.start - h.end <= _REACH
            for h in self.hits
        )
        return negated or _just_after(self.text, self.hits, form.end, "label_void")

    def _label(self, form: _Form) -> _Label | None:
        """The label a form makes: a tag anywhere, a prefix at the start of a clause; neither
        when quoted or taken back."""
        if form.kind == "bare" or _quoted(self.text, form.start, self._quotes):
            return None
        if self._taken_back(form):
            return None
        sentence, clause = self._where(form.start)
        if form.kind == "tag":
            return _Label(form, sentence.start)
        if self.text[clause.start : form.start].strip(_MARKUP):
            return None  # 这是推演：… is a sentence about a label, not a label
        return _Label(form, clause.start)

    def _coverage(self) -> list[tuple[int, bool]]:
        """Where labels begin to cover the text and where a declared fact (事实是, fact:) ends it."""
        facts = [self._where(h.start)[1].start for h in self.hits if "fact_marker" in h.groups]
        events = [(x.covers_from, True) for x in self.labels] + [(p, False) for p in facts]
        return sorted(events, key=lambda e: (e[0], not e[1]))

    def covered(self, pos: int) -> bool:
        last = [labelled for start, labelled in self._cover if start <= pos]
        return bool(last) and last[-1]

    def signal(self) -> str | None:
        """The words that make the uncovered text a prediction asserted as fact, or None."""
        for sentence in self.sentences:
            clauses = [c for c in sentence.clauses if not self.covered(c.start)]
            if not sentence.question and (found := _sentence_signal(clauses, self.denied)):
                return found
        return None

    @property
    def hedged(self) -> bool:
        """Every sentence that says something hedges (可能, might): nothing asserted as fact."""
        text = self.text
        said = [s for s in self.sentences if text[s.start : s.end].strip() and not s.question]
        return bool(said) and all(any(c.hedged for c in s.clauses) for s in said)


def _form(text: str, hit: Hit) -> _Form:
    left, right = text[: hit.start].rstrip(), text[hit.end :]
    after = right.lstrip()
    if left and left[-1] in _BRACKETS and after[:1] == _BRACKETS[left[-1]]:
        return _Form(len(left) - 1, len(text) - len(after) + 1, "tag")
    colon = right.lstrip(_MARKUP)  # **推演**：, Inference :
    if colon.startswith(":"):
        return _Form(hit.start, len(text) - len(colon) + 1, "prefix")
    return _Form(hit.start, hit.end, "bare")


def _quoted(text: str, start: int, quotes: list[tuple[int, int]]) -> bool:
    before = text[:start].rstrip(_MARKUP)
    return any(s < start < e for s, e in quotes) or (before != "" and before[-1] in _QUOTE_MARKS)


# ------------------------------------------------------------------------ segmentation


def _segments(text: str, hits: list[Hit]) -> list[_Sentence]:
    """Sentences of clauses, each clause holding the hits inside it."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    breaks = sorted(  # a clause starts after its punctuation, or at its contrast word (but…)
        {m.end() for m in _CLAUSE_BREAK.finditer(text)}
        | {h.start for h in hits if "contrast" in h.groups}
    )
    sentences: list[_Sentence] = []
    start = 0
    for end in [*ends, len(text)]:
        if end > start or not sentences:
            sentences.append(_sentence(text, start, end, breaks, hits))
        start = end
    return sentences


def _sentence(text: str, start: int, end: int, breaks: list[int], hits: list[Hit]) -> _Sentence:
    cuts = [start, *(b for b in breaks if start < b < end), end]
    clauses = [_Clause(a, b) for a, b in pairwise(cuts)] or [_Clause(start, end)]
    for hit in hits:
        owner = next((c for c in clauses if c.start <= hit.start < c.end), None)
        if owner is not None:
            owner.hits.append(hit)
    sentence = _Sentence(start, end, clauses)
    sentence.question = _asks(text, sentence)
    return sentence


def _asks(text: str, sentence: _Sentence) -> bool:
    """A question asserts nothing, but a tag question (…，对吧？ …, right?) does."""
    body = text[sentence.start : sentence.end].rstrip(" .。!")
    last = sentence.clauses[-1]
    ends_with_particle = any(
        "question_end" in h.groups and h.end >= sentence.start + len(body.rstrip("?"))
        for h in last.hits
    )
    asked = body.endswith("?") or ends_with_particle
    return asked and last.find("tag_question") is None


# --------------------------------------------------------------------------- the rules


def _sentence_signal(clauses: list[_Clause], denied: bool) -> str | None:
    live = [c for c in clauses if not c.hedged]
    whole = _Clause(0, 0, [h for c in live for h in c.hits])
    vouched = denied or whole.find("assurance") is not None
    for clause in live:
        if found := _clause_signal(clause, whole, vouched):
            return " … ".join(dict.fromkeys(h.term for h in found if h is not None))
    return None


def _clause_signal(c: _Clause, s: _Clause, vouched: bool) -> list[Hit | None] | None:
    """The hits that make clause ``c`` (in sentence ``s``) a forecast, or None."""
    sure, modal, event = c.find("certainty"), c.find("modal"), c.find("event")
    outcome = event or c.find("metric")
    when = s.find("future") or s.find("day")
    basis = _basis(s)
    if strong := c.find("strong"):
        return [strong]
    if sure and (modal or (c.find("ability") and (outcome or c.find("future", "day")))):
        return [sure, modal or c.find("ability")]
    if modal and (c.find("metric") or basis):
        return [basis or c.find("metric"), modal]
    if modal and event and when and not s.find("plan"):
        return [when, modal, event]
    if sure and (c.find("future") or (c.find("day") and _undone(c))):
        return [sure, c.find("future") or c.find("day")]
    if basis and when and outcome:
        return [basis, when, outcome]
    if vouched and when and outcome:
        return [s.find("assurance"), when, outcome]
    return None


def _basis(s: _Clause) -> Hit | None:
    """A basis on its own (at this rate), or a lead with its noun (照这个速度, based on the trend)."""
    if found := s.find("basis"):
        return found
    for lead in (h for h in s.hits if "basis_lead" in h.groups):
        if any("basis_noun" in h.groups and h.start >= lead.end for h in s.hits):
            return lead
    return None


def _undone(c: _Clause) -> bool:
    """An event in the clause that has not happened (完成, not 完成了 or 已完成)."""
    return any("event" in h.groups and "done" not in h.groups for h in c.hits)


# ------------------------------------------------------------- words read in context


def tagged(text: str, lexicon: Lexicon) -> list[Hit]:
    """The lexicon's hits in ``text`` with their groups settled by what surrounds them."""
    hits = _cancel(lexicon.matcher.find(text))
    for rule in _CONTEXT_RULES:
        hits = [rule(text, hits, h) for h in hits]
    return [h for h in hits if h.groups]


def _cancelled_by(groups: frozenset[str]) -> set[str] | None:
    """The groups a hit of ``groups`` cancels inside it (None: every group)."""
    if "nouns" in groups:
        return None
    out = {g[4:] for g in groups if g.startswith("not_")}
    return out | set(_PAST_CANCELS) if "past" in groups else out


def _cancel(hits: list[Hit]) -> list[Hit]:
    """Drop the groups that a longer term around a hit cancels (会 in 会议, 可能 in 没有可能)."""
    cancellers = [
        (c, g) for c in hits if (g := _cancelled_by(c.groups)) != set() and not _straddled(c, hits)
    ]
    out = []
    for hit in hits:
        drop: set[str] = set()
        for c, groups in cancellers:
            if c is not hit and c.start <= hit.start and hit.end <= c.end:
                drop |= set(hit.groups) if groups is None else groups
        out.append(replace(hit, groups=hit.groups - drop) if drop else hit)
    return [h for h in out if not _redundant(h, out)]


def _straddled(word: Hit, hits: list[Hit]) -> bool:
    """A word that overlaps another term across its edge is a false reading: 明年会超过 is
    明年 + 会, not the annual meeting 年会; 会合并 is 会 + 合并."""
    return any(
        h.start < word.start < h.end < word.end or word.start < h.start < word.end < h.end
        for h in hits
    )


def _redundant(hit: Hit, hits: list[Hit]) -> bool:
    """A term inside a longer one of the same groups adds nothing (完 in 完成, 会 in 将会)."""
    return any(
        h is not hit and h.start <= hit.start and hit.end <= h.end and hit.groups <= h.groups
        for h in hits
    )


def _just_before(text: str, hits: list[Hit], pos: int, group: str, words: int = 0) -> bool:
    """A hit of ``group`` ends before ``pos`` with only spaces (and up to ``words`` words) between."""
    for h in hits:
        gap = text[h.end : pos]
        if group in h.groups and h.end <= pos and len(gap) <= 24 and len(gap.split()) <= words:
            return True
    return False


def _adjacent(text: str, first: Hit, then: Hit) -> bool:
    return first.end <= then.start and not text[first.end : then.start].strip()


def _just_after(text: str, hits: list[Hit], pos: int, group: str) -> bool:
    return any(
        group in h.groups and h.start >= pos and not text[pos : h.start].strip() for h in hits
    )


def _with(hit: Hit, *groups: str) -> Hit:
    return replace(hit, groups=hit.groups | set(groups))


def _without(hit: Hit, *groups: str) -> Hit:
    return replace(hit, groups=hit.groups - set(groups))


def _noun_hui(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """A one-character modal (会) with nothing to govern, or after 的/个, is a noun (明天的会)."""
    if "modal" not in hit.groups or len(hit.term) != 1:
        return hit
    after, before = text[hit.end :].lstrip()[:1], text[hit.start - 1 : hit.start]
    if not after.isalnum() or (before and before in "的个"):
        return _without(hit, "modal")
    return hit


def _month_or_hedge(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """The month May after in/by/since… or next to a number, else the hedge "may"."""
    if not {"hedge", "day"} <= hit.groups:
        return hit
    month = (
        _just_before(text, hits, hit.start, "month_lead")
        or _DIGIT_BEFORE.search(text, 0, hit.start) is not None
        or _DIGIT_AFTER.match(text, hit.end) is not None
    )
    return _without(hit, "hedge") if month else _without(hit, "day")


def _participle(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """A participle (done, finished) is an event after be/been/have: "will be (all) done"."""
    if "event_participle" in hit.groups and _just_before(text, hits, hit.start, "perfect_aux", 1):
        return _with(hit, "event")
    return hit


def _metric_number(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """Some verbs (hit, pass, 破) are metrics only before a number: "pass 5,000", 破0.9."""
    if "metric_number" not in hit.groups:
        return hit
    if _NUMBER_AFTER.match(text, hit.end) or _just_after(text, hits, hit.end, "number_word"):
        return _with(hit, "metric")
    return hit


def _day_ahead(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """A day after by/before/next, or before 前/之前, is a future time (by Friday, 周五前)."""
    if "day" not in hit.groups:
        return hit
    if _just_before(text, hits, hit.start, "future_lead") or _just_after(
        text, hits, hit.end, "future_trail"
    ):
        return _with(hit, "future")
    return hit


def _duration(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """in/within + a number + a unit is a future time: "within two weeks", "in 3 days"."""
    if "duration_unit" not in hit.groups:
        return hit
    numbers = [h.start for h in hits if "number_word" in h.groups and _adjacent(text, h, hit)]
    if digits := _DIGITS_BEFORE.search(text, 0, hit.start):
        numbers.append(digits.start())
    if any(_just_before(text, hits, n, "duration_lead") for n in numbers):
        return _with(hit, "future")
    return hit


def _done(text: str, hits: list[Hit], hit: Hit) -> Hit:
    """A Chinese event next to 了/已经 has happened (周五完成了, 已经发布)."""
    if "event" not in hit.groups or hit.term.isascii():
        return hit
    if _just_before(text, hits, hit.start, "past_mark") or _just_after(
        text, hits, hit.end, "past_mark"
    ):
        return _with(hit, "done")
    return hit


_CONTEXT_RULES = (
    _noun_hui,
    _month_or_hedge,
    _participle,
    _metric_number,
    _day_ahead,
    _duration,
    _done,
)


# ------------------------------------------------------------------ relays and the check


def _relayed_spans(text: str, ctx: CheckContext, hits: list[Hit]) -> list[tuple[int, int]]:
    """What relays report in other members' words, each cut where the speaker takes over
    (灵通说…，所以… / "…, and it will…": the add-on is the speaker's own)."""
    spans = []
    for relay in find_relays(text, ctx.policies, ctx.member.id):
        takeover = (h.start for h in hits if "own_addon" in h.groups)
        end = min((p for p in takeover if relay.claim_start < p < relay.end), default=relay.end)
        spans.append((relay.start, end))
    return spans


@cache
def _packaged_lexicon() -> Lexicon:
    from lingyi.config import defaults_dir  # the config imports the checks

    return load_lexicon(defaults_dir() / "validators" / _LEXICON)


def read(
    text: str,
    lexicon: Lexicon | None = None,
    labels: Sequence[str] = (),
) -> _Reading:
    """``text`` (any form: it is made canonical) read for predictions, labels and hedges."""
    canon = _tidy(canonical_text(text))
    lexicon = lexicon or _packaged_lexicon()
    words = label_words(labels or InferenceParams().labels)
    return _Reading(canon, tagged(canon, lexicon), words)


def is_inference(text: str, labels: list[str] | None = None) -> bool:
    """Labelled as inference, hedged in every sentence, or a prediction: not asserted as fact."""
    reading = read(text, labels=labels or ())
    return bool(reading.labels) or reading.hedged or reading.signal() is not None


def prediction_signal(text: str) -> str | None:
    """The words that make ``text`` a prediction asserted as fact, or None."""
    return read(text).signal()


@register("inference.labelled", InferenceParams)
def labelled(ctx: CheckContext, params: InferenceParams) -> Outcome:
    """Predictions and forecasts must be labelled as inference, not asserted as fact."""
    text = _tidy(ctx.canon.text)
    hits = tagged(text, ctx.lexicon(params.lexicon))
    words = label_words(params.labels)
    relayed = _relayed_spans(text, ctx, hits)
    reading = _Reading(text, hits, words, relayed)
    if (signal := reading.signal()) is None:
        if reading.labels:
            return ok(ctx.msg("labelled"))
        if relayed and _Reading(text, hits, words).signal() is not None:
            return ok(ctx.msg("reported_speech"))  # the forecast is the relayed member's words
        return ok(ctx.msg("no_prediction"))
    label = params.prefix[lang_of(ctx.canon.text)]  # both languages: _prefix fills the defaults in
    return fail(
        ctx.msg("fail", signal=signal),
        ctx.msg("hint", label=label.strip()),
        Fallback(kind="relabel", content=label + ctx.assertion.content, note=ctx.msg("relabelled")),
        signal=signal,
    )
