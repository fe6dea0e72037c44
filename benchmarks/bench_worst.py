"""Verification cost of the worst inputs up to ``[limits] max_text_chars``.

    python benchmarks/bench_worst.py [--n 5] [--json]

Each input is as long as the limit allows (8,000 characters by default) and built to make
the comparing checks work hardest: speaker after speaker (灵通说灵研说灵知说…, issue 25), a
long note restating the council record clause by clause, a fact packed with numbers against
evidence packed with numbers, a list of cited documents. The council record holds 1,000
messages and the session ledger 1,000 tool results. Reports this thread's CPU time (the
machine is shared; wall time mostly measures other processes), max over ``--n`` runs after a
first, cold one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from lingyi.checks._registry import Services
from lingyi.config import defaults_dir
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence
from lingyi.policy import load_policies

LIMIT = 8000


def _record() -> MemoryCouncil:
    council = MemoryCouncil()
    for i in range(1000):
        sender = ("lingflow", "lingresearch", "lingzhi")[i % 3]
        text = f"v0.{i} 审计已完成，共发现 {i % 7} 个中危问题，没有高危；dataset_v{i} 有 {i * 13} 条样本。"
        council.append(CouncilMessage(id=f"m-{i}", sender=sender, content=text))
    return council


def _ledger() -> Ledger:
    ledger = Ledger()
    for i in range(1000):
        snippet = " ".join(f"cohort {j} {i * j}.{j}" for j in range(12))
        ledger.record(
            "s",
            "lingresearch",
            "analyze_data",
            {},
            [Evidence(id=f"an-{i}", title=f"analysis {i}", snippet=snippet)],
        )
    return ledger


def _fill(unit: str) -> str:
    return (unit * (LIMIT // len(unit) + 1))[:LIMIT]


INPUTS = {
    "speakers": _fill("灵通说灵研说灵知说"),
    # A number, then nothing but relays: the blanked relays leave one long run of white
    # space after the number, which a backtracking \s* between optional words made cubic.
    "number then speakers": "1 " + _fill("LingFlow said LingZhi said ")[2:],
    "count then speakers": "3 " + _fill("灵通说灵研说")[2:],
    "note": _fill(
        "灵通说 v0.16 审计已完成，共发现 2 个中危问题，没有高危。LingResearch said dataset_v3 has 39 samples. "
    ),
    "numbers": _fill(
        "analysis an-7 shows cohort 3 at 21.3, cohort 4 at 28.4, 5,140 − 37 = 5,103; "
    ),
    "cited": _fill("per kb:ops-001 and an-12, the rate is 2% and w16 had 504s; "),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    policies = load_policies(defaults_dir() / "validators")
    layer = ConstraintLayer(policies, _record(), services=Services(), language="en")
    ledger = _ledger()
    out: dict[str, dict[str, float]] = {}
    for name, text in INPUTS.items():
        for kind in ("fact", "communication"):
            assertion = Assertion(member="lingyi", type=kind, session="s", content=text)
            times = []
            for _ in range(args.n + 1):
                start = time.thread_time()
                layer.verify(assertion, ledger)
                times.append((time.thread_time() - start) * 1000)
            out[f"{name} as {kind}"] = {
                "cold_ms": round(times[0], 1),
                "max_ms": round(max(times[1:]), 1),
            }
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(
            "".join(
                f"{k:<28}{v['cold_ms']:>10} ms cold{v['max_ms']:>10} ms max\n"
                for k, v in out.items()
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
