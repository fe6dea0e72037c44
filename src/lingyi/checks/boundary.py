"""boundary: topics a member must not touch, and the scope of domains it serves.

Medical advice is recognised by intent, not by single keywords: a request for a drug
(吃什么药, "what medicine should I take"), or a treatment verb aimed at a health
condition (能治好失眠吗, "how to treat a fever"). 故障诊断 has 诊断 but no health
condition; 治大国若烹小鲜 has 治 but no illness; so both pass.

Domains are recognised from what a text is about, through multi-character terms per
domain (太极拳 is 武, 四圣谛 is 释); single characters never count (知道 is not 道).
"""

from __future__ import annotations

import re
from functools import lru_cache

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
from lingyi.text._lang import has_cjk

_HEALTH_ZH = (
    "头痛|头疼|偏头痛|失眠|发烧|发热|感冒|咳嗽|高血压|低血压|糖尿病|癌症|肿瘤|抑郁症|焦虑症|焦虑|抑郁|"
    "胃痛|胃疼|腹泻|便秘|过敏|哮喘|关节炎|湿疹|痛风|心脏病|中风|失智|月经|痛经|不孕|阳痿|炎症|感染|"
    "[\u4e00-\u9fff]{1,3}(?:病|症|炎|癌)|病情|病人|患者|症状|疼痛|身体不适|"
    "(?:牙|头|胃|腹|肚子|腰|背|颈|脖子|肩|膝盖?|腿|脚|关节|胸|喉咙|嗓子|眼睛|耳朵)(?:疼|痛)"
)
_HEALTH_EN = (
    r"fever|headache|migraine|insomnia|cancer|tumou?r|diabetes|hypertension|blood pressure|flu|"
    r"cough|asthma|arthritis|depression|anxiety disorder|infection|allerg\w*|disease|illness|"
    r"symptoms?|pain|injur\w*|sore throat|covid|rash|nausea|diarrh\w*"
)
_NOT_HEALTH = re.compile(r"毛病|语病|通病|弊病|心病难医之外|大城市病|拖延症")

_REPLACE_CARE = re.compile(
    r"(?:代替|替代|取代|不用|停掉?|停用|停服|减掉|减量|放弃)(?:化疗|放疗|手术|透析|打针|输液|吃药|服药|药物|就医|看病|看医生|治疗)|"
    r"(?:代替|替代|取代|停掉?|停用|停服|减掉|减量|不吃)[\u4e00-\u9fff]{0,5}?药|"
    r"\b(?:instead of|replace|stop taking|stop|quit|skip|come off|go off)\s+"
    r"(?:my |his |her |their |your |the )?(?:\w+ ){0,2}(?:chemo\w*|radiation|surgery|dialysis|"
    r"medications?|medicines?|meds|pills|drugs|insulin|treatments?|antidepressants?|thinners?|"
    r"statins?|antibiotics?|painkillers?)\b",
    re.IGNORECASE,
)
_DRUG_REQUEST = re.compile(
    r"(?:吃|开|用|服|买|打|喝)(?:点|些)?(?:什么|啥|哪种|哪些|哪个)(?:药|中药|西药|药物|抗生素)|"
    r"(?:药方|偏方|处方|剂量|用药|服药|吃药)|"
    r"what (?:medicine|medication|drugs?|pills?|antibiotics?)|what (?:should|can|do) I take (?:for|when|if|to treat)\b|"
    r"\b(?:dosage|dose of|prescri\w+|which (?:medicine|drug))\b",
    re.IGNORECASE,
)
_TREAT_ZH = re.compile(
    rf"(?:治好|治愈|根治|治疗|医治|缓解|调理|治)(?:.{{0,8}})?(?:{_HEALTH_ZH})|"
    rf"(?:{_HEALTH_ZH}).{{0,10}}(?:穴位|偏方|管用|最有效)|"
    rf"(?:{_HEALTH_ZH}).{{0,6}}(?:(?:怎么|如何|怎样|咋)(?:治|办|退|缓解|调理|止|消|好)|治得好|能治|吃什么)|"
    r"(?:能|可以|能不能|可不可以)(?:治好|治愈|根治|医好)[^，。,.]{1,12}(?:吗|么|嘛|？|\?)"
)
_DRUGS = (
    r"布洛芬|阿司匹林|对乙酰氨基酚|抗生素|头孢|安眠药|退烧药|止痛药|激素|"
    r"ibuprofen|aspirin|paracetamol|acetaminophen|antibiotics?|painkillers?|sleeping pills?|steroids?"
)
_DRUG_FOR = re.compile(
    rf"(?:{_DRUGS}).{{0,30}}(?:{_HEALTH_ZH}|\b(?:{_HEALTH_EN})\b)|(?:{_HEALTH_ZH}).{{0,10}}(?:{_DRUGS})",
    re.IGNORECASE,
)
_TREAT_EN = re.compile(
    rf"\b(?:good|helpful|safe|ok|okay|bad|useful|effective) for (?:my |your |his |her |a |the )?"
    rf"(?:\w+ ){{0,2}}(?:{_HEALTH_EN})s?\b|"
    rf"\b(?:treat|treating|treatment for|cure|cures|curing|heal|remedy|remedies|relieve|get rid of|"
    rf"medicine for)\b.{{0,40}}\b(?:{_HEALTH_EN})s?\b|\b(?:{_HEALTH_EN})s?\b.{{0,30}}\b(?:treatment|cure|remedy)\b",
    re.IGNORECASE,
)


