"""inference.labelled: a prediction asserted as fact falls back to a labelled version.

The tables are written as an adversary would: every way of stating a forecast (modals, certainty,
contractions, informal futures, a stated basis) in Chinese and English, rewritten in traditional
script, full-width letters, invisible characters, look-alike letters and HTML entities; labels
that are negated, quoted or taken back; hedges that are no hedges. Each table has the look-alikes
that must pass beside it: schedules, meetings, past events, questions, real hedges, labels in
label position, and forecasts that are another member's relayed words.
"""

from __future__ import annotations

import re
from pathlib import Path
from shutil import copytree

import pytest

from lingyi.checks.inference import InferenceParams, is_inference, starts_with_label
from lingyi.config import defaults_dir
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, VerificationResult
from lingyi.policy import PolicySet, load_policies
from tests.conftest import Verify

CODE = "inference.labelled"


def _inference(result: VerificationResult) -> CheckResult:
    return next(c for c in result.checks if c.code == CODE)


def _decide(verify: Verify, content: str, member: str = "lingresearch", kind: str = "fact") -> str:
    result = verify(member=member, type=kind, content=content)
    return "flagged" if not _inference(result).passed else "passes"


# One row per rule of the check, both sides, in both languages (fresh wording throughout).
RULES = [
    # a modal with a metric
    ("索引命中率月底会冲到九成五", "flagged"),
    ("Query latency will fall below 80 ms once the cache warms up.", "flagged"),
    ("这个脚本会把日志打包成一个压缩文件", "passes"),  # a modal, but no metric: what code does
    ("The exporter will write one CSV per tenant.", "passes"),
    # a modal with a basis in the sentence
    ("按眼下的节奏，审校组会提前收工", "flagged"),
    ("Going by the burndown, the docs team will wrap up early.", "flagged"),
    # a modal, an event and a time — unless it is a plan
    ("索引重建礼拜四会完成", "flagged"),
    ("The new search page will go live on Thursday.", "flagged"),
    ("按计划，索引重建将于礼拜四完成", "passes"),
    ("The docs freeze is scheduled for Thursday and will start at noon.", "passes"),
    # certainty with a modal, or with ability and an outcome
    ("审校肯定会拖到下个月", "flagged"),
    ("The reviewers will certainly sign off on the glossary.", "flagged"),
    ("索引重建一定能按时完成", "flagged"),
    ("这个接口肯定可以调用", "passes"),  # certainty about a capability, nothing ahead
    # certainty with a future time, or with a day and an outcome not yet done
    ("下个季度的访问量铁定第一", "flagged"),
    ("Traffic tops the chart again next quarter for certain.", "flagged"),
    ("评审礼拜四一定完成", "flagged"),
    ("评审礼拜四一定完成了吧，我看到了提交记录", "passes"),  # done already: a guess about the past
    # a strong marker alone
    ("旧索引势必被淘汰", "flagged"),
    ("The legacy importer is bound to break on the new schema.", "flagged"),
    # a basis, a time and an outcome without a modal
    ("照现在的速率，礼拜四之前收尾", "flagged"),
    ("At this rate we're shipping the glossary by Thursday.", "flagged"),
    ("At this pace it's launching Thursday.", "flagged"),  # 's is "is" here, not a possessive
    ("Based on the burndown we shipped the glossary last Thursday.", "passes"),  # past
    # vouched for, or denied to be an inference, with a time and an outcome
    ("相信我，礼拜四上线", "flagged"),
    ("Take it from me: the glossary lands Thursday.", "flagged"),
    ("这不是推演：词表礼拜四发版", "flagged"),
    ("这不是推演：词表评审改到礼拜四", "passes"),  # a schedule change, no outcome forecast
    ("索引上线礼拜四，这事稳了", "flagged"),  # certainty in its own clause vouches for the sentence
    ("The index lands Thursday, no two ways about it, for certain.", "flagged"),
    ("稳了，上周四的评审已经完成", "passes"),  # certainty about the past
    # a quantity that will be zero or back down is a forecast; a setting or a schedule is not
    ("The glossary's error count'll be zero by Friday.", "flagged"),
    ("By Friday the queue will be back under 100.", "flagged"),
    ("The glossary review will be at 10 on Friday.", "passes"),
    ("The new page size will be 20 entries from Friday.", "passes"),
    ("评审会到十点才开始吗？", "passes"),  # a question asks
    # events that were missing from the lexicon: passing a review, coming back, rolling out
    ("词表 v2 将于下周通过验收", "flagged"),
    ("By then the new index will have fully rolled out.", "flagged"),
    ("The timeouts will come back next week.", "flagged"),
    ("The new index rolled out last Friday.", "passes"),  # past
    ("上周词表 v2 已经通过验收", "passes"),
]


