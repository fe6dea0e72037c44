"""Text helpers shared by checks: language, terms, versions, statuses, concepts.

Chinese has no spaces, so "terms" of Chinese text are character bigrams; English terms
are lowercased words. A small bilingual concept table lets 数据集 match "dataset", so a
claim in Chinese can be checked against a message written in English.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lingyi._regex import lazy_re

_CJK = lazy_re(r"[\u3400-\u9fff]")
_CJK_RUN = lazy_re(r"[\u3400-\u9fff]+")
_WORD = lazy_re(r"[A-Za-z][A-Za-z0-9_\-]*")
# Versions (v0.16, 1.2.3) and ids of things (exp-37, PR-12): a relay must keep them exact.
_VERSION = lazy_re(
    r"(?<![A-Za-z0-9.])[vV](\d+(?:\.\d+){0,2})(?![\d.]*\d)|(?<![\d.])(\d+\.\d+\.\d+)(?![\d.])"
)

EN_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "has",
        "have",
        "had",
        "that",
        "this",
        "it",
        "its",
        "with",
        "by",
        "from",
        "as",
        "me",
        "us",
        "we",
        "i",
        "you",
        "he",
        "she",
        "they",
        "them",
        "my",
        "our",
        "your",
        "his",
        "her",
        "their",
        "told",
        "said",
        "says",
        "about",
        "there",
        "than",
        "then",
        "so",
        "just",
        "also",
        "very",
    ]
)
ZH_STOP_CHARS = frozenset("的了是在有和与及或也都就还又而中对于把被说我你他她它们这那个一些")
# Words that say when or how sure, not what: they never make two texts about the same thing.
# Words that say when or how sure, not what, and negations (whether work is done is
# compared by status(), not by shared words). They never make two texts about one thing.
ZH_FILLER = lazy_re("目前|现在|已经|还在|当前|仍然|依然|一直|刚刚|最近|没有|尚未|还没|并未|不是")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def lang_of(text: str) -> str:
    """'zh' when CJK characters outnumber Latin words, else 'en' ("the 道家 collection" is en)."""
    return "zh" if len(_CJK.findall(text)) >= max(1, len(_WORD.findall(text))) else "en"


def bigrams(text: str) -> set[str]:
    """CJK character bigrams, without filler words and function-character-only pairs."""
    out: set[str] = set()
    stop = ZH_STOP_CHARS
    for run in _CJK_RUN.findall(ZH_FILLER.sub(" ", text)):
        if len(run) == 1:
            if run not in stop:
                out.add(run)
            continue
        # a pair is dropped only when both of its characters are function characters
        out.update(
            run[i : i + 2]
            for i in range(len(run) - 1)
            if run[i] not in stop or run[i + 1] not in stop
        )
    return out


_NUMBER = lazy_re(r"\d+(?:[.,]\d+)*%?")


_ZH_DATE = lazy_re(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")


def neutral_terms(text: str) -> set[str]:
    """Numbers, versions and ids: what a text says the same way in any language.

    A Chinese date keeps only its day (10月3日 ~ "3 Oct"): month names are words in English.
    """
    text = _ZH_DATE.sub(r" \2 ", text)
    numbers = {n.replace(",", "").rstrip("%") for n in _NUMBER.findall(text)}
    return numbers | versions(text)


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in EN_STOP and len(w) > 2}


def content_query(text: str) -> str:
    """A search query of the text's content: CJK runs and English words that are not stopwords."""
    latin = [w for w in _WORD.findall(text) if w.lower() not in EN_STOP and len(w) > 2]
    return " ".join(_CJK_RUN.findall(text) + latin)


def terms(text: str) -> set[str]:
    """Bigrams, English words and concept ids: what two texts can share."""
    return bigrams(text) | words(text) | {f"@{c}" for c in concepts(text)}


_THING_ID = lazy_re(
    r"(?<![A-Za-z0-9_.\-])(?!(?:week|day|month|year|sprint|quarter|phase|step|page)-)"
    r"([A-Za-z]{1,12}-\d+|#\d+)(?!\d|\.\d)",
    re.IGNORECASE,
)
_EDITION = lazy_re(r"第\s*(\d+)\s*版|\bversion\s+(\d+(?:\.\d+){0,2})\b", re.IGNORECASE)


def versions(text: str) -> set[str]:
    """Versions without the leading v ('v0.16' -> '0.16') and ids of things ('exp-37')."""
    found = {a or b for a, b in _VERSION.findall(text)}
    found |= {a or b for a, b in _EDITION.findall(text)}
    return found | {m.lower() for m in _THING_ID.findall(text)}


