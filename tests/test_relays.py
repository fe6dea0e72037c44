"""Finding relays: every place a text reports what another member said or did, and nothing else.

Each table row is a text a member writes and the relays it holds (member, kind, claimed span).
Rows cover both sides, in Chinese and English: forms of reported speech that must be found
(also when the text is obfuscated: the finder runs on canonical text), and texts that name a
member without relaying it (an addressee, a to-do item, a role, a question, a quoted marker,
the speaker's own name), which must not be.
"""

from __future__ import annotations

import pytest

from lingyi.checks.relays import find_relays
from lingyi.policy import PolicySet
from lingyi.text import canonical

Found = list[tuple[str, str, str]]


def relays(policies: PolicySet, text: str, speaker: str = "lingyi") -> Found:
    canon = canonical(text, policies.names).text
    return [(r.member, r.kind, r.claim(canon)) for r in find_relays(canon, policies, speaker)]


SPEECH = [
    ("灵通表示 v2.9 的迁移脚本已经合入", [("lingflow", "speech", "v2.9 的迁移脚本已经合入")]),
    ("灵研刚才在群里说索引压缩跑完了", [("lingresearch", "speech", "索引压缩跑完了")]),
    ("LingFlow let us know PR #7781 is green.", [("lingflow", "speech", "pr #7781 is green")]),
    (
        "LingZhi reckons the tag store needs a rebuild.",
        [("lingzhi", "speech", "the tag store needs a rebuild")],
    ),
    ("据灵知，知识库周三停机维护", [("lingzhi", "speech", "知识库周三停机维护")]),
    ("Per LingYan, exp-90 has 4,100 rows.", [("lingresearch", "speech", "exp-90 has 4,100 rows")]),
    (
        "As LingFlow put it, the freeze starts tonight.",
        [("lingflow", "speech", "the freeze starts tonight")],
    ),
    ("照灵通的说法，热修复要等周五", [("lingflow", "speech", "热修复要等周五")]),
    (
        "In LingZhi's words: the 大学 notes are in draft.",
        [("lingzhi", "speech", "the 大学 notes are in draft")],
    ),
    ("这是灵研的原话：样本还在清洗", [("lingresearch", "speech", "样本还在清洗")]),
    ("灵研提醒大家：问卷周五截止", [("lingresearch", "speech", "问卷周五截止")]),
    ("LingFlow: staging is back to normal.", [("lingflow", "quote", "staging is back to normal")]),
    # The verb that also names work counts as speech only with a clause or a quote after it.
    ("LingFlow wrote that the cache was purged.", [("lingflow", "speech", "the cache was purged")]),
    # ... or after "as" with a comma: "As X posted, ..." quotes X; "the same as X posted" does not.
    (
        "As LingYan shared, the survey closes Friday.",
        [("lingresearch", "speech", "the survey closes friday")],
    ),
]

WORK = [
    (
        "灵通已经把 v2.9 的迁移脚本合入主干",
        [("lingflow", "work", "已经把 v2.9 的迁移脚本合入主干")],
    ),
    ("灵知新增了 4 篇《大学》札记", [("lingzhi", "work", "新增了 4 篇《大学》札记")]),
    (
        "LingFlow reverted PR #7781 this morning.",
        [("lingflow", "work", "reverted pr #7781 this morning")],
    ),
    (
        "LingResearch has exported the May survey.",
        [("lingresearch", "work", "has exported the may survey")],
    ),
]

SEVERAL = [
    (
        "灵通与灵知都确认备份已完成",
        [("lingflow", "speech", "备份已完成"), ("lingzhi", "speech", "备份已完成")],
    ),
    (
        "LingFlow & LingYan both said the cutover is tonight.",
        [
            ("lingflow", "speech", "the cutover is tonight"),
            ("lingresearch", "speech", "the cutover is tonight"),
        ],
    ),
    (
        "LingZhi and LingFlow agree: the notes go out Friday.",
        [
            ("lingflow", "speech", "the notes go out friday"),
            ("lingzhi", "speech", "the notes go out friday"),
        ],
    ),
    (
        "灵通说迁移完成了，灵研说样本还差两百条。",
        [("lingflow", "speech", "迁移完成了"), ("lingresearch", "speech", "样本还差两百条")],
    ),
    (
        "LingZhi said the glossary is updated and LingFlow said the cache is warm.",
        [
            ("lingzhi", "speech", "the glossary is updated and"),
            ("lingflow", "speech", "the cache is warm"),
        ],
    ),
]