@pytest.mark.parametrize(("content", "decision"), RULES)
def test_each_rule_flags_its_forecasts_and_passes_its_look_alikes(
    verify: Verify, content: str, decision: str
) -> None:
    """Every rule of the check catches its forecasts, and its nearest look-alike passes."""
    assert _decide(verify, content) == decision


# Contractions and informal futures are predictions; real hedges are not assertions.
INFORMAL_AND_HEDGES = [
    ("The glossary'll be done by Thursday.", "flagged"),
    ("The glossary’ll hit 2,000 entries next week.", "flagged"),
    ("The team's gonna ship the glossary Thursday.", "flagged"),
    ("We're gonna ship the glossary Thursday.", "passes"),  # the speaker's own plan
    ("The glossary is going to double in size next month.", "flagged"),
    ("Signups are set to triple next quarter.", "flagged"),
    ("The queue is on track to run out within two weeks.", "flagged"),
    ("It won't slip past Thursday, I guarantee it.", "flagged"),
    ("We're going to meet at 4 tomorrow to go over the glossary.", "passes"),  # a meeting
    ("I'll send the glossary notes after lunch.", "passes"),
    ("The glossary might ship Thursday.", "passes"),
    ("The glossary could be done by Thursday if review goes well.", "passes"),
    ("词表礼拜四或许能发版", "passes"),
    ("词表礼拜四说不定会发版", "passes"),
    ("词表礼拜四不一定会发版", "passes"),  # 不一定 hedges: it is no 一定
    # hedge look-alikes: no hedge at all
    ("词表礼拜四没有可能不发版", "flagged"),  # 没有可能 is certainty
    ("下个月的访问量不可能低于一万", "flagged"),
    ("In June, the glossary will ship.", "flagged"),  # June/May the month is no "may"
    ("By May the glossary will hit 2,000 entries.", "flagged"),
    ("The glossary may ship in May.", "passes"),  # "may" the hedge, "May" the month
    ("没有可能找到这个文件，路径写错了", "passes"),  # certainty, but nothing ahead
    ("索引礼拜四必上线", "flagged"),  # 必 alone is certainty
    ("评审必须在礼拜四前完成", "passes"),  # 必须 is an obligation
    ("索引礼拜四未必上线", "passes"),  # 未必 hedges
    # a hedge covers its clause, not the next one
    ("评审可能要一小时，但词表礼拜四一定会发版", "flagged"),
    ("Review may take an hour, but the glossary will definitely ship Thursday.", "flagged"),
]


@pytest.mark.parametrize(("content", "decision"), INFORMAL_AND_HEDGES)
def test_informal_futures_are_forecasts_and_hedges_are_words_in_context(
    verify: Verify, content: str, decision: str
) -> None:
    """'ll, gonna, going to, set to are futures; 没有可能 and the month May are no hedges."""
    assert _decide(verify, content) == decision