# One row per concept: its Chinese and English surface forms (English as stems).
_CONCEPTS: dict[str, tuple[str, ...]] = {
    "audit": ("审计", "audit"),
    # Shipping, releasing and going live are one thing to a relay ("it ships" = 上线).
    "release": (
        "发布",
        "发版",
        "上线",
        "部署",
        "release",
        "ship",
        "deploy",
        "launch",
        "go live",
        "went live",
        "is out",
        "are out",
        "rolled out",
        "went out",
        "is live",
        "now live",
        "already live",
        "live on",
        "tag",  # 打 tag, tagged: a tag marks a release
    ),
    "delete": ("删除", "删掉", "delete", "removed"),
    "dataset": ("数据集", "dataset", "data set"),
    "label": ("标注", "label", "annotat"),
    "report": ("报告", "report"),
    "kb": ("知识库", "knowledge base", "kb ", " kb"),
    "rebuild": ("重建", "重新构建", "rebuil", "reindex"),
    "train": ("训练", "train"),
    "test": ("测试", "test"),
    "review": ("评审", "审查", "审核", "review"),
    "security": ("安全", "security"),
    "merge": ("合并", "merge"),
    "fix": ("修复", "fix", "bug"),
    "model": ("模型", "model"),
    "accuracy": ("准确率", "精度", "accuracy"),
    "experiment": ("实验", "experiment", "a/b"),
    "commit": ("提交", "commit"),
    "branch": ("分支", "branch"),
    "migration": ("迁移", "migrat"),
    "backup": ("备份", "backup"),
    "meeting": ("会议", "开会", "议事会", "例会", "周会", "meeting", "standup", "stand-up"),
    "import": ("导入", "导进", "import", "ingest"),
    # Days are how council messages date things; they compare across languages.
    "monday": ("周一", "星期一", "monday"),
    "tuesday": ("周二", "星期二", "tuesday"),
    "wednesday": ("周三", "星期三", "wednesday"),
    "thursday": ("周四", "星期四", "thursday"),
    "friday": ("周五", "星期五", "friday"),
    "saturday": ("周六", "星期六", "saturday"),
    "sunday": ("周日", "星期日", "周天", "sunday"),
    "cleaning": ("清洗", "清理数据", "clean"),
    "cancel": ("取消", "cancel"),
    "approve": ("批准", "同意了", "approve"),
}


_PATHLIKE = lazy_re(r"[\w.\-]+/[\w./\-]+")


@lru_cache(maxsize=4096)
def concepts(text: str) -> frozenset[str]:
    lower = _PATHLIKE.sub(" ", text.lower())  # release/2.4 names a branch, not a release
    return frozenset(c for c, forms in _CONCEPTS.items() if any(f in lower for f in forms))


_NOT_DONE = lazy_re(
    r"尚未|还没|还未|没有完成|未完成|暂缓|推迟|延期|延后|进行中|正在|等待|待定|搁置|取消|失败|"
    r"未开始|没开始|暂停|未能|没能|不会|没有?(?:修|做|完|开始|发布|合并|上线|通过)|"
    r"\b(?:have|has|had) not\b|"
    r"\bnot (?:yet )?(?:done|finished|complete|started|released|shipped)|\bpending\b|postponed|"
    r"\b(?:isn'?t|aren'?t|wasn'?t|weren'?t)(?: yet)? (?:done|finished|complete|completed|ready|over|out)|"
    r"delayed|on hold|in progress|paused|blocked|cancell?ed|\bfailed\b|hasn'?t|has not|"
    r"haven'?t|waiting|not started",
    re.IGNORECASE,
)
_DONE = lazy_re(
    r"已完成|完成了|已经完成|已经.{0,6}完|做完|搞定|已发布|发布了|已上线|上线了|已合并|合并了|"
    r"已结束|结束了|已通过|通过了|完工|已修复|修复了|完毕|已重建|重建了|"
    r"\b(?:is|are) out\b|"
    r"\b(?:is|are|was|were|been|got)? ?(?:done|finished|completed?|shipped|released|merged|"
    r"deployed|rebuilt|passed|fixed|launched)\b",
    re.IGNORECASE,
)


def status(text: str) -> str | None:
    """'done', 'not_done' or None: what the text says about the state of the work."""
    if _NOT_DONE.search(text):
        return "not_done"
    return "done" if _DONE.search(text) else None