# A pronoun continues the last relay; a denial is a relay of what the member did not say.
CONTINUED = [
    (
        "灵通没说发布推迟了，他说的是周五照常发布",
        [("lingflow", "denied", "发布推迟了"), ("lingflow", "speech", "周五照常发布")],
    ),
    (
        "LingZhi never said the index was dropped; she said it was compacted.",
        [("lingzhi", "denied", "the index was dropped"), ("lingzhi", "speech", "it was compacted")],
    ),
]

# The speaker's own name is no relay; what follows it may be one.
OWN_NAME = [
    ("lingflow", "灵通：灵研说 exp-90 已经停了", [("lingresearch", "speech", "exp-90 已经停了")]),
    (
        "lingzhi",
        "LingZhi here. LingYi told me the agenda is final.",
        [("lingyi", "speech", "the agenda is final")],
    ),
    ("lingyi", "灵依说：灵知说周三停机", [("lingzhi", "speech", "周三停机")]),
    ("lingresearch", "我是灵研，今天负责清洗样本。", []),
    ("lingflow", "LingFlow here: rolling the cache now.", []),
]

# Obfuscation does not hide a relay: the finder sees canonical text.
HIDDEN = [
    "靈通說 v2.9 的遷移腳本已經合入",  # traditional script
    "灵\u200b通说 v2.9 的迁移脚本已经合入",  # a zero-width space inside the name
    "灵 通说 v2.9 的迁移脚本已经合入",  # a space inside the name
    "灵·通说 v2.9 的迁移脚本已经合入",  # a middle dot
    "&#28789;&#36890;说 v2.9 的迁移脚本已经合入",  # HTML entities
]
HIDDEN_EN = [
    "Ling\u2060Flow said the freeze starts tonight.",  # a word joiner
    "ＬｉｎｇＦｌｏｗ said the freeze starts tonight.",  # full-width letters
    "L\u0456ngFlow said the freeze starts tonight.",  # a Cyrillic і
    "LINGFLOW SAID THE FREEZE STARTS TONIGHT.",  # upper case
    "Ling Flow said the freeze starts tonight.",  # a space inside the name
]

NO_RELAY = [
    "请灵通明天确认一下 v2.9 的迁移窗口",  # a request addressed to a member
    "灵研，exp-90 的样本什么时候能洗完？",  # a question to a member
    "Ask LingZhi to check the 大学 notes before Friday.",  # an instruction about a member
    "Checklist: 灵通 rotates the keys, 灵知 tags the new notes, 灵研 counts the rows.",
    "Owners — 灵通: release, 灵知: knowledge base, 灵研: data.",  # a role table
    "灵知负责知识库的整理和标注",  # a role description
    "灵通下周会把迁移脚本合进去",  # a plan, not work done or words said
    "灵通说 v2.9 合入了吗？",  # a question about what was said
    "Did LingFlow say the freeze starts tonight?",
    'I would not call it a "LingFlow said" update.',  # the marker quoted as a phrase
    "用户说登录页加载太慢",  # reported speech of a non-member
    "The auditor said the access logs look clean.",
    "Thanks LingFlow, appreciated!",
]


@pytest.mark.parametrize(("text", "expected"), SPEECH + WORK + SEVERAL + CONTINUED)
def test_every_relay_is_found_with_its_claim(
    policies: PolicySet, text: str, expected: Found
) -> None:
    """Speech verbs, leads, quotes, work done, several speakers, pronouns and denials."""
    assert relays(policies, text) == expected


