"""Domain scope: what a search is about, in any language or script, from lexicon files.

Rows are written fresh for these tests (no query of a labelled set). Each of the nine
domains has queries that must be in scope in Chinese, traditional script, English, pinyin
and by proper names; each look-alike family (an editor's "zen mode", a film, a product, a
price, a rent) must be out of scope, and must stay in scope when a real domain term stands
beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lingyi.checks.boundary import domains_of
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import Lexicon, PolicySet, load_policies
from lingyi.text import canonical_text
from tests.conftest import SHIPPED_POLICIES, Verify

DOMAINS = ["儒", "释", "道", "医", "武", "心", "哲", "科", "气"]


@pytest.fixture(scope="module")
def lexicon(policies: PolicySet) -> Lexicon:
    return policies.lexicon("lexicons/domains.toml")


def found(query: str, lexicon: Lexicon) -> set[str]:
    return set(domains_of(canonical_text(query), lexicon, DOMAINS))


IN_SCOPE = [
    # 医 as culture and history: court physicians, herbal tea shops
    ("明代御医的选拔制度", "医"),
    ("The imperial physicians of the Qing court", "医"),
    ("岭南凉茶铺的文化史", "医"),
    # 儒
    ("董仲舒与天人感应", "儒"),
    ("Zengzi and the Classic of Filial Piety", "儒"),
    ("mengzi xingshan lun", "儒"),
    # 释
    ("鳩摩羅什的譯經事業", "释"),
    ("Nagarjuna's Madhyamaka and the two truths", "释"),
    ("Bodhidharma's wall-gazing at Songshan", "释"),
    # 道
    ("《列子》中的御风而行", "道"),
    ("Zhuang Zhou and the debate on the happiness of fish", "道"),
    ("Dào Dé Jīng chapter sixteen", "道"),
    # 医
    ("皇甫謐與《針灸甲乙經》", "医"),
    ("the Divine Farmer's tasting of a hundred herbs", "医"),
    ("Huangdi Neijing Suwen on the four seasons", "医"),
    # 武
    ("八极拳与李书文", "武"),
    ("Sun Lutang and the fusion of Xingyi and Bagua", "武"),
    ("Ving Tsun lineage in Foshan", "武"),
    # 心
    ("《傳習錄》中的心即理", "心"),
    ("Lu Xiangshan on the original mind", "心"),
    ("mindfulness-based stress reduction research", "心"),
    # 哲
    ("公孙龙的白马非马", "哲"),
    ("Spinoza's monism and Leibniz's monads", "哲"),
    ("Mohist logic and the School of Names", "哲"),
    # 科
    ("《天工开物》与明代工艺", "科"),
    ("Zhang Heng's seismograph and Han astronomy", "科"),
    ("Popper vs Kuhn on theory change", "科"),
    # 气
    ("六字诀的呼吸方法", "气"),
    ("zhan zhuang standing practice and the dantian", "气"),
    ("Yi Jin Jing tendon-changing classic", "气"),
]


@pytest.mark.parametrize(("query", "domain"), IN_SCOPE)
def test_each_domain_in_every_language_and_by_name(
    lexicon: Lexicon, query: str, domain: str
) -> None:
    """Chinese, traditional, English, pinyin (with or without tones) and proper names count."""
    assert domain in found(query, lexicon)


OUT_OF_SCOPE = [
    # a look-alike is the whole subject
    "enable zen mode in the markdown editor",
    "Kung Fu Panda sequel voice cast",
    "功夫熊猫的配音演员",
    "buddha bowl with quinoa and chickpeas",
    "Nirvana unplugged album vinyl reissue",
    "AMD Zen 4 laptop battery life",
    "business logic layer refactoring",
    "physics engine for a 2D platformer",
    "打太极式的推诿怎么应对",
    "营销套路大全",
    # an everyday subject named with a domain word
    "tai chi studio monthly rent in Austin",
    "Shaolin show tickets in Zhengzhou",
    "太极拳服装价格",
    "八段锦视频下载",
    "Tao Te Ching phone wallpaper",
    "Wing Chun movie box office",
    # a domain word put in front of an everyday query does not make it a study
    "孔子 附近好吃的火锅店",
    "Laozi quotes, then the NBA playoffs schedule",
    # single characters never make a domain
    "我想知道今晚的末班车",
    "高速道路施工通知",
]


@pytest.mark.parametrize("query", OUT_OF_SCOPE)
def test_lookalikes_and_everyday_subjects_are_out(lexicon: Lexicon, query: str) -> None:
    """A film, a product, an editor mode, a price or a rent is not what the domains cover."""
    assert found(query, lexicon) == set()


BESIDE = [
    ("zen mode versus zazen: what the word borrowed", "释"),
    ("功夫熊猫里的道家思想", "道"),
    ("the box office history of kung fu cinema", "武"),
    ("唐代寺院的租金收入与佛教经济史", "释"),
    ("the delivery of the Platform Sutra sermon", "释"),
    ("scores of monks at the Shaolin Temple in the Ming", "武"),
]


@pytest.mark.parametrize(("query", "domain"), BESIDE)
def test_a_real_domain_term_beside_a_lookalike_keeps_the_query_in(
    lexicon: Lexicon, query: str, domain: str
) -> None:
    """A look-alike cancels only itself; study of an everyday subject stays in scope."""
    assert domain in found(query, lexicon)


def search(query: str, **extra: Any) -> dict[str, Any]:
    return {"name": "search_knowledge", "arguments": {"query": query, **extra}}


@pytest.mark.parametrize(
    ("query", "declared", "decision"),
    [
        ("Zen garden rake set discount", ["释"], "rejected"),  # the declared domain is no proof
        ("Guanyin worship along the Silk Road", None, "approved"),
        ("觀音信仰與絲綢之路", None, "approved"),
    ],
)
def test_the_query_decides_not_the_declared_domains(
    verify: Verify, query: str, declared: list[str] | None, decision: str
) -> None:
    """The caller's ``domains`` argument restricts a search; it never puts a query in scope."""
    extra = {"domains": declared} if declared else {}
    result = verify(
        member="lingzhi", type="action", content="检索", tool_call=search(query, **extra)
    )
    assert result.decision == decision, result.reason
    if decision == "rejected":
        assert "domain.scope" in result.failed_codes
        assert "儒" in (result.recommendation or "")


