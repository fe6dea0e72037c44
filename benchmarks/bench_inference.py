"""What inference.labelled costs per call, in-process.

Times the check alone (the canonical text computed beforehand, as the layer shares it between
checks) over the content of every assertion in ``examples/``: each text is run ``--runs``
times and its fastest run kept, so that other processes on a shared machine do not blur the
figures. Then the same on adversarial 4,000-character texts (the longest content the shipped
policy accepts) full of terms, labels or meetings: the reading uses position indexes, so their
cost grows with the text, not with its square. No assertions.

    .venv/bin/python benchmarks/bench_inference.py
    .venv/bin/python benchmarks/bench_inference.py --runs 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from lingyi.checks import REGISTRY, load_builtin_checks
from lingyi.checks._registry import CheckContext, Services
from lingyi.config import defaults_dir
from lingyi.council import MemoryCouncil
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import PolicySet, load_policies

ROOT = Path(__file__).resolve().parent.parent
CODE = "inference.labelled"
LONG = 4000
ADVERSARIAL = {
    "forecasts and hedges": "下周一定会上线，可能不会。",
    "English forecasts": "It will definitely ship by Friday, may be in May. ",
    "meetings (会 in 会议)": "会议",
    "labels": "推演:",
    "plain words": "a ",
}


def contexts(policies: PolicySet) -> list[CheckContext]:
    """A check context for the content of every assertion in examples/."""
    out = []
    for path in sorted(ROOT.glob("examples/**/*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            member = policies.resolve(str(event.get("member", "")))
            if event.get("event") == "assertion" and event.get("content") and member:
                out.append(_context(policies, member.id, event["type"], event["content"]))
    return out


def _context(policies: PolicySet, member: str, kind: str, content: str) -> CheckContext:
    assertion = Assertion(session="s", member=member, type=kind, content=content)
    resolved = policies.resolve(member)
    assert resolved is not None
    ctx = CheckContext(
        assertion, resolved, policies, Ledger(), MemoryCouncil(), Services(), "en", code=CODE
    )
    _ = ctx.canon  # shared by every check: not this check's cost
    return ctx


def fastest(call: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    at = lambda q: ordered[round(q * (len(ordered) - 1))] * 1e6  # noqa: E731
    return (
        f"mean {statistics.mean(ordered) * 1e6:.1f} µs, p50 {at(0.5):.1f}, p90 {at(0.9):.1f}, "
        f"p99 {at(0.99):.1f}, max {ordered[-1] * 1e6:.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per text; the fastest counts")
    args = parser.parse_args()
    load_builtin_checks()
    policies = load_policies(defaults_dir() / "validators")
    spec = REGISTRY[CODE]
    params = spec.params()
    ctxs = contexts(policies)
    for ctx in ctxs:
        spec.func(ctx, params)  # warm the caches a running server has warm
    samples = [fastest(partial(spec.func, ctx, params), args.runs) for ctx in ctxs]
    sys.stdout.write(f"{len(ctxs)} labelled texts: {summary(samples)}\n")
    for name, unit in ADVERSARIAL.items():
        ctx = _context(policies, "lingresearch", "fact", (unit * LONG)[:LONG])
        cost = fastest(partial(spec.func, ctx, params), 3)
        sys.stdout.write(f"{LONG} characters of {name}: {cost * 1e3:.1f} ms\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
