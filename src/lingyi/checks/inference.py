"""inference: a prediction stated as fact must carry an inference label.

A prediction is a modal of the future (会, 将, will) together with an inference basis
(基于趋势, 照这个速度, based on the trend, at this pace), or with a future time (下周,
next week, by Friday) and a forecast outcome (超过, 上线, exceed, ship); strong modals
(一定会, 势必, definitely will) count on their own. A schedule ("the meeting will be held
tomorrow") is not a prediction. 会 inside 会议/社会/机会 is not a modal, and
预测模型 (a forecasting model) is a noun, not a prediction. Hedged statements
(可能, 也许, might, may) are not asserted as fact and pass.
"""

from __future__ import annotations

import re

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
from lingyi.models import AssertionType, Fallback
from lingyi.text._lang import lang_of

_STRONG = re.compile(
    r"一定会|一定能|一定可以|肯定会|肯定能|肯定可以|必然会|必然|势必|必将|必能|注定会|铁定|"
    r"\b(?:will|is going to|are going to)\s+(?:definitely|certainly|surely|undoubtedly)\b|"
    r"\b(?:definitely|certainly|surely|undoubtedly)\s+(?:will|be|going to)\b|"
    r"\b(?:is|are) (?:bound|guaranteed|certain) to\b",
    re.IGNORECASE,
)
_CERTAIN = re.compile(r"肯定|一定|必然|\b(?:definitely|certainly|surely)\b", re.IGNORECASE)
_MODAL_ZH = re.compile(
    r"(?<![社机学开大委协理体领聚工晚例约峰都宴舞博年庙])会(?![议员话长计谈场所晤面客合诊费务])|将会|将要|就能|才能|预计|预期|(?<![大武])将(?=[会要在于能把达超突提降升增完比]|上线|发布)|能够"
)
_MODAL_EN = re.compile(
    r"\b(?:will|won't|is going to|are going to|shall|(?:is|are) (?:set|expected|projected|"
    r"forecast|on track|due) to)\b",
    re.IGNORECASE,
)
_FUTURE = re.compile(
    r"下周|下星期|下个月|下月|明天|后天|明年|下季度|下一季|今年底|年底前|月底前|未来|将来|之后几天|"
    r"下周[一二三四五六日天]|周[一二三四五六日天]前|\d+\s*天[后内]|"
    r"\b(?:tomorrow|next (?:week|month|quarter|year|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)|by (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"tomorrow|the end of|end of|next)|in \d+ (?:days|weeks|months)|soon|later this)\b",
    re.IGNORECASE,
)
_PACE = r"(?:速度|进度|趋势|增长率|增速|节奏|势头)"
_BASIS = re.compile(
    rf"基于.{{0,12}}(?:趋势|数据|规律|进度)|根据.{{0,12}}(?:趋势|规律|进度)|照(?:这个|目前|现在)的?{_PACE}|"
    rf"按(?:照)?(?:这个|目前|现在|当前)的?.{{0,4}}?{_PACE}|从趋势(?:看|来看)|推测|推算|"
    r"\b(?:based on (?:the )?(?:current )?(?:trend|data|pace|rate|numbers|ramp|growth|trajectory)|"
    r"at (?:this|the current) "
    r"(?:pace|rate)|(?:with|given) (?:this|these|the current|the) (?:trend|numbers|figures|data|pace|slope|"
    r"trajectory|growth|rate|ramp)|"
    r"if (?:this|the) trend|if nothing changes|extrapolat\w+|judging by)\b",
    re.IGNORECASE,
)
# A modal with a forecast metric is a prediction on its own (将达到185条, will exceed 0.9);
# a modal with an event (上线, ship) is one only with a future time (a schedule otherwise).
_METRIC = re.compile(
    r"超过|达到|突破|提升|提高|下降|增长|降到|升到|降低|赶上|胜出|跌破|跌到|跌至|比.{0,10}?(?:少|多|高|低)|"
    r"\b(?:exceed|reach|surpass|hit|grow|rise|fall|drop|beat|outperform|win|double|triple|halve|"
    r"decline|increase|decrease|turn (?:negative|positive))\w*|"
    r"\b(?:pass|top|cross)(?:es)? [\d,.]+",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"完成|做完|上线|发布|交付|"
    r"\b(?:finish|be (?:done|finished|ready|\w+ed)|ship|launch|go live|release)\w*",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"可能|也许|或许|大概|估计|有望|\b(?:might|may|could|likely|probably|perhaps)\b", re.IGNORECASE
)
_NOUNS = re.compile(
    r"预测模型|预测任务|预测结果已|forecasting model|prediction model|forecast model", re.IGNORECASE
)