def medical_signal(text: str) -> str | None:
    """The phrase that makes ``text`` a request for medical advice, or None."""
    cleaned = _NOT_HEALTH.sub("", text)
    for pattern in (_DRUG_REQUEST, _DRUG_FOR, _REPLACE_CARE, _TREAT_ZH, _TREAT_EN):
        if match := pattern.search(cleaned):
            return match.group(0)
    return None


class BoundaryParams(CheckParams):
    fields: list[str] = []
    # The member's own referral, per language ({zh = "…", en = "…"}); the catalog's otherwise.
    referral: PerLanguage = {}


@register("boundary.medical", BoundaryParams)
def medical(ctx: CheckContext, params: BoundaryParams) -> Outcome:
    """No medical advice: drug requests and treatment of health conditions are out of bounds."""
    for text in ctx.texts(params.fields):
        if signal := medical_signal(text):
            return fail(
                ctx.msg("fail", signal=signal),
                in_language(params.referral, ctx.lang) or ctx.msg("referral"),
                signal=signal,
            )
    return ok(ctx.msg("ok"))


class DomainParams(CheckParams):
    fields: list[str] = []
    domains: dict[str, list[str]]
    excluded: list[str] = []


def domains_of(text: str, lexicon: dict[str, list[str]]) -> dict[str, list[str]]:
    """Domains whose terms occur in ``text`` (case-insensitive), with the terms found.

    Chinese terms match anywhere; Latin terms match whole words ("Zen", not "Zendesk"), or as
    stems when they end in ``*`` ("philosoph*").
    """
    found = {
        d: [t.rstrip("*") for t in terms if len(t) > 1 and _term(t).search(text)]
        for d, terms in lexicon.items()
    }
    return {d: t for d, t in found.items() if t}


@lru_cache(maxsize=1024)
def _term(term: str) -> re.Pattern[str]:
    if has_cjk(term):
        return re.compile(re.escape(term))
    body = re.escape(term.rstrip("*"))
    tail = r"\w*" if term.endswith("*") else r"s?\b"
    return re.compile(rf"\b{body}{tail}", re.IGNORECASE)


@register("domain.scope", DomainParams)
def scope(ctx: CheckContext, params: DomainParams) -> Outcome:
    """What the text is about must fall inside the member's domains."""
    texts = ctx.texts(params.fields, content=not params.fields)
    found = domains_of(" ".join(texts), params.domains)
    allowed = [d for d in params.domains if d not in params.excluded]
    if any(d in allowed for d in found):
        return ok(ctx.msg("ok", domains=ctx.msg("sep").join(found)), domains=found)
    names = ctx.msg("sep").join(allowed)
    return fail(
        ctx.msg("fail", domains=names),
        ctx.msg("hint", domains=names),
        _restricted(ctx, allowed),
        domains=found,
    )


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
