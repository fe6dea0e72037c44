"""Per-call cost of the boundary checks (medical advice, domain scope), in-process.

    python benchmarks/bench_boundary.py [--rounds N] [--json]

Each boundary check a member's shipped policy runs is called directly on a mix of texts
(Chinese, traditional, English, pinyin; medical requests, look-alikes, in-domain and
out-of-domain queries), as content and as the ``query`` argument of a search. The canonical
form of a text is computed once per assertion by the layer and shared by every check, so the
figures are given twice: the check alone (canonical form already computed) and the check with
the canonical form of its texts computed afresh ("cold"). Wall time and the thread's CPU time
are both given: on a shared machine the wall-clock tail is the scheduler's, the CPU time is
the check's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from lingyi.checks import REGISTRY, CheckContext
from lingyi.checks._registry import Services
from lingyi.config import defaults_dir
from lingyi.council import MemoryCouncil
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import PolicySet, load_policies
from lingyi.text import _canonical

TEXTS = [
    "高血压的人平时该服用哪一类降压药比较好",
    "頸椎病發作時貼什麼膏藥最管用",
    "my kid has a rash, which cream should we put on it",
    "shuibuzhao zenme ban, chi shenme yao",
    "退烧以后还要不要继续吃抗生素",
    "stop the blood thinners before the trip?",
    "朱熹与陆九渊的鹅湖之会",
    "the Yogacara school and Xuanzang's Cheng Weishi Lun",
    "Yang-style push hands drills for beginners",
    "唐代孙思邈论医德",
    "the CI job treats lint warnings as errors now",
    "故障诊断：磁盘延迟的根因",
    "Kung Fu Panda merchandise discount codes",
    "cheapest flights to Kyoto in April",
    "明天下午三点开周会，记得带上周报",
]


def contexts(policies: PolicySet, member: str) -> list[CheckContext]:
    found = policies.members[member]
    return [
        CheckContext(
            Assertion(
                member=member,
                type="action",
                content=f"检索：{text}",
                tool_call={"name": "search_knowledge", "arguments": {"query": text}},
            ),
            found,
            policies,
            Ledger(),
            MemoryCouncil(),
            Services(),
            "zh",
        )
        for text in TEXTS
    ]


def timed(policies: PolicySet, member: str, rounds: int, cold: bool) -> dict[str, Any]:
    entries = [c for c in policies.members[member].checks if c.stage.value == "boundary"]
    figures: dict[str, Any] = {}
    for entry in entries:
        spec, wall, cpu = REGISTRY[entry.check], [], []
        for _ in range(rounds):
            for ctx in contexts(policies, member):
                ctx.code = entry.check
                if cold:
                    _canonical._canonical.cache_clear()
                else:
                    ctx.canonical_texts(["query"])  # what the layer shares between checks
                start, start_cpu = time.perf_counter(), time.thread_time()
                spec.func(ctx, entry.parsed)
                cpu.append((time.thread_time() - start_cpu) * 1e6)
                wall.append((time.perf_counter() - start) * 1e6)
        figures[entry.check] = {"calls": len(wall), **summary("wall", wall), **summary("cpu", cpu)}
    return figures


def summary(name: str, samples: list[float]) -> dict[str, float]:
    samples.sort()
    return {
        f"{name}_mean_us": round(statistics.fmean(samples), 1),
        f"{name}_p50_us": round(samples[len(samples) // 2], 1),
        f"{name}_p99_us": round(samples[int(len(samples) * 0.99) - 1], 1),
    }


COLUMNS = ["wall_mean", "wall_p50", "wall_p99", "cpu_mean", "cpu_p50", "cpu_p99"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    policies = load_policies(defaults_dir() / "validators")
    table = {
        f"{member} {mode}": timed(policies, member, args.rounds, mode == "cold")
        for member in ("lingzhi", "lingyi")
        for mode in ("warm", "cold")
    }
    if args.json:
        sys.stdout.write(json.dumps(table, indent=2) + "\n")
        return 0
    sys.stdout.write(f"{'member / canonical':<20}{'check':<18}{'calls':>6}")
    sys.stdout.write("".join(f"{c.replace('_', ' ') + ' µs':>14}" for c in COLUMNS) + "\n")
    for name, checks in table.items():
        for check, f in checks.items():
            sys.stdout.write(f"{name:<20}{check:<18}{f['calls']:>6}")
            sys.stdout.write("".join(f"{f[c + '_us']:>14}" for c in COLUMNS) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