_PREFIX = {"zh": "【推演】", "en": "Inference: "}


class InferenceParams(CheckParams):
    labels: list[str] = [
        "【推演】",
        "【推断】",
        "推演：",
        "推断：",
        "[推演]",
        "Inference:",
        "[Inference]",
        "Prediction:",
    ]
    # The label a fallback puts before the content, by the content's language (one of
    # ``labels``, so that the relabelled text passes); a policy may override either.
    prefix: PerLanguage = _PREFIX

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        labels = info.data.get("labels", [])
        if bad := [p for p in value.values() if not has_label(p, labels)]:
            raise ValueError(f"{bad[0]!r} contains none of the labels ({', '.join(labels)})")
        return {**_PREFIX, **value}


def prediction_signal(text: str) -> str | None:
    """The phrase that makes ``text`` a prediction asserted as fact, or None."""
    text = _NOUNS.sub(" ", text)
    if _HEDGE.search(text):
        return None
    if strong := _STRONG.search(text):
        return strong.group(0)
    if (sure := _CERTAIN.search(text)) and (when := _FUTURE.search(text)):
        return f"{when.group(0)} … {sure.group(0)}"  # 下个月肯定还是第一
    modal = _MODAL_ZH.search(text) or _MODAL_EN.search(text)
    if modal is None:
        return None
    # A future time alone may be a schedule ("the meeting will be held tomorrow"); with an
    # event it is a forecast. A stated basis (趋势, at this pace) or a metric always is.
    future = _FUTURE.search(text) if _EVENT.search(text) else None
    cue = _BASIS.search(text) or _METRIC.search(text) or future
    return f"{cue.group(0)} … {modal.group(0)}" if cue else None


def _reported_speech(ctx: CheckContext) -> bool:
    from lingyi.checks.communication import find_claim  # communication imports policy types

    if ctx.assertion.type is not AssertionType.COMMUNICATION:
        return False
    return find_claim(ctx.assertion.content, ctx.policies, ctx.member.id, speech=True) is not None


def is_inference(text: str, labels: list[str] | None = None) -> bool:
    """Labelled as inference, hedged (可能, might), or a prediction: not asserted as fact."""
    labels = labels or InferenceParams().labels
    hedged = _HEDGE.search(_NOUNS.sub(" ", text)) is not None
    return has_label(text, labels) or hedged or prediction_signal(text) is not None


def has_label(text: str, labels: list[str]) -> bool:
    return any(label.lower() in text.lower() for label in labels)


@register("inference.labelled", InferenceParams)
def labelled(ctx: CheckContext, params: InferenceParams) -> Outcome:
    """Predictions and forecasts must be labelled as inference, not asserted as fact."""
    content = ctx.assertion.content
    if has_label(content, params.labels):
        return ok(ctx.msg("labelled"))
    signal = prediction_signal(content)
    if signal is None:
        return ok(ctx.msg("no_prediction"))
    if _reported_speech(ctx):  # 灵通说下周会上线: the forecast is the quoted member's own
        return ok(ctx.msg("reported_speech"))
    label = params.prefix[lang_of(content)]  # both languages: _prefix fills the defaults in
    return fail(
        ctx.msg("fail", signal=signal),
        ctx.msg("hint", label=label.strip()),
        Fallback(kind="relabel", content=label + content, note=ctx.msg("relabelled")),
        signal=signal,
    )
