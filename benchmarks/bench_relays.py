"""Latency of verifying relays against a large council record and a large session ledger.

    python benchmarks/bench_relays.py [--messages 100000] [--entries 100000] [--n 2000] [--json]

Builds an in-memory council record of ``--messages`` messages from four members (release
notes, audits, data sets, KB work, meetings, in Chinese and English, each with its own
versions, ids and counts) and a session ledger of ``--entries`` tool results, then verifies a
mix of relays with the shipped policies (``ConstraintLayer.verify``, every check of the
member): faithful and fabricated, in both languages, across languages, several speakers,
relays sent as facts. Reports p50/p99 of the whole verification and of the relay check
alone, next to the same mix against a record of 100 messages: with the index, the cost does
not grow with the record. The first verification of each assertion (cold caches) is
excluded from the figures and reported on its own. Wall time and this thread's CPU time
are both given: on a shared machine the wall-time p99 mostly measures other processes.

``worst`` verifies the hostile shapes a relay reader must not choke on, each as long as
``max_text_chars`` allows (repeated speech verbs, pronouns, attributions after the claim,
nested quotes, long tables, lists, blockquotes and fences), and reports the largest CPU time
of a verification, every text new to the caches.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from typing import Any

from lingyi.checks._registry import CheckContext
from lingyi.checks.communication import CommunicationParams, on_record
from lingyi.config import defaults_dir
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence
from lingyi.policy import PolicySet, load_policies

MEMBERS = ("lingflow", "lingresearch", "lingzhi", "lingyi")
TEMPLATES = {
    "lingflow": (
        "v{a}.{b}.{c} 审计已完成：发现 {n} 个中危问题，没有高危问题。",
        "The v{a}.{b} release is on hold until PR #{pr} is merged.",
        "Hotfix v{a}.{b}.{c} 已经 merge 到 release 分支，CI 全绿。",
        "v{a}.{b} 的发布日期定在 {m} 月 {d} 日。",
        "The staging deploy of v{a}.{b}-rc{c} failed at the migration step; I rolled it back.",
    ),
    "lingresearch": (
        "dataset_v{a} 标注完成，共 {big} 条，标注一致率 0.{c}{b}。",
        "Experiment exp-{pr} is paused until the data is cleaned.",
        "A/B 实验 exp-{pr} 结束：B 方案准确率 0.8{b}{c}，A 方案 0.7{c}{b}。",
        "The council_activity export for week {b} is ready: {big} messages in total.",
    ),
    "lingzhi": (
        "知识库新增了 {n} 篇《道德经》注释，索引已重建。",
        "The KB index rebuild #{pr} finished with {big} documents indexed.",
        "《论语》导读第 {b} 版已更新，共 {n} 节。",
        "The Wing Chun lineage article #{pr} now has {n} sections.",
    ),
    "lingyi": (
        "本周议事会改到周四下午 {n} 点。",
        "Reading club #{pr} moved to Friday; {n} members signed up.",
    ),
}


def council_of(size: int, rng: random.Random) -> MemoryCouncil:
    council = MemoryCouncil()
    for i in range(size):
        member = MEMBERS[i % len(MEMBERS)]
        template = rng.choice(TEMPLATES[member])
        council.append(CouncilMessage(id=f"m-{i}", sender=member, content=fill(template, rng)))
    return council


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        a=rng.randint(0, 9),
        b=rng.randint(0, 30),
        c=rng.randint(0, 9),
        n=rng.randint(2, 40),
        pr=rng.randint(100, 99999),
        big=f"{rng.randint(1000, 99999):,}",
        m=rng.randint(1, 12),
        d=rng.randint(1, 28),
    )


def ledger_of(size: int, rng: random.Random) -> Ledger:
    ledger = Ledger()
    for i in range(size):
        member = MEMBERS[i % 3]
        evidence = Evidence(
            id=f"ev-{i}",
            title=f"analysis {i}",
            snippet=fill("variant B accuracy 0.8{b}{c} on dataset_v{a}", rng),
        )
        ledger.record("bench", member, "analyze_data", {"source": f"src-{i % 97}"}, [evidence])
    return ledger


# The record the relays talk about, appended last (the newest messages).
KNOWN = (
    (
        "k-1",
        "lingflow",
        "v0.18 安全审计完成：发现两个中危问题（CSRF 令牌轮换、日志脱敏），没有高危问题。",
    ),
    ("k-2", "lingresearch", "Dataset v3 labelling is finished: 12,400 samples."),
    ("k-3", "lingflow", "v0.17 的发布暂缓，等待安全评审"),
    ("k-4", "lingzhi", "The knowledge base index was rebuilt on Tuesday."),
)
RELAYS = (
    ("communication", "灵通说 v0.18 审计发现两个中危问题，没有高危。"),
    ("communication", "LingFlow said the v0.18 audit found no issues."),
    ("fact", "灵研说数据集v3已经标注完了，共12,400个样本"),
    ("communication", "LingResearch said dataset v3 has 15,000 samples."),
    ("communication", "灵通说v0.17已经发布了"),
    ("communication", "LingFlow said the v0.17 release is on hold pending the security review."),
    ("communication", "灵知说知识库索引周二重建了，灵研说数据集v3标注完成了"),
    ("fact", "LingZhi said the KB index was rebuilt on Friday."),
    ("communication", "灵通和灵研都说v0.18审计已经完成"),
    ("communication", "To-do: 灵通 reruns the audit, 灵研 refreshes the dashboard."),
)


def setup(messages: int, entries: int) -> tuple[ConstraintLayer, Ledger, PolicySet]:
    rng = random.Random(7)
    policies = load_policies(defaults_dir() / "validators")
    council = council_of(messages, rng)
    for rid, sender, content in KNOWN:
        council.append(CouncilMessage(id=rid, sender=sender, content=content))
    return ConstraintLayer(policies, council, language="en"), ledger_of(entries, rng), policies


def measure(layer: ConstraintLayer, ledger: Ledger, policies: PolicySet, n: int) -> dict[str, Any]:
    """Figures of the whole verification (all, and the relays declared as communications)
    and of communication.on_record alone, after one cold pass over each assertion."""
    assertions = [
        Assertion(member="lingyi", type=kind, content=text, session="bench")  # type: ignore[arg-type]
        for kind, text in RELAYS
    ]
    cold = [timed(lambda a=a: layer.verify(a, ledger)) for a in assertions]
    gc.collect()
    gc.freeze()  # the record and the ledger built above are not garbage of the loop below
    rounds = assertions * (n // len(RELAYS))
    whole = [(a.type, timed(lambda a=a: layer.verify(a, ledger))) for a in rounds]
    cpu = [(a.type, timed(lambda a=a: layer.verify(a, ledger), time.thread_time)) for a in rounds]
    check = [timed(lambda a=a: relay_check(layer, ledger, policies, a)) for a in rounds]
    check_cpu = [
        timed(lambda a=a: relay_check(layer, ledger, policies, a), time.thread_time) for a in rounds
    ]
    gc.unfreeze()
    return {
        "cold_max_ms": max(cold),
        "verify": figures([t for _, t in whole]),
        "verify_communication": figures([t for k, t in whole if k == "communication"]),
        "verify_communication_cpu": figures([t for k, t in cpu if k == "communication"]),
        "relay_check": figures(check),
        "relay_check_cpu": figures(check_cpu),
    }


WORST = {
    "speech_verbs": "灵通说灵研说灵知说灵依说",
    "speech_verbs_en": "LingFlow said LingZhi said ",
    "pronouns": "灵通说v0.17发布了，他说",
    "attributions": "v0.17 已发布，灵通说的。",
    "nested_quotes": "灵通说“",
    "table_rows": "| 灵通 | v0.17 已发布 |\n",
    "list_items": "- 灵通：v0.17 已发布\n",
    "blockquotes": "> 灵通：v0.17 已经发布\n",
    "fences": "```\n灵通说v0.17已发布\n",
    "labels": "【灵通】v0.17 已发布。",
}


def worst(layer: ConstraintLayer, ledger: Ledger, rounds: int = 3) -> dict[str, float]:
    """CPU ms of the slowest of ``rounds`` verifications of each shape, at full length."""
    limit = layer.services.max_text_chars
    warm = Assertion(member="lingyi", type="communication", content="- 灵通：ok", session="w")
    layer.verify(warm, ledger)  # compiled patterns and parsers are not what is measured
    out = {}
    for name, unit in WORST.items():
        # A letter, not a digit, makes each text new to the caches: a digit before
        # "LingFlow said LingZhi said …" sends evidence.subject_supported into a path that
        # is superlinear on its own (reported separately; not the relay reading measured here).
        texts = [
            (f"({chr(97 + i)}) " + unit * (limit // len(unit) + 1))[:limit] for i in range(rounds)
        ]
        out[name] = round(
            max(
                timed(
                    lambda t=t: layer.verify(
                        Assertion(member="lingyi", type="communication", content=t, session="w"),
                        ledger,
                    ),
                    time.thread_time,
                )
                for t in texts
            ),
            1,
        )
    return out


def relay_check(layer: ConstraintLayer, ledger: Ledger, policies: PolicySet, a: Assertion) -> None:
    member = policies.members[a.member]
    ctx = CheckContext(a, member, policies, ledger, layer.council, layer.services, "en")
    ctx.code = "communication.on_record"
    on_record(ctx, CommunicationParams())


def timed(call: Any, clock: Any = time.perf_counter) -> float:
    """Milliseconds of ``call`` by ``clock``: wall time, or this thread's CPU time (which a
    busy shared machine does not inflate by scheduling other processes in between)."""
    started = clock()
    call()
    return float(clock() - started) * 1000


def figures(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
        "max_ms": round(ordered[-1], 3),
    }


def _pair(f: dict[str, float]) -> str:
    return f"{f['p50_ms']}/{f['p99_ms']}ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = {}
    for label, messages, entries in (("small", 100, 100), ("large", args.messages, args.entries)):
        started = time.perf_counter()
        layer, ledger, policies = setup(messages, entries)
        built = round(time.perf_counter() - started, 1)
        out[label] = {"messages": messages, "entries": entries, "build_s": built}
        out[label] |= measure(layer, ledger, policies, args.n)
        if label == "small":
            out[label]["worst_cpu_ms"] = worst(layer, ledger)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    for name, ms in out["small"]["worst_cpu_ms"].items():
        sys.stdout.write(f"worst  {name:<16} {ms:>7.1f} ms cpu at max_text_chars\n")
    for label, row in out.items():
        sys.stdout.write(
            f"{label:<6} messages={row['messages']:>7} entries={row['entries']:>7} "
            f"verify p50/p99 {_pair(row['verify'])}; communications "
            f"{_pair(row['verify_communication'])} (cpu {_pair(row['verify_communication_cpu'])}); "
            f"relay check {_pair(row['relay_check'])} (cpu {_pair(row['relay_check_cpu'])}) "
            f"[cold max {row['cold_max_ms']:.0f}ms, built in {row['build_s']}s]\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
