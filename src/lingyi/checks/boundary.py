"""boundary: medical advice (out of bounds for every member) and the scope of a member's domains.

Both checks read canonical text (:mod:`lingyi.text`) through lexicon files
(``validators/lexicons/medical.toml``, ``domains.toml``), one automaton pass per text.

Medical advice is recognised by intent, never by a single word. The lexicon gives words
ROLES (a condition, a drug, a verb of taking, a question word, a dose unit, a verb of
curing…); advice is a combination of roles in one sentence: a drug with a dose or a
schedule, a question asking for a drug, a verb of curing aimed at a condition, a condition
followed by something to take, stopping or replacing care. 故障诊断 holds no condition,
治大国若烹小鲜 no illness, "treat warnings as errors" nothing to treat: each holds a role or
two and passes. A history or fiction frame (阿司匹林的发明史, how Tang physicians treated
fevers) excuses a mention, never a dose, a verb of taking, stopping care, or a text that
names who should take it. A disclaimer ("this is not medical advice") excuses nothing; a
member's own refusal (不回答用药问题) excuses the request it repeats.

A domain counts when one of its terms occurs outside a look-alike ("zen mode", 功夫熊猫), and
the query is not about shopping, renting or streaming (price, 票房, rent) unless it also asks
as a student would (history, 源流).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import Any

from lingyi._regex import lazy_re
from lingyi.checks._registry import (
    CheckContext,
    CheckParams,
    Outcome,
    PerLanguage,
    fail,
    in_language,
    ok,
    register,
)
from lingyi.models import Fallback
from lingyi.policy import Lexicon, LexiconRef
from lingyi.text import Hit, canonical, canonical_text

# --- text as the lexicons expect it ---------------------------------------------------------

_ACCENTED = lazy_re(r"[a-z]*[\u00c0-\u024f\u0300-\u036f][a-z\u00c0-\u024f\u0300-\u036f]*")
_HYPHEN = lazy_re(r"(?<=[a-z0-9])[-\u2010-\u2015](?=[a-z0-9])")
_UNIT_GLUE = lazy_re(r"(?<=\d)(?=[a-zμ])")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'"})
_SPACES = lazy_re(r"\s+")
_CJK = lazy_re(r"[\u3400-\u9fff\uf900-\ufaff]")


def _plain(match: re.Match[str]) -> str:
    decomposed = unicodedata.normalize("NFD", match.group(0))
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


@lru_cache(maxsize=4096)
def prepared(text: str) -> str:
    """Canonical ``text`` as lexicon terms are written: pinyin tone marks removed (Lǎozǐ →
    laozi), hyphens between letters read as spaces (Chen-style), curly apostrophes straight,
    a number parted from its unit (5mg → 5 mg), runs of white space made one space."""
    if not text.isascii():
        text = _ACCENTED.sub(_plain, text.translate(_APOSTROPHES))
    text = _UNIT_GLUE.sub(" ", _HYPHEN.sub(" ", text))
    return _SPACES.sub(" ", text).strip()


# --- roles: the lexicon's terms found in a text ---------------------------------------------


@dataclass(frozen=True)
class Span:
    role: str
    start: int
    end: int


def _covered(hit: Hit, looks: Sequence[Hit]) -> bool:
    """Does a look-alike overlap the hit ("cold start" takes "a cold" with it)? A term that
    holds the whole look-alike is the longer reading and stays (不舒服 holds 舒服)."""
    return any(
        c.start < hit.end
        and hit.start < c.end
        and not (
            hit.start <= c.start and c.end <= hit.end and hit.end - hit.start > c.end - c.start
        )
        for c in looks
    )


def roles_in(text: str, lexicon: Lexicon) -> list[Span]:
    """Every term of the lexicon in ``text`` by role; a look-alike removes what it overlaps."""
    hits = lexicon.matcher.find(text)
    looks = [h for h in hits if "lookalike" in h.groups]
    kept = [h for h in hits if "lookalike" not in h.groups and not _covered(h, looks)]
    # A term of several groups (站桩: 武 and 气) gives a span for each, in the groups' sorted
    # order: a frozenset's own order follows the hash seed, which differs between processes.
    return sorted(
        (Span(group, h.start, h.end) for h in kept for group in sorted(h.groups)),
        key=lambda s: (s.start, s.end),
    )


# --- what the medical roles add: generic conditions, complaints, amounts --------------------

_ZH_NUMERAL = set("0123456789零〇一二两三四五六七八九十百千万半几")


def _generic_conditions(text: str, spans: list[Span]) -> Iterator[Span]:
    """胃炎, 肺癌: a word ending in an inflammation or cancer suffix is a condition."""
    for s in spans:
        if s.role == "condition_suffix" and s.start > 0 and _CJK.match(text[s.start - 1]):
            yield Span("condition", s.start - 1, s.end)


_LATIN_WORD = lazy_re(r"[a-z]{7,}")


def _named_drugs(text: str, spans: list[Span], lexicon: Lexicon) -> Iterator[Span]:
    """Drug names not listed, known by their ending: lisinopril, 左氧氟沙星."""
    taken = {i for s in spans if s.role != "drug_suffix" for i in range(s.start, s.end)}
    for s in spans:
        if s.role == "drug_suffix" and _CJK.search(text[s.start : s.end]):
            yield Span("drug", *_whole_name(text, s, taken))
    endings = _endings(lexicon)
    for word in _LATIN_WORD.finditer(text) if endings else ():
        if word.group(0).endswith(endings):
            yield Span("drug", word.start(), word.end())


def _whole_name(text: str, part: Span, taken: set[int]) -> tuple[int, int]:
    """The Chinese drug name around a naming part (瑞格列奈 around 格列), up to the nearest
    character another term holds (吃瑞格列奈: 吃 is a verb of taking)."""
    start, end = part.start, part.end
    while start > part.start - 3 and start > 0 and _free(text, start - 1, taken):
        start -= 1
    while end < part.end + 2 and end < len(text) and _free(text, end, taken):
        end += 1
    return start, end


def _free(text: str, i: int, taken: set[int]) -> bool:
    return i not in taken and bool(_CJK.match(text[i]))


@lru_cache(maxsize=16)
def _endings_of(terms: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(e for e in (canonical_text(t) for t in terms) if e.isascii())


def _endings(lexicon: Lexicon) -> tuple[str, ...]:
    return _endings_of(lexicon.groups.get("drug_suffix", ()))


def _complaints(text: str, spans: list[Span]) -> Iterator[Span]:
    """A body part beside an ache (胸口有点疼, "my knee hurts", "sore back") is a condition."""
    body = [s for s in spans if s.role == "body"]
    for ache in (s for s in spans if s.role == "ache"):
        for part in body:
            first, second = (part, ache) if part.start < ache.start else (ache, part)
            gap = text[first.end : second.start]
            if first.end <= second.start and _short_gap(gap, 2, 4) and "的" not in gap:
                yield Span("condition", first.start, second.end)


_ASKED = ("多少", "几", "many", "much")


def _amounts(text: str, spans: list[Span]) -> Iterator[Span]:
    """A unit after a number (5 mg, 两片, "two tablets") is an amount, a schedule (每晚, "twice
    a day") too; a question number (多少克, 几片, "how many mg") asks for an amount."""
    numeral_at = {s.end: s.start for s in spans if s.role == "numeral"}
    for unit in (s for s in spans if s.role == "unit"):
        before = text[: unit.start].rstrip()
        if before.endswith(_ASKED):
            yield Span("amount_question", max(0, len(before) - 4), unit.end)
        elif len(before) in numeral_at:
            yield Span("amount", numeral_at[len(before)], unit.end)
        elif before and before[-1] in _ZH_NUMERAL:
            yield Span(
                "amount",
                len(before.rstrip("0123456789.,零〇一二两三四五六七八九十百千万半")),
                unit.end,
            )
    yield from (Span("amount", s.start, s.end) for s in spans if s.role == "frequency")


def _only_words(gap: str) -> bool:
    return not gap.strip() or gap.replace(" ", "").isalpha()


def _counted(text: str, spans: list[Span]) -> Iterator[Span]:
    """A count before a drug is an amount: "two Tylenol", "2 aspirin", "half an aspirin"."""
    numeral_ends = [s.end for s in spans if s.role == "numeral"]
    for drug in (s for s in spans if s.role == "drug"):
        before = text[max(0, drug.start - 10) : drug.start]
        counts = [e for e in numeral_ends if 0 <= drug.start - e <= 8]
        counts = [e for e in counts if _only_words(text[e : drug.start])]
        if re.search(r"\d\s*$", before) or counts:
            asked = any(text[:e].endswith(_ASKED) for e in counts)
            yield Span("amount_question" if asked else "amount", drug.start, drug.end)


_TOPIC_AFTER = ("", " ", "的", "'s ")
_TOPIC_BEFORE = (" of ", " of the ", "的", "")


def _topic(text: str, drug: Span, frames: list[Span]) -> bool:
    """Is the drug what a frame noun is about (阿司匹林的历史, "the aspirin article",
    "history of penicillin"), not something to take?"""
    return any(
        text[drug.end : f.start] in _TOPIC_AFTER
        if f.start >= drug.end
        else f.end <= drug.start and text[f.end : drug.start] in _TOPIC_BEFORE
        for f in frames
    )


def _drugs_as_topics(text: str, spans: list[Span]) -> list[Span]:
    frames = [s for s in spans if s.role == "frame"]
    return [
        s
        for s in spans
        if not (frames and s.role in ("drug", "drug_generic") and _topic(text, s, frames))
    ]


def medical_roles(text: str, lexicon: Lexicon) -> list[Span]:
    """The roles of the medical lexicon, with the conditions, drugs and amounts they compose."""
    spans = roles_in(text, lexicon)
    spans += [*_generic_conditions(text, spans), *_named_drugs(text, spans, lexicon)]
    spans = _drugs_as_topics(text, spans)
    spans += [*_complaints(text, spans), *_amounts(text, spans), *_counted(text, spans)]
    return sorted(spans, key=lambda s: (s.start, s.end))


# --- sentences: where roles must meet -------------------------------------------------------

_SENTENCE_END = lazy_re(r"[。！？!?；;\n]|\.(?=\s|$)")
_CLAUSE_END = lazy_re(r"[。！？!?；;\n,，、:：]|\.(?=\s|$)|\bbut\b|\bhowever\b|但是|但|不过")


def _short_gap(gap: str, zh: int, en: int) -> bool:
    """Is the text between two terms short: ``zh`` characters of Chinese, ``en`` of Latin?"""
    return len(gap) <= (zh if _CJK.search(gap) else en)


@dataclass
class Sentence:
    text: str
    spans: list[Span]
    clause_starts: list[int] = field(default_factory=list)

    def of(self, *roles: str) -> list[Span]:
        return [s for s in self.spans if s.role in roles]

    def has(self, *roles: str) -> bool:
        return any(s.role in roles for s in self.spans)

    def near(
        self, first: Sequence[str], second: Sequence[str], zh: int, en: int, ordered: bool = True
    ) -> tuple[int, int] | None:
        """The first pair of non-overlapping terms of the two roles with a short gap."""
        for a in self.of(*first):
            for b in self.of(*second):
                x, y = (a, b) if a.start <= b.start or ordered else (b, a)
                if x.end <= y.start and _short_gap(self.text[x.end : y.start], zh, en):
                    return x.start, y.end
        return None

    def refused_before(self, at: int) -> bool:
        """Does a refusal stand earlier in the clause holding position ``at``?"""
        i = bisect_right(self.clause_starts, at) - 1
        start = self.clause_starts[i] if i >= 0 else 0
        return any(start <= s.start < at for s in self.of("refusal"))


_OPENING = " \"'“”‘’([（【*-"


def _imperatives(text: str, spans: list[Span], clauses: list[int]) -> Iterator[Span]:
    """A verb of taking that opens a clause is an instruction (Take…, "Rub… for the pain")."""
    starts = set(clauses)
    for s in spans:
        if s.role in ("intake", "intake_weak"):
            head = s.start
            while head > 0 and text[head - 1] in _OPENING:
                head -= 1
            if head in starts:
                yield Span("advise", s.start, s.end)


def sentences(text: str, spans: list[Span]) -> list[Sentence]:
    """The text cut into sentences, each with its terms and the starts of its clauses."""
    cuts = [0, *(m.end() for m in _SENTENCE_END.finditer(text))]
    clauses = [0, *(m.end() for m in _CLAUSE_END.finditer(text))]
    by_sentence: dict[int, list[Span]] = {}
    for span in sorted([*spans, *_imperatives(text, spans, clauses)], key=lambda s: s.start):
        by_sentence.setdefault(bisect_right(cuts, span.start) - 1, []).append(span)
    out = []
    for i, inside in by_sentence.items():
        lo, hi = cuts[i], cuts[i + 1] if i + 1 < len(cuts) else len(text) + 1
        out.append(Sentence(text, inside, [c for c in clauses if lo <= c < hi] or [lo]))
    return out


# --- intents: combinations of roles that make advice ----------------------------------------

Found = tuple[int, int] | None
DRUGS = ("drug", "drug_generic")


def _span(s: Sentence, *groups: Sequence[str]) -> Found:
    """From the first to the last of one term of each role group, if every group is present."""
    picked = [s.of(*g) for g in groups]
    if not all(picked):
        return None
    return min(p[0].start for p in picked), max(p[0].end for p in picked)


def _regimen(s: Sentence) -> Found:
    """A drug with an amount or a schedule: 布洛芬每次400毫克, "800 mg of ibuprofen"."""
    if s.has("intake"):
        return _span(s, DRUGS, ("amount",))
    return _span(s, ("drug",), ("amount",))


def _replace_care(s: Sentence) -> Found:
    """Stopping, skipping or replacing care: 停药, 不用看医生, "instead of chemo"."""
    return s.near(("stop",), ("care", "drug"), 6, 24) or s.near(("care", "drug"), ("stop",), 8, 40)


def _request(s: Sentence) -> Found:
    """Asking for a drug: 吃什么药, 哪种降压药, "what pills", "what should I take for…"."""
    if found := s.near(("question",), (*DRUGS, "dose_word"), 3, 16):
        intake = s.near(("intake", "intake_weak"), ("question",), 2, 2)
        return (intake[0], found[1]) if intake and intake[1] >= found[0] - 2 else found
    if s.has("condition", *DRUGS, "remedy"):
        return s.near(("question",), ("intake",), 3, 16, ordered=False)
    return None


def _dose_question(s: Sentence) -> Found:
    """Asking how much to take: 剂量, "dosage", 一天吃几次, 多少克."""
    takers = ("intake", "condition", "remedy", *DRUGS)
    return _span(s, ("dose_word", "amount_question"), takers)


def _take_strong(s: Sentence) -> Found:
    """Taking a drug: 吃两片布洛芬, 服用褪黑素, "take ibuprofen", 吃点药."""
    return s.near(("intake",), ("drug",), 8, 24, ordered=False) or s.near(
        ("intake",), ("drug_generic",), 4, 16
    )


def _take_medical(s: Sentence) -> Found:
    """Verbs used only of medicine (服用, 口服): told, or aimed at a condition, they are advice
    whatever the drug's name."""
    if s.has("advise", "condition", "patient", "amount"):
        return _span(s, ("intake_medical",))
    return None


def _take_weak(s: Sentence) -> Found:
    """用点抗生素, "try melatonin": a weak verb of taking beside a named drug."""
    return s.near(("intake_weak",), ("drug",), 8, 24, ordered=False)


def _drug_for(s: Sentence) -> Found:
    """A drug beside a condition: "ibuprofen for back pain", 失眠的药."""
    return s.near(("drug",), ("condition", "body"), 12, 32, ordered=False) or s.near(
        ("drug_generic",), ("condition",), 4, 12, ordered=False
    )


def _treat(s: Sentence) -> Found:
    """A verb of curing aimed at a condition: 能治好胃病, 降血脂, "cure insomnia"."""
    return s.near(("effect",), ("condition",), 12, 32, ordered=False)


def _self_treat(s: Sentence) -> Found:
    """A verb that holds its condition (退烧, 止咳, "bring down a fever"), asked, told or
    aimed at someone: 如何快速退烧, 推荐助眠的…."""
    if s.has("question", "advise", "patient", "intake", "intake_weak", "amount", "ask", "works"):
        return _span(s, ("treat_condition",))
    return None


def _cure(s: Sentence) -> Found:
    """A promised cure asked about or aimed at someone: 能治好老寒腿吗, "cure my…"."""
    return s.near(("cure",), ("patient",), 3, 8) or s.near(("cure",), ("ask",), 6, 0)


def _remedy(s: Sentence) -> Found:
    """Symptom → remedy: 失眠就喝…, 经期腹痛按哪个穴位最有效."""
    told = s.has("amount", "works", "advise", "ask", "question")
    if told and (found := _span(s, ("condition",), ("intake", "intake_weak"))):
        return found
    if s.has("question", "works", "advise", "amount", "effect"):
        return _span(s, ("condition",), ("remedy",))
    return None


def _diagnose(s: Sentence) -> Found:
    """Asking what one has: 胃疼反酸是什么病, "is this mole cancer"."""
    return s.near(("diagnose",), ("condition",), 12, 32, ordered=False)


def _advice(s: Sentence) -> Found:
    """A condition and "what should I do": 胸口疼怎么办."""
    return s.near(("advice_question",), ("condition",), 16, 40, ordered=False)


def _advise_drug(s: Sentence) -> Found:
    """Recommending a named drug: 推荐的降压药是…, "I suggest aspirin"."""
    return s.near(("advise",), ("drug",), 8, 24)


@dataclass(frozen=True)
class Intent:
    name: str
    find: Callable[[Sentence], Found]
    # None: a history or fiction frame never excuses it; otherwise the roles that keep a
    # frame from excusing it (a patient named, an instruction, a dose…).
    frame_keepers: tuple[str, ...] | None
    refusable: bool = True  # a member's own refusal in the clause excuses it


INTENTS = (
    Intent("regimen", _regimen, None, refusable=False),
    Intent("replace_care", _replace_care, None, refusable=False),
    Intent("drug_request", _request, ("patient", "advise")),
    Intent("dose_question", _dose_question, ("patient", "advise")),
    Intent("taking_a_drug", _take_strong, ("patient", "advise", "amount")),
    Intent("taking_a_drug", _take_medical, ("patient", "advise", "amount")),
    Intent("taking_a_drug", _take_weak, ("patient", "advise", "amount")),
    Intent("drug_for_condition", _drug_for, ("patient", "advise", "amount", "intake")),
    Intent("treatment", _treat, ("patient", "advise", "amount", "intake")),
    Intent("treatment", _self_treat, ("patient", "advise", "amount", "intake")),
    Intent("cure", _cure, ("patient", "advise", "amount")),
    Intent("remedy", _remedy, ("patient", "advise", "amount")),
    Intent("diagnosis", _diagnose, ("patient",)),
    Intent("advice", _advice, ("patient",)),
    Intent("recommendation", _advise_drug, ("patient", "amount", "intake")),
)


@dataclass(frozen=True)
class Signal:
    intent: str
    text: str


def _excused(intent: Intent, s: Sentence, at: int) -> bool:
    keepers = intent.frame_keepers
    if keepers is not None and s.has("frame") and not s.has(*keepers):
        return True
    return intent.refusable and s.refused_before(at)


def signals_in(sentence: Sentence) -> Iterator[Signal]:
    """Every intent of the sentence that no frame or refusal excuses, in the order of INTENTS."""
    for intent in INTENTS:
        found = intent.find(sentence)
        if found and not _excused(intent, sentence, found[0]):
            yield Signal(intent.name, sentence.text[found[0] : found[1]])


# Every intent needs one of these roles: a text without any is read no further.
_ANCHORS = frozenset(
    {"drug", "drug_generic", "condition", "dose_word", "amount_question", "care", "remedy"}
    | {"cure", "intake_medical", "treat_condition"}
)
_LETTER = r"[a-z\u3400-\u9fff]"
# Symbols, punctuation inside a word and emoji between two letters: mel-atonin, 布🙂洛芬, 失.眠.
_WORD_BREAK = lazy_re(
    rf"(?<={_LETTER})(?:_|[^\w\s，。、！？；：,!?;:()（）\[\]【】《》“”\"'])"
    rf"{{1,3}}(?={_LETTER})"
)


def medical_signals(text: str, lexicon: Lexicon) -> Iterator[Signal]:
    """The intents that make canonical ``text`` medical advice, sentence by sentence.

    Words broken with symbols (mel-atonin, 布🙂洛芬) are read a second time joined; short
    sentences are read with their neighbour too ("Insomnia? Melatonin. 3 mg.").
    """
    forms = [prepared(text)]
    if _WORD_BREAK.search(text):
        forms.append(prepared(_WORD_BREAK.sub("", text)))
    for ready in forms:
        spans = medical_roles(ready, lexicon)
        if any(s.role in _ANCHORS for s in spans):  # no intent can form without one
            for sentence in _with_neighbours(sentences(ready, spans)):
                yield from signals_in(sentence)


_SHORT = 40  # characters: a sentence this short may finish its neighbour's advice


def _with_neighbours(found: list[Sentence]) -> Iterator[Sentence]:
    """Each sentence, then each pair of neighbours of which one is short, read as one."""
    yield from found
    for first, second in pairwise(found):
        if min(_length(first), _length(second)) <= _SHORT:
            spans = first.spans + second.spans
            yield Sentence(first.text, spans, first.clause_starts + second.clause_starts)


def _length(sentence: Sentence) -> int:
    return sentence.spans[-1].end - sentence.spans[0].start


def medical_signal(text: str, lexicon: Lexicon) -> Signal | None:
    """The first intent that makes canonical ``text`` medical advice, with its words; else None."""
    return next(medical_signals(text, lexicon), None)


class MedicalParams(CheckParams):
    lexicon: LexiconRef = "lexicons/medical.toml"
    # The text arguments to read besides the content; None (the default) reads every one.
    fields: list[str] | None = None
    # The member's own referral, per language ({zh = "…", en = "…"}); the catalog's otherwise.
    referral: PerLanguage = {}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _argument_texts(ctx: CheckContext, fields: list[str] | None) -> list[str]:
    call = ctx.assertion.tool_call
    if call is None:
        return []
    args = call.arguments if fields is None else {f: call.arguments.get(f) for f in fields}
    return [canonical(t, ctx.policies.names).text for t in _strings(args) if t.strip()]


@register("boundary.medical", MedicalParams)
def medical(ctx: CheckContext, params: MedicalParams) -> Outcome:
    """No medical advice from any member, in the content or in any text argument of a call."""
    lexicon = ctx.lexicon(params.lexicon)
    content = [ctx.canon.text] if ctx.assertion.content else []
    for text in content + _argument_texts(ctx, params.fields):
        if signal := medical_signal(text, lexicon):
            return fail(
                ctx.msg("fail", signal=signal.text),
                in_language(params.referral, ctx.lang) or ctx.msg("referral"),
                signal=signal.text,
                intent=signal.intent,
            )
    return ok(ctx.msg("ok"))


# --- domain scope ---------------------------------------------------------------------------


class DomainParams(CheckParams):
    lexicon: LexiconRef = "lexicons/domains.toml"
    # The groups of the lexicon that are this member's domains, in the order messages list them.
    domains: list[str]
    excluded: list[str] = []
    fields: list[str] = []
    # A lookup (Services.lookups, e.g. "knowledge_base") that settles a query no domain term
    # names: what the member's own knowledge base holds is in its domain. Without it, a
    # search the guard itself recommended ("search the KB first") could be refused here.
    lookup: str | None = None


def domains_of(text: str, lexicon: Lexicon, domains: Sequence[str]) -> dict[str, list[str]]:
    """Domains (groups of ``lexicon`` named in ``domains``) that canonical ``text`` is about,
    with the terms found; empty when the text shops, rents or streams and is no study."""
    ready = prepared(text)
    spans = roles_in(ready, lexicon)
    if any(s.role == "everyday" for s in spans) and not any(s.role == "study" for s in spans):
        return {}
    found: dict[str, list[str]] = {}
    for span in spans:
        term = ready[span.start : span.end]
        if span.role in domains and len(term) > 1 and term not in found.get(span.role, []):
            found.setdefault(span.role, []).append(term)
    # In the policy's order of domains (the order its messages list them), so that a reason
    # and its detail read the same in every process and every run.
    return {domain: found[domain] for domain in domains if domain in found}


@register("domain.scope", DomainParams)
def scope(ctx: CheckContext, params: DomainParams) -> Outcome:
    """What the text is about must fall inside the member's domains."""
    texts = ctx.canonical_texts(params.fields, content=not params.fields)
    lexicon = ctx.lexicon(params.lexicon)
    found = domains_of(" ".join(t.text for t in texts), lexicon, params.domains)
    allowed = [d for d in params.domains if d not in params.excluded]
    if any(d in allowed for d in found):
        return ok(ctx.msg("ok", domains=ctx.msg("sep").join(found)), domains=found)
    if held := _held(ctx, params, " ".join(t.text for t in texts)):
        return ok(ctx.msg("held", ids=", ".join(held)), evidence=held)
    names = ctx.msg("sep").join(allowed)
    return fail(
        ctx.msg("fail", domains=names),
        ctx.msg("hint", domains=names),
        _restricted(ctx, allowed),
        domains=found,
    )


_HELD_LIMIT = 5


def _held(ctx: CheckContext, params: DomainParams, query: str) -> list[str]:
    """Ids of documents the configured lookup finds for ``query`` (an outage raises: the
    layer applies the check's on_error, and the default fails closed)."""
    lookup = ctx.services.lookups.get(params.lookup) if params.lookup else None
    if lookup is None or not query.strip():
        return []
    held = [e.id for e in lookup(query) if _covers(query, f"{e.title} {e.snippet or ''}")]
    return held[:_HELD_LIMIT]


_WORDS = re.compile(r"[a-z0-9]{3,}|[\u4e00-\u9fff]+")


def _words(text: str) -> set[str]:
    """Latin words of three letters or more, and the character pairs of Chinese runs."""
    out: set[str] = set()
    for word in _WORDS.findall(text):
        pairs = [word[i : i + 2] for i in range(len(word) - 1)] if word[0] > "~" else [word]
        out.update(pairs or [word])
    return out


def _covers(query: str, document: str) -> bool:
    """A document is about the query when it holds half of its words, at least: a search
    engine's hit on one common word ("best" in "the method works best") is not."""
    words = _words(query)
    text = canonical_text(document)
    return bool(words) and 2 * sum(w in text for w in words) >= len(words)


def _restricted(ctx: CheckContext, allowed: list[str]) -> Fallback | None:
    call = ctx.assertion.tool_call
    if call is None:
        return None
    args = {**call.arguments, "domains": allowed}
    return Fallback(
        kind="restrict_domains",
        tool_call=call.model_copy(update={"arguments": args}),
        note=ctx.msg("restricted"),
    )