def test_the_shipped_domains_are_groups_of_the_lexicon(policies: PolicySet) -> None:
    """Every domain 灵知's policy names has terms, none a single Chinese character."""
    entry = next(c for c in policies.members["lingzhi"].checks if c.check == "domain.scope")
    params: Any = entry.parsed
    lexicon = policies.lexicon(params.lexicon)
    assert params.domains == DOMAINS
    for domain in params.domains:
        terms = lexicon.terms(domain)
        assert len(terms) > 30, domain
        assert not [t for t in terms if len(t) == 1], domain


def test_adding_a_term_is_a_data_edit(tmp_path: Path) -> None:
    """A new name in domains.toml puts a query in scope, without a code change."""
    folder = tmp_path / "validators"
    (folder / "lexicons").mkdir(parents=True)
    for path in SHIPPED_POLICIES.rglob("*.toml"):
        target = folder / path.relative_to(SHIPPED_POLICIES)
        target.write_bytes(path.read_bytes())
    query = search("Tongbeiquan of Qi Xin")

    def decide(policies: PolicySet) -> str:
        layer = ConstraintLayer(policies, MemoryCouncil())
        assertion = Assertion(member="lingzhi", type="action", content="检索", tool_call=query)
        return layer.verify(assertion, Ledger()).decision

    assert decide(load_policies(folder)) == "rejected"
    lexicon = folder / "lexicons" / "domains.toml"
    text = lexicon.read_text(encoding="utf-8")
    lexicon.write_text(text.replace('"wushu",', '"wushu", "tongbeiquan",', 1), encoding="utf-8")
    assert decide(load_policies(folder)) == "approved"


# --- reproducible reasons: the same output in every process ------------------------------

SEEDED = [
    # (language, query, the domains its reason lists, in the policy's order); 站桩 and 五禽戏
    # are terms of two domains, whose order followed the hash seed; the last row is out of scope
    ("zh", "站桩的要领", "武、气"),
    ("zh", "五禽戏与中医养生", "医、气"),
    ("en", "qigong breathing and tai chi history", "武, 气"),
    ("en", "the best pizza in Rome", None),
]


def _verify_json(tmp_path: Path, language: str, query: str, seed: str) -> str:
    """``lingyi verify --json`` of a search in a fresh process with ``PYTHONHASHSEED=seed``,
    the record's id (which is new each time) replaced by a placeholder."""
    import json
    import os
    import subprocess
    import sys

    config = tmp_path / f"lingyi-{language}.toml"
    config.write_text(
        f'language = "{language}"\n[paths]\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n',
        encoding="utf-8",
    )
    args = [
        "--member",
        "lingzhi",
        "--tool",
        "search_knowledge",
        "--args",
        json.dumps({"query": query}),
    ]
    env = {**os.environ, "PYTHONHASHSEED": seed, "LINGYI_LOG": str(tmp_path / f"log-{seed}.jsonl")}
    done = subprocess.run(
        [sys.executable, "-m", "lingyi", "--config", str(config), "verify", "--json", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    shown = json.loads(done.stdout)
    return done.stdout.replace(shown["record_id"], "<id>").replace(shown["id"], "<id>")


@pytest.mark.parametrize(("language", "query", "listed"), SEEDED)
def test_reasons_are_the_same_under_any_hash_seed(
    tmp_path: Path, language: str, query: str, listed: str | None
) -> None:
    """Two processes with different PYTHONHASHSEED print byte-identical ``verify --json``
    (the record id aside): domain.scope lists a text's domains in the policy's order, not a
    set's, in Chinese and English, in scope and out of it."""
    import json

    first, second = (_verify_json(tmp_path, language, query, seed) for seed in ("0", "2"))
    assert first == second
    scope = next(c for c in json.loads(first)["checks"] if c["code"] == "domain.scope")
    assert scope["passed"] is (listed is not None)
    assert listed is None or listed in scope["reason"]