# Words that look like modals or times and are not.
LOOK_ALIKES = [
    ("读书会礼拜四晚上在三楼", "passes"),  # 会 in 读书会 is a meeting
    ("礼拜四的周会改到下午", "passes"),
    ("下周会有新的词表吗？", "passes"),  # a question asks
    ("Will the glossary ship on Thursday?", "passes"),
    ("词表礼拜四会发版，对吧？", "flagged"),  # a tag question asserts after all
    ("上周四词表已经发版了", "passes"),  # 上周四 is past
    ("Last Thursday the glossary went out on time.", "passes"),
    ("预测模型的评审日期还没定", "passes"),  # 预测模型 is a model
    ("The forecasting model will be retrained with the new glossary.", "passes"),
    ("我们会比对两版词表的差异", "passes"),  # 比对 compares nothing
    ("The glossary review meeting will be held Thursday at 10.", "passes"),
    ("下周会上线新词表", "flagged"),  # 下周 + 会: not the weekly meeting 周会
    ("The launch will include the glossary on Thursday.", "passes"),  # "the launch" is a noun
    ("The index will launch on Thursday.", "flagged"),
    ("If the review passes, the index will go live Thursday.", "passes"),  # contingent
    ("If nothing changes, the index will run out of space next week.", "flagged"),  # a basis
    ("上礼拜四的命中率超过了九成", "passes"),  # happened
    ("上礼拜四索引一定上线", "passes"),  # 上礼拜四 has passed: a guess about the past
    ("礼拜四的命中率一定超过九成", "flagged"),
]


@pytest.mark.parametrize(("content", "decision"), LOOK_ALIKES)
def test_meetings_questions_and_past_events_are_not_forecasts(
    verify: Verify, content: str, decision: str
) -> None:
    """会 in meetings, 上周 and "last", questions and model names pass; 下周会 does not."""
    assert _decide(verify, content) == decision


# Labels in label position pass; negated, quoted or taken-back labels are no labels.
LABELS = [
    ("【推演】词表礼拜四一定会发版", "passes"),
    ("推斷：詞表禮拜四會發版", "passes"),  # traditional script, full-width colon
    ("[Inference] the glossary will ship Thursday.", "passes"),
    ("**Prediction:** the glossary will ship Thursday.", "passes"),
    ("Inference : the glossary will ship Thursday.", "passes"),
    ("灵研：推演：词表礼拜四会发版", "passes"),  # after the speaker's own prefix
    ("LingResearch here. Inference: the glossary will ship Thursday.", "passes"),
    ("词表礼拜四会发版【推演】", "passes"),  # a tag covers its sentence
    ("这不是推演：词表礼拜四会发版", "flagged"),
    ("不必标【推演】，词表礼拜四会发版", "flagged"),
    ("It's not an inference: the glossary will ship Thursday.", "flagged"),
    ("No need for an [Inference] tag: the glossary will ship Thursday.", "flagged"),
    ("标签“【推演】”只是装饰，词表礼拜四会发版", "flagged"),  # quoted
    ('The word "Inference:" is decoration; the glossary will ship Thursday.', "flagged"),
    ("【推演】不成立，词表礼拜四一定发版", "flagged"),  # taken back
    ("【推演】词表可能更大。事实是：礼拜四一定发版", "flagged"),  # a declared fact after it
    ("词表礼拜四会发版。推演：索引也会跟着更新", "flagged"),  # the label comes too late
    ("推演说明：词表礼拜四会发版", "flagged"),  # 推演说明 is no label
]


@pytest.mark.parametrize(("content", "decision"), LABELS)
def test_labels_count_in_label_position_only(verify: Verify, content: str, decision: str) -> None:
    """A prefix at a clause start or a tag labels what follows; negated or quoted ones do not."""
    assert _decide(verify, content) == decision


# Every obfuscation of the canonical text, on a forecast and on its labelled twin.
OBFUSCATED = [
    ("照現在的速率，詞表禮拜四一定會發版", "flagged"),  # traditional
    ("【推演】照現在的速率，詞表禮拜四可能會發版", "passes"),
    ("词表礼拜四会\u200b发\u200b版", "flagged"),  # zero-width inside words
    ("【推\u200b演】词表礼拜四会发版", "passes"),
    ("The glossary w\u2060ill ship Thursday.", "flagged"),  # a word joiner
    ("Ｔｈｅ ｇｌｏｓｓａｒｙ ｗｉｌｌ ｓｈｉｐ Ｔｈｕｒｓｄａｙ.", "flagged"),  # full-width
    ("Ｉｎｆｅｒｅｎｃｅ： the glossary will ship Thursday.", "passes"),
    ("The glossary wіll ship Thursday.", "flagged"),  # Cyrillic і
    ("Іnfеrence: the glossary will ship Thursday.", "passes"),
    ("The glossary &#119;ill ship Thursday.", "flagged"),  # an HTML entity
    ("&#25512;&#28436;&#65306;词表礼拜四会发版", "passes"),
    ("THE GLOSSARY WILL SHIP THURSDAY", "flagged"),
    ("At  this  pace ,  the  glossary  WILL  land  Thursday.", "flagged"),
]


