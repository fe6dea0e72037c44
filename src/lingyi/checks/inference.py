"""inference: a prediction stated as fact must carry an inference label.

The check reads the canonical text (lingyi.text) with one pass of its lexicon
(``validators/lexicons/inference.toml``: modals, certainty, hedges, metrics, events, times,
bases, plans, negations…) and decides per clause, because a hedge or a label covers the words
near it, not the whole message (the reading is in ``_forecast``). A clause is a forecast
asserted as fact when it holds:

- a strong marker (势必, is bound to), or certainty with a modal (一定会, will definitely);
- a modal with a metric (会超过, will exceed), or with a basis in its sentence (照这个速度);
- a modal with an event (上线, ship) and a time in its sentence, unless it states a plan;
- certainty with a future time (下个月肯定…), or with a day and an outcome not yet done;
- a basis, a time and an outcome without a modal (照这个速度，周五前做完);
- a time and an outcome in a sentence the writer vouches for (mark my words, 事实是) or in a
  text that denies being an inference (这不是推演：…).

Words are read in context: 会 in 会议/读书会 is no modal, "May" after "in" is the month,
没有可能 is certainty rather than a hedge, 上周一 is past, contractions and informal futures
('ll, gonna, going to) are modals. A hedged clause (可能, might) asserts nothing; a question
asks. A label counts in label position: 推演：/Inference: at the start of a clause (after the
speaker's own "灵研：" or "LingFlow here."), or a tag 【推演】/[Inference] anywhere, but not
quoted, negated or taken back; it covers the text from there on, up to a declared fact
(事实是：). What a relay reports in another member's words (lingyi.checks.relays) is left to
communication.on_record; what the speaker adds outside the relayed span is checked here.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import cache, lru_cache

from pydantic import ValidationInfo, field_validator

from lingyi.checks._forecast import (
    NEIGHBOURS,
    Reading,
    Vocabulary,
    groups_of,
    label_words,
    tag,
    tidy,
    vocabulary,
)
from lingyi.checks._registry import (
    CheckContext,
    CheckParams,
    Outcome,
    PerLanguage,
    fail,
    nothing_to_read,
    ok,
    register,
)
from lingyi.checks.relays import find_relays, quoted_spans
from lingyi.models import Fallback
from lingyi.policy import Lexicon, LexiconRef, load_lexicon
from lingyi.text import Hit, TermMatcher, canonical_text
from lingyi.text._lang import lang_of

_PREFIX = {"zh": "【推演】", "en": "Inference: "}
_LEXICON = "lexicons/inference.toml"
# Groups that can hide a forecast of the speaker's own when they sit in a relayed span.
_SUPPRESSING = frozenset({"hedge", "plan", "fact_marker"})

__all__ = ["InferenceParams", "is_inference", "prediction_signal", "read", "starts_with_label"]


class InferenceParams(CheckParams):
    lexicon: LexiconRef = _LEXICON
    # The label words; each counts as a tag (【推演】, [Inference]) or as a prefix (推演：,
    # Inference:). Written as forms ("【推演】") they are read as their words.
    labels: list[str] = ["推演", "推断", "Inference", "Prediction"]
    # The label a fallback puts before the content, by the content's language (a label in
    # label position, so that the relabelled text passes); a policy may override either.
    prefix: PerLanguage = _PREFIX
    # The check that holds relayed words to the council record. A forecast in another member's
    # relayed words is left to it, but only where it runs on the assertion: otherwise a
    # fabricated relay would carry an unlabelled forecast through unchecked.
    relay_check: str = "communication.on_record"

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        words = label_words(info.data.get("labels", []))
        if bad := [p for p in value.values() if not starts_with_label(p, words)]:
            raise ValueError(f"{bad[0]!r} is not a label (labels: {', '.join(words)})")
        return {**_PREFIX, **value}


def starts_with_label(text: str, words: Sequence[str]) -> bool:
    """Does ``text`` open with a label in label position (a fallback prefix must)?"""
    reading = Reading(tidy(canonical_text(text)), (), _no_words(), label_words(words))
    return any(label.covers_from == 0 for label in reading.labels)


def _no_words() -> Vocabulary:
    """A prefix is judged on its form alone: nothing negates or voids it from outside."""
    return Vocabulary(TermMatcher({}), {g: () for g in NEIGHBOURS})


@cache
def _packaged_lexicon() -> Lexicon:
    from lingyi.config import defaults_dir  # the config imports the checks

    return load_lexicon(defaults_dir() / "validators" / _LEXICON)


def read(text: str, lexicon: Lexicon | None = None, labels: Sequence[str] = ()) -> Reading:
    """``text`` (any form: it is made canonical) read for forecasts, labels and hedges."""
    canon, lexicon = tidy(canonical_text(text)), lexicon or _packaged_lexicon()
    words = label_words(labels or _default_labels())
    return Reading(canon, tag(canon, lexicon), vocabulary(lexicon), words)


@cache
def _default_labels() -> tuple[str, ...]:
    """The labels a policy gets by default (read once: building the params is not free)."""
    return tuple(InferenceParams.model_fields["labels"].default)


def is_inference(text: str, labels: list[str] | None = None) -> bool:
    """Labelled as inference, hedged in every sentence, or a prediction: not asserted as fact."""
    reading = read(text, labels=labels or ())
    return bool(reading.labels) or reading.hedged or reading.signal is not None


@lru_cache(maxsize=4096)
def prediction_signal(text: str) -> str | None:
    """The words that make ``text`` a prediction asserted as fact, or None."""
    return read(text).signal


def _relayed_spans(text: str, ctx: CheckContext, hits: list[Hit]) -> list[tuple[int, int]]:
    """What relays report in other members' words, each cut where the speaker takes over
    (灵通说…，所以… / "…, and it will…": the add-on is the speaker's own)."""
    takeovers = sorted(h.start for h in hits if "own_addon" in h.groups)
    spans = []
    for relay in find_relays(text, ctx.policies, ctx.member.id):
        i = bisect_right(takeovers, relay.claim_start)
        end = takeovers[i] if i < len(takeovers) and takeovers[i] < relay.end else relay.end
        spans.append((relay.start, end))
    return spans


def _runs(ctx: CheckContext, check: str) -> bool:
    """Does the member's policy run ``check`` on this assertion?"""
    tool = ctx.assertion.tool_call.name if ctx.assertion.tool_call else None
    return any(e.check == check and e.applies(ctx.assertion.type, tool) for e in ctx.member.checks)


@register("inference.labelled", InferenceParams)
def labelled(ctx: CheckContext, params: InferenceParams) -> Outcome:
    """Predictions and forecasts must be labelled as inference, not asserted as fact."""
    if nothing_to_read(ctx):
        return ok(ctx.msg("no_prediction"))
    text, lexicon = tidy(ctx.canon.text), ctx.lexicon(params.lexicon)
    hits = tag(text, lexicon)
    whole = Reading(text, hits, vocabulary(lexicon), label_words(params.labels))
    if whole.signal is None and not whole.labels and _SUPPRESSING.isdisjoint(groups_of(hits)):
        return ok(ctx.msg("no_prediction"))  # no forecast that a relay could hide or reveal
    relayed = _relayed_spans(text, ctx, hits) if _runs(ctx, params.relay_check) else []
    relayed += quoted_spans(text, ctx.policies)  # quoted, fenced: no one's claim here
    reading = Reading(text, hits, whole.vocabulary, whole.words, relayed) if relayed else whole
    if (signal := reading.signal) is None:
        if reading.labels:
            return ok(ctx.msg("labelled"))
        if whole.signal is not None:
            return ok(ctx.msg("reported_speech"))  # the forecast is the relayed member's words
        return ok(ctx.msg("no_prediction"))
    label = params.prefix[lang_of(ctx.canon.text)]  # both languages: _prefix fills the defaults in
    return fail(
        ctx.msg("fail", signal=signal),
        ctx.msg("hint", label=label.strip()),
        Fallback(kind="relabel", content=label + ctx.assertion.content, note=ctx.msg("relabelled")),
        signal=signal,
    )
