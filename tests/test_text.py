"""The canonical text: every obfuscation a model might choose reaches the same form.

Checks match on ``canonical(...).text``; a rewrite that changes only how a text looks
(script, width, invisible characters, entities, look-alike letters, split names, case)
must give the plain form, and genuine text must come out as it went in.
"""

from __future__ import annotations

import pytest

from lingyi.text import canonical, canonical_text, extract_urls, normalize_url

NAMES = ("灵依", "灵知", "灵通", "灵研", "LingYi", "LingZhi", "LingFlow", "LingResearch", "LingYan")

REWRITES = [
    # (hostile rewrite, canonical text, a step that must be reported)
    ("靈通說v0.17已經發布了", "灵通说v0.17已经发布了", "traditional"),
    ("失眠吃什麼藥", "失眠吃什么药", "traditional"),
    ("根據趨勢，下週會上線", "根据趋势,下周会上线", "traditional"),
    ("灵\u200b通说v0.17已发布", "灵通说v0.17已发布", "format_characters"),
    ("吃什\u2060么药", "吃什么药", "format_characters"),
    ("Ling\u200dFlow told me it shipped", "lingflow told me it shipped", "format_characters"),
    ("med\ufeffication for a fever", "medication for a fever", "format_characters"),
    ("ＬｉｎｇＦｌｏｗ said ｖ０.１７ shipped", "lingflow said v0.17 shipped", "nfkc"),
    ("ＫＢ ｈａｓ ａｎ ａｒｔｉｃｌｅ", "kb has an article", "nfkc"),
    ("LіngFlow told me", "lingflow told me", "look_alikes"),  # Cyrillic і
    ("what mеdicine should I take", "what medicine should i take", "look_alikes"),  # Cyrillic е
    ("&#28789;&#36890;说完成了", "灵通说完成了", "html"),
    ("LingFlow &amp; LingZhi said", "lingflow & lingzhi said", "html"),
    ("&amp;#28789;&amp;#36890;说", "灵通说", "html"),  # entities encoded twice
    ("灵 通说审计完成", "灵通说审计完成", "cjk_spacing"),
    ("灵·通说审计完成", "灵通说审计完成", "names"),
    ("灵 . 通说", "灵通说", "names"),
    ("Ling-Flow said it's done", "lingflow said it's done", "names"),
    ("L.i.n.g.F.l.o.w told me", "lingflow told me", "names"),
    ("INFERENCE: it ships Monday", "inference: it ships monday", ""),
    ("推演：下周上线", "推演:下周上线", "nfkc"),  # full-width colon: lexicons are canonical too
]


@pytest.mark.parametrize(("rewrite", "expected", "step"), REWRITES)
def test_hostile_rewrites_reach_the_plain_form(rewrite: str, expected: str, step: str) -> None:
    """Each obfuscation is undone, and the step that undid it is recorded."""
    found = canonical(rewrite, NAMES)
    assert found.text == expected
    assert found.original == rewrite
    if step:
        assert step in found.changes


GENUINE = [
    "灵通说v0.16审计已经完成",
    "Σωκράτης and λόγος",  # real Greek words keep their letters
    "café au lait, naïve résumé",
    "治大国若烹小鲜",
    "the flow of qi in 八段锦",
    "Lingering doubts, a flow chart",  # not a member name
    "A&B testing, 3 < 4",
]


@pytest.mark.parametrize("text", GENUINE)
def test_genuine_text_is_left_as_it_is(text: str) -> None:
    """Text with nothing to undo comes out unchanged but for English case."""
    found = canonical(text, NAMES)
    assert found.text == text.casefold()
    assert not found.obfuscated


def test_invisible_characters_inside_words_are_counted() -> None:
    """A zero-width character inside a word is itself a signal (a warn code uses it)."""
    assert canonical("灵\u200b通说", NAMES).hidden == 1
    assert canonical("Ling\u2060Fl\u200bow", NAMES).hidden == 2
    assert canonical("end.\u200b", NAMES).hidden == 0  # between a word and the end: not inside
    assert canonical("LіngFlow", NAMES).mixed == ("LіngFlow",)


def test_lexicon_terms_and_texts_meet_in_one_form() -> None:
    """A term written in full-width or traditional form matches a text in any form."""
    assert canonical_text("推演：") in canonical_text("【推演】推演：下週會上線")
    assert canonical_text("吃什麼藥") == canonical_text("吃什么药")