@pytest.mark.parametrize(("content", "decision"), OBFUSCATED)
def test_decisions_are_made_on_canonical_text(verify: Verify, content: str, decision: str) -> None:
    """Script, width, invisible characters, look-alikes, entities and case change nothing."""
    assert _decide(verify, content) == decision


@pytest.mark.parametrize(
    ("member", "kind", "content"),
    [
        ("lingflow", "communication", "词表礼拜四一定会发版"),
        ("lingflow", "communication", "Heads-up: the glossary will definitely ship Thursday."),
        ("lingresearch", "action", "照现在的速率，词表礼拜四会发版"),
        ("lingresearch", "action", "At this rate the glossary will ship Thursday."),
    ],
)
def test_the_declared_type_exempts_nothing(
    verify: Verify, member: str, kind: str, content: str
) -> None:
    """A forecast sent as a communication or a tool-less action still needs its label."""
    result = verify(member=member, type=kind, content=content)
    assert not _inference(result).passed
    assert result.decision != "approved"


def test_the_fallback_relabels_the_original_text_and_then_passes(verify: Verify) -> None:
    """The fallback prefixes the label to the text as written, and the relabelled text passes."""
    content = "照現在的速率，詞表禮拜四&#20250;發版"
    result = verify(member="lingresearch", type="fact", content=content)
    assert result.decision == "fallback" and result.fallback is not None
    assert result.fallback.content == "【推演】" + content
    again = verify(member="lingresearch", type="fact", content=result.fallback.content)
    assert again.decision == "approved"
    english = verify(member="lingresearch", type="fact", content="The glossary'll ship Thursday.")
    assert english.fallback is not None
    assert english.fallback.content == "Inference: The glossary'll ship Thursday."


# ------------------------------------------------------------------------------- relays


@pytest.fixture
def relay_verify(policies: PolicySet) -> Verify:
    """Verify against a council record on which 灵通 forecast a release in its own words."""
    council = MemoryCouncil(
        [
            CouncilMessage.model_validate(m)
            for m in (
                {"id": "r-1", "from": "lingflow", "content": "词表 v2 礼拜四一定会发版"},
                {"id": "r-2", "from": "lingflow", "content": "The glossary v2 will ship Thursday."},
                {"id": "r-3", "from": "lingzhi", "content": "术语审校已经完成"},
            )
        ]
    )
    layer = ConstraintLayer(policies, council, language="en")
    ledger = Ledger()

    def run(**fields: object) -> VerificationResult:
        fields.setdefault("session", "s1")
        return layer.verify(Assertion.model_validate(fields), ledger)

    return run


RELAYS = [
    ("灵通说词表 v2 礼拜四一定会发版", "passes"),  # 灵通's words: on_record checks them
    ("LingFlow said the glossary v2 will ship Thursday.", "passes"),
    ("灵研：灵通说词表 v2 礼拜四一定会发版", "passes"),  # the speaker's own prefix hides nothing
    ("灵知说术语审校已经完成，所以词表 v2 礼拜四一定会发版", "flagged"),  # the speaker's conclusion
    (
        "LingZhi said the term review is done, and the glossary will definitely ship Thursday.",
        "flagged",
    ),
    ("灵知说术语审校已经完成。词表 v2 礼拜四一定会发版", "flagged"),  # a sentence of one's own
    (
        "灵知说术语审校已经完成，灵通说词表 v2 礼拜四一定会发版",
        "passes",
    ),  # two speakers, both relayed
    ("客户说词表 v2 礼拜四一定会发版", "flagged"),  # no council member: the speaker asserts it
]