@pytest.mark.parametrize(("speaker", "text", "expected"), OWN_NAME)
def test_the_speakers_own_name_is_no_relay(
    policies: PolicySet, speaker: str, text: str, expected: Found
) -> None:
    """ "灵通：灵研说…" written by 灵通 relays 灵研 only; a self-introduction relays nobody."""
    assert relays(policies, text, speaker) == expected


@pytest.mark.parametrize("text", HIDDEN)
def test_obfuscated_names_still_make_a_relay(policies: PolicySet, text: str) -> None:
    """Traditional script, invisible characters, split names and entities: the same relay."""
    assert relays(policies, text) == [("lingflow", "speech", "v2.9 的迁移脚本已经合入")]


@pytest.mark.parametrize("text", HIDDEN_EN)
def test_obfuscated_english_names_still_make_a_relay(policies: PolicySet, text: str) -> None:
    """Word joiners, full-width or look-alike letters, case and spaces hide no English relay."""
    assert relays(policies, text) == [("lingflow", "speech", "the freeze starts tonight")]


@pytest.mark.parametrize("text", NO_RELAY)
def test_a_name_alone_is_no_relay(policies: PolicySet, text: str) -> None:
    """Addressees, requests, to-do items, roles, plans, questions, quoted markers, non-members."""
    assert relays(policies, text) == []


# The speaker named after the claim: the claim is what came before, or the relay it confirms.
TRAILING = [
    ("迁移脚本合入了，灵通说的。", [("lingflow", "speech", "迁移脚本合入了")]),
    (
        "The freeze starts tonight, per LingFlow.",
        [("lingflow", "speech", "the freeze starts tonight")],
    ),
    ("exp-90 已经停了（据灵研）", [("lingresearch", "speech", "exp-90 已经停了")]),
    (
        "Quoting LingZhi: the 大学 notes are final.",
        [("lingzhi", "speech", "the 大学 notes are final")],
    ),
    (
        "灵知说札记定稿了，灵通也确认了。",
        [("lingflow", "speech", "札记定稿了"), ("lingzhi", "speech", "札记定稿了")],
    ),
    (
        "LingYan said exp-90 is clean, and LingFlow agreed.",
        [("lingflow", "speech", "exp-90 is clean"), ("lingresearch", "speech", "exp-90 is clean")],
    ),
    ("Thanks, LingFlow.", []),  # a name after a comma, with no verb, addresses a member
    ("Rotate the keys before Friday (LingFlow).", []),  # an owner in brackets
    ("早上好，灵研！", []),
]


@pytest.mark.parametrize(("text", "expected"), TRAILING)
def test_an_attribution_after_the_claim_is_a_relay(
    policies: PolicySet, text: str, expected: Found
) -> None:
    """ "…，灵通说的", "…, per LingFlow", "…，灵通也确认了": the claim before it is relayed."""
    assert relays(policies, text) == expected


SPANS = [
    # The claim ends where the speaker's own conclusion starts.
    ("灵通说迁移完成了，所以明天可以切流量", [("lingflow", "speech", "迁移完成了")]),
    (
        "LingZhi said the notes are tagged, so the club can start.",
        [("lingzhi", "speech", "the notes are tagged")],
    ),
    # A relay given as a premise: what follows the comma is the speaker's.
    (
        "Since LingYan said exp-90 is clean, we can train tonight.",
        [("lingresearch", "speech", "exp-90 is clean")],
    ),
    ("既然灵知说札记已经定稿，就可以排版了", [("lingzhi", "speech", "札记已经定稿")]),
    # And it ends with its sentence.
    ("灵研说样本洗完了。我觉得可以开始训练。", [("lingresearch", "speech", "样本洗完了")]),
]


@pytest.mark.parametrize(("text", "expected"), SPANS)
def test_a_claim_is_the_members_words_only(policies: PolicySet, text: str, expected: Found) -> None:
    """The relayed span stops at the relayer's own conclusion, premise or next sentence."""
    assert relays(policies, text) == expected
