"""What an answer costs to verify, against a plain fact of the same text, interleaved.

    python benchmarks/bench_answers.py [--n 400] [--json]

An answer runs every check an assertion runs plus the answer checks (its Markdown parsed
twice: as written and canonical) and the kind's finish (attempts, gate, sources). Each round
verifies, in the same process and alternating, a plain fact with the answer's text and the
answer itself, against a ledger holding the search results it cites (the layer only: no log).
Reports the median and p99 of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from lingyi.answers import ANSWER
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence
from lingyi.policy import load_policies

ROOT = Path(__file__).resolve().parent.parent
KB = "https://kb.lingyi.local"
TEXT = (
    "气功源于古代的导引与吐纳[气功源流](https://kb.lingyi.local/qg-001)，"
    "调息是其基础[气功与呼吸](https://kb.lingyi.local/qg-002)。\n\n"
    "![导引图](https://kb.lingyi.local/img/daoyin.png)\n\n"
    "```mermaid\nflowchart LR\n  导引 --> 吐纳 --> 气功\n```\n"
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _tag(i: int) -> str:
    """A short word of its own per number (letters only: a number would be a claim)."""
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters += chr(ord("a") + r)
        if i == 0:
            return f" see {letters}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    layer = ConstraintLayer(load_policies(ROOT / "validators"), MemoryCouncil(), language="zh")
    found = [
        Evidence(id="kb:qg-001", title="气功源流", url=f"{KB}/qg-001"),
        Evidence(id="kb:qg-002", title="气功与呼吸", url=f"{KB}/qg-002"),
        Evidence(id="kb:img-001", title="导引图", url=f"{KB}/img/daoyin.png"),
    ]
    fact_ms: list[float] = []
    answer_ms: list[float] = []
    for i in range(args.n):
        ledger = Ledger()
        ledger.record("s", "lingzhi", "search_knowledge", {"query": "气功"}, found)
        # Distinct texts every round and for each side: a cache warmed by one would flatter
        # the other (canonical forms, parses and term matches are cached by text).
        fact = Assertion(member="lingzhi", type="fact", content=TEXT + _tag(2 * i), session="s")
        answer = TEXT + _tag(2 * i + 1)
        given = {
            "member": "lingzhi",
            "session": "s",
            "question": f"气功{_tag(i)}",
            "answer": answer,
        }
        started = time.perf_counter()
        layer.verify(fact, ledger)
        fact_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        assertion = ANSWER.assertion(given)
        result = layer.verify(assertion, ledger)
        ANSWER.finish(assertion, result, ledger.open("s"))
        answer_ms.append((time.perf_counter() - started) * 1000)
        assert result.decision == "approved", result.reason
    figures = {
        "n": args.n,
        "fact_ms": {"p50": statistics.median(fact_ms), "p99": percentile(fact_ms, 0.99)},
        "answer_ms": {"p50": statistics.median(answer_ms), "p99": percentile(answer_ms, 0.99)},
    }
    figures["ratio_p50"] = figures["answer_ms"]["p50"] / figures["fact_ms"]["p50"]
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    else:
        f, a = figures["fact_ms"], figures["answer_ms"]
        sys.stdout.write(
            f"fact   p50 {f['p50']:.2f} ms  p99 {f['p99']:.2f} ms\n"
            f"answer p50 {a['p50']:.2f} ms  p99 {a['p99']:.2f} ms  ({figures['ratio_p50']:.2f}x)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