@pytest.mark.parametrize(("content", "decision"), RELAYS)
def test_a_forecast_in_another_members_relayed_words_is_theirs(
    relay_verify: Verify, content: str, decision: str
) -> None:
    """Inside another member's relayed span the forecast is theirs; the speaker's add-on is not."""
    result = relay_verify(member="lingresearch", type="communication", content=content)
    assert ("flagged" if not _inference(result).passed else "passes") == decision


def test_a_relayed_forecast_says_whose_it_is(relay_verify: Verify) -> None:
    """The check names reported speech as the reason it passed, so a reviewer sees why."""
    result = relay_verify(
        member="lingyi", type="communication", content="灵通说词表 v2 礼拜四一定会发版"
    )
    assert _inference(result).passed
    assert result.decision == "approved"
    assert "reported speech" in _inference(result).reason


@pytest.mark.parametrize(("disabled", "decision"), [(False, "passes"), (True, "flagged")])
def test_relayed_words_are_exempt_only_where_the_record_check_runs(
    tmp_path: Path, disabled: bool, decision: str
) -> None:
    """Without communication.on_record, a relay could carry a forecast through unchecked."""
    folder = tmp_path / "validators"
    copytree(defaults_dir() / "validators", folder)
    if disabled:
        member = folder / "lingresearch.toml"
        text = member.read_text(encoding="utf-8")
        member.write_text(
            text.replace(
                'member = "lingresearch"\n',
                'member = "lingresearch"\ndisable = ["communication.on_record"]\n',
                1,
            ),
            encoding="utf-8",
        )
    content = "灵通说词表 v2 礼拜四一定会发版"
    assertion = Assertion(
        session="s1", member="lingresearch", type="communication", content=content
    )
    council = MemoryCouncil(
        [CouncilMessage.model_validate({"id": "r-1", "from": "lingflow", "content": content[3:]})]
    )
    result = ConstraintLayer(load_policies(folder), council).verify(assertion, Ledger())
    assert ("flagged" if not _inference(result).passed else "passes") == decision


# ------------------------------------------------------------- the helpers other checks use

IS_INFERENCE = [
    ("词表礼拜四一定会发版", True),  # a forecast
    ("【推演】词表礼拜四会发版", True),  # labelled
    ("词表可能已经发版了", True),  # hedged
    ("词表可能更大。索引里有两千条术语。", False),  # the second sentence is asserted
    ("索引里有两千条术语", False),
    ("The index may hold 2,000 terms.", True),
    ("The index holds 2,000 terms, as of 3 May.", False),  # May the month, no hedge
]


@pytest.mark.parametrize(("content", "inference"), IS_INFERENCE)
def test_is_inference_says_whether_a_text_asserts_a_fact(content: str, inference: bool) -> None:
    """Labelled, a forecast, or hedged in every sentence: not a fact for evidence checks."""
    assert is_inference(content) is inference


def test_a_fallback_prefix_must_be_a_label_in_label_position() -> None:
    """The default prefixes are labels; a quoted, negated or unknown word is not one."""
    words = ("推演", "inference")
    assert all(starts_with_label(p, words) for p in InferenceParams().prefix.values())
    assert not starts_with_label("“推演：”", words)
    assert not starts_with_label("非推演：", words)
    assert not starts_with_label("Guess: ", words)


def test_the_vocabulary_is_data(tmp_path: Path) -> None:
    """A word added to the lexicon file changes the decision without a code change."""
    folder = tmp_path / "validators"
    copytree(defaults_dir() / "validators", folder)
    text = "词表礼拜四板凳上发版"  # an invented certainty word the shipped lexicon lacks
    assertion = Assertion(session="s1", member="lingresearch", type="fact", content=text)

    def passes(policies: PolicySet) -> bool:
        result = ConstraintLayer(policies, MemoryCouncil()).verify(assertion, Ledger())
        return _inference(result).passed

    assert passes(load_policies(folder))
    lexicon = folder / "lexicons" / "inference.toml"
    header = re.compile(r"^\[groups\.certainty\].*$", re.MULTILINE)
    text = header.sub('[groups.certainty]\nextra = ["板凳上"]', lexicon.read_text(encoding="utf-8"))
    lexicon.write_text(text, encoding="utf-8")
    assert not passes(load_policies(folder))
