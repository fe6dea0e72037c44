"""Claims with structure: a relayed claim against the one message it reports.

Each row is (claim, record, supported, reason). For every way a relay can differ from what
was said (a version, an id, a count, a date, a time, a month, a title, the state of the work,
a value of a family such as a day or a severity, "none" against a count, a number given for
the wrong thing, an added clause, a comparison) there are rows that must be caught, and rows
that say the same thing in other words, in the other language or script, that must pass.
"""

from __future__ import annotations

import pytest

from lingyi import messages
from lingyi.checks.communication import compare

SAME = [
    # Paraphrase in the same language.
    ("v2.9 的迁移脚本已经合并", "v2.9 迁移脚本已合入主干"),
    ("the tag store rebuild is wrapped up", "The tag store rebuild is finished."),
    # Across languages, through the glossary.
    ("the v2.9 migration script has been merged", "v2.9 迁移脚本已合并"),
    ("索引压缩在周四完成了", "Index compaction was completed on Thursday."),
    ("exp-90 暂停了，在等数据清洗", "exp-90 is paused while the data is being cleaned."),
    # Traditional script and numerals written out.
    ("exp-90 共有四千一百條樣本", "exp-90 has 4,100 samples."),
    # A time of day in either notation; a month by name or number.
    ("周会改到下午四点", "The weekly meeting moved to 16:00."),
    ("the survey export for June is ready", "六月的问卷导出已完成"),
    # None against none, with a qualifier.
    ("没有高危问题，有一个低危", "The scan found no high-severity issues and one low one."),
    # A comparison the record's own numbers show.
    ("variant C is ahead, 0.91 vs 0.88", "Variant C scored 0.91, variant D 0.88."),
    # Not yet done against in progress.
    ("备份还没有做完", "The backup is still running."),
    # Tenths (三成), 万 and a weekday before a word that counts things.
    ("灰度已经放到三成流量", "The canary is now at 30% of traffic."),
    ("数据集 v8 有 4.2 万条", "Dataset v8 has 42,000 rows."),
    ("周二分享会讲《中庸》", "Tuesday's talk covers the Doctrine of the Mean."),
    # A date with its weekday, in either order; "next Monday" is a week and a day.
    ("the review is on Friday, 12 June", "评审定在 6 月 12 日周五"),
    ("评审挪到下周一", "The review moved to next Monday."),
    # A state is read from the clause about the same thing: cancelled Wednesday, moved on.
    (
        "周三的分享会不办了，改到下周二线上",
        "Wednesday's talk is cancelled and will run online next Tuesday instead.",
    ),
    # Failed and rolled back: both done and failed, as the record says.
    ("v7.2 的 Windows 构建失败后已经回滚", "The v7.2 Windows build failed and was rolled back."),
    # "Moved" a database is a migration, not a postponement.
    (
        "the staging DB was migrated to the new data center",
        "We moved the staging database to the new datacenter.",
    ),
]

DIFFERENT = [
    ("v2.10 的迁移脚本已经合并", "v2.9 迁移脚本已合入主干", "version_differs"),
    ("PR #7718 was reverted", "PR #7781 was reverted this morning.", "id_differs"),
    ("exp-90 共有 5,100 条样本", "exp-90 has 4,100 samples.", "numbers_differ"),
    ("the freeze starts on 9 March", "冻结从 3 月 8 日开始", "date_differs"),
    ("周会改到下午五点", "The weekly meeting moved to 16:00.", "date_differs"),
    ("the survey export for July is ready", "六月的问卷导出已完成", "date_differs"),
    ("《中庸》札记已定稿", "《大学》札记已定稿", "title_differs"),
    # The state of the work, in every tree.
    ("the tag store rebuild is done", "标签库重建暂缓，等待新分词器", "status_differs"),
    ("exp-90 已经恢复运行", "exp-90 is paused while the data is being cleaned.", "status_differs"),
    ("the weekly meeting was moved to Friday", "本周周会取消", "status_differs"),
    ("周会照常举行", "The weekly meeting is cancelled.", "status_differs"),
    ("the nightly build passed", "夜间构建失败了", "status_differs"),
    ("导出还没开始", "The export is complete.", "status_differs"),
    ("备份已经做完了", "The backup is still running.", "status_differs"),
    ("the poll is still open", "投票已关闭", "status_differs"),
    (
        "the Windows build of v7.2 is done",
        "v7.2 的 Windows 构建失败了",
        "status_differs",
    ),  # no failure
    (
        "the calibration is done",
        "The churn model AUC is 0.82; calibration still pending.",
        "status_differs",
    ),
    (
        "周三的分享会照常线下进行",
        "Wednesday's talk is cancelled and will run online next Tuesday instead.",
        "status_differs",
    ),
    # A value of a family: the day, the environment, the severity, the domain, a name.
    ("索引压缩在周五完成了", "Index compaction was completed on Thursday.", "value_differs"),
    ("v6.1 今天上线", "v6.1 明天上午上线", "value_differs"),  # a part of the day is no day
    ("v2.9 已部署到生产环境", "v2.9 is deployed to staging.", "value_differs"),
    ("the scan found one critical issue", "扫描发现一个中危问题", "value_differs"),
    ("three notes were added to the 道 domain", "儒 domain 新增 3 篇札记", "value_differs"),
    ("the club reads Laozi next week", "下周读书会读《孟子》", "value_differs"),
    # None against a count, and a count against none.
    ("the scan found nothing", "扫描发现两个低危问题", "negation_differs"),
    ("扫描没有发现任何问题", "The scan found two low-severity issues.", "negation_differs"),
    ("the scan found a high-severity issue", "扫描没有发现高危问题", "negation_differs"),
    ("CI no longer blocks on lint errors", "CI 现在会因为 lint 错误而阻塞", "negation_differs"),
    ("一致率降到了 0.88", "Agreement rose to 0.88.", "value_differs"),  # the direction of a change
    # A number given for the wrong thing.
    (
        "儒 domain 有 7 篇，道 domain 有 5 篇",
        "儒 domain 共 5 篇，道 domain 共 7 篇",
        "label_differs",
    ),
    ("variant D scored 0.91", "Variant C scored 0.91, variant D 0.88.", "label_differs"),
    # Something the record does not say.
    (
        "the backup finished and was copied offsite",
        "The backup finished at 02:00.",
        "clause_missing",
    ),
    ("variant D beat variant C", "Variant C scored 0.91, variant D 0.88.", "clause_missing"),
]


@pytest.mark.parametrize(("claim", "record"), SAME)
def test_a_relay_that_says_what_the_record_says_is_supported(claim: str, record: str) -> None:
    """Paraphrases, the other language or script, written-out numbers, other notations."""
    match = compare(claim, record)
    assert (match.ok, match.why) == (True, "same_claim"), match.values


@pytest.mark.parametrize(("claim", "record", "why"), DIFFERENT)
def test_a_relay_that_differs_from_the_record_is_caught(claim: str, record: str, why: str) -> None:
    """Each way a relay can differ is caught and named; every name is in both catalogs."""
    match = compare(claim, record)
    assert (match.ok, match.why) == (False, why), match.values
    for lang in messages.LANGUAGES:
        assert messages.has(lang, f"communication.on_record.{why}")