URLS = [
    ("see HTTPS://WWW.Example.org:443/a/b/#top, thanks", "https://example.org/a/b"),
    ("见（https://kb.example.org/qg-001）。", "https://kb.example.org/qg-001"),
    ("[气功源流](https://kb.example.org/qg-001)", "https://kb.example.org/qg-001"),
    ("https://en.wikipedia.org/wiki/Foo_(bar).", "https://en.wikipedia.org/wiki/Foo_(bar)"),
    ("http://example.org:80/x?q=1", "http://example.org/x?q=1"),
]


@pytest.mark.parametrize(("text", "normal"), URLS)
def test_urls_are_found_and_normalised(text: str, normal: str) -> None:
    """URLs are found in any case and punctuation, and compared in one normal form."""
    urls = extract_urls(canonical(text).cased)
    assert len(urls) == 1
    assert normalize_url(urls[0]) == normal


def test_url_normal_form_keeps_what_makes_a_different_page() -> None:
    """Path, query and scheme still distinguish two URLs; host case, www., slash do not."""
    same = normalize_url("https://www.KB.example.org/qg-001/")
    assert same == normalize_url("https://kb.example.org/qg-001")
    assert same != normalize_url("https://kb.example.org/qg-002")
    assert same != normalize_url("http://kb.example.org/qg-001")
    assert normalize_url("https://kb.example.org/a?x=1") != normalize_url(
        "https://kb.example.org/a?x=2"
    )
    assert normalize_url("https://kb.example.org/Path") != normalize_url(
        "https://kb.example.org/path"
    )


MATCHER_GROUPS = {
    "道": ["道家", "太极图", "Daois*", "Tao Te Ching"],
    "武": ["太极拳", "tai chi", "咏春"],
    "释": ["Zen", "禪宗"],  # a traditional term still matches simplified text
}

TERMS = [
    ("太极拳与太极图", {"武": ["太极拳"], "道": ["太极图"]}),
    ("Zendesk is not Zen", {"释": ["zen"]}),
    ("a Daoist and Daoism", {"道": ["daoist", "daoism"]}),
    ("THE TAO TE CHING", {"道": ["tao te ching"]}),
    ("禅宗 and 詠春", {"释": ["禅宗"], "武": ["咏春"]}),
    ("taichi studio", {}),  # a Latin term is a whole word
    ("daoi", {}),  # a stem must be complete
]


@pytest.mark.parametrize(("text", "groups"), TERMS)
def test_terms_are_found_in_one_pass_on_canonical_text(
    text: str, groups: dict[str, list[str]]
) -> None:
    """Chinese terms anywhere, Latin ones as whole words or stems, in any script or case."""
    from lingyi.text import TermMatcher

    assert TermMatcher(MATCHER_GROUPS).groups(canonical_text(text)) == groups


NUMERALS = [
    ("灵研说一万二千四百个样本", "灵研说12400个样本"),
    ("准确率百分之八十七点四", "准确率87.4%"),
    ("发布推迟到七月十五日", "发布推迟到7月15日"),
    ("发现两个中危问题", "发现2个中危问题"),
    ("二〇二六年", "2026年"),
    ("一些问题一直存在，统一口径", "一些问题一直存在，统一口径"),  # words, not quantities
    ("两点二十开会", "2:20开会"),  # a clock time, not 2.210
    ("下午三点十五分到", "下午3:15到"),
    ("十点四十五", "10:45"),
    ("得分八十七点四分", "得分87.4分"),  # a decimal: 87 is no hour
    ("没有一个问题", "没有一个问题"),  # none, not one
    ("审计没发现一个漏洞", "审计没发现一个漏洞"),
    ("发现一个问题", "发现1个问题"),
]


@pytest.mark.parametrize(("text", "arabic"), NUMERALS)
def test_chinese_numerals_that_are_quantities_are_read(text: str, arabic: str) -> None:
    """Quantities in Chinese numerals become digits; words that contain 一 stay words."""
    from lingyi.text import arabic_numerals

    assert arabic_numerals(text) == arabic


def test_entities_agree_across_languages_and_notations() -> None:
    """12,400 = 一万二千四百 = 12.4k; 87.4% = 0.874; 7月15日 = July 15; v3 is not v4."""
    from lingyi.text import Entities, entities

    def of(text: str) -> Entities:
        return entities(canonical_text(text))

    zh, en = (
        of("数据集 v3 有一万二千四百个样本，准确率百分之八十七点四，7月15日"),
        of("Dataset v3: 12.4k samples, accuracy 0.874, on July 15"),
    )
    assert zh.values & en.values >= {12400}
    assert any(float(v) == 0.874 for v in zh.values)
    assert zh.dates == en.dates == {"07-15"}
    assert zh.versions == en.versions == {"3"}
    assert of("《孟子》导读 exp-37").titles == {"孟子"}
    assert of("《孟子》导读 exp-37").ids == {"exp-37"}
