"""In-process verification latency and log append throughput.

    python benchmarks/bench_verify.py [--sizes 0,10000,1000000] [--n 2000] [--json]

For each prior log size, a realistic mix of assertions (the example transcripts: tool
calls, communications, facts with and without evidence, predictions) is verified and
logged with ``Guard.check``. Reports p50/p99 of verify-only and verify+log, append
throughput, and, as a baseline in the same process, a naive logger that rewrites the
whole log on every record (what the implementation we replace did).
The 1,000,000-record log is built once under benchmarks/.cache/ (about 0.5 GB).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lingyi.config import load_config
from lingyi.council import MemoryCouncil
from lingyi.guard import Guard
from lingyi.log import GENESIS, VerificationLog, canonical, record_hash
from lingyi.models import Assertion
from lingyi.replay import Replayer, read_events

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / ".cache"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def build_log(path: Path, n: int) -> None:
    """Write n chained records directly (fast), shaped like real verification records."""
    if n == 0 or (path.exists() and path.stat().st_size > 0):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    prev = GENESIS
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            record = sample_record(i, prev)
            record["hash"] = prev = record_hash(record)
            handle.write(canonical(record) + "\n")


def sample_record(i: int, prev: str) -> dict[str, Any]:
    decision = ("approved", "rejected", "fallback")[i % 3]
    return {
        "v": 1,
        "id": f"{i:026d}",
        "ts": "2026-11-23T10:00:00.000Z",
        "kind": "verification",
        "source": "bench",
        "session": f"s{i % 50}",
        "member": "lingzhi",
        "type": "action",
        "content": "检索：气功的修炼方法",
        "tool_call": {"name": "search_knowledge", "arguments": {"query": "气功"}},
        "evidence_ids": [],
        "decision": decision,
        "reason": "all checks passed",
        "recommendation": None,
        "fallback": None,
        "latency_ms": 0.2,
        "policy_version": "bench",
        "checks": [
            {
                "stage": "boundary",
                "code": "boundary.medical",
                "passed": True,
                "on_fail": "reject",
                "reason": "ok",
                "degraded": False,
            }
        ],
        "prev": prev,
    }


def workload() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for path in sorted((ROOT / "examples").glob("*.jsonl")):
        events += [
            e
            for _, e in read_events(path.read_text(encoding="utf-8").splitlines())
            if isinstance(e, dict)
        ]
    return events


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def measure(log_path: Path, n: int) -> dict[str, float]:
    config = load_config(ROOT / "config" / "lingyi.toml", log=log_path)
    guard = Guard.from_config(config, source="bench", council=MemoryCouncil())
    replayer = Replayer(guard)
    events = workload()
    list(replayer.run(json.dumps(e) for e in events if e["event"] != "assertion"))
    assertions = [Assertion.model_validate(e) for e in events if e["event"] == "assertion"]
    cycle = itertools.cycle(assertions)
    verify_only = timed(lambda: guard.layer.verify(next(cycle), replayer.ledger), n)
    with_log = timed(lambda: guard.check(next(cycle), replayer.ledger), n)
    guard.close()
    return summary("verify", verify_only) | summary("verify+log", with_log)


def summary(name: str, values: list[float]) -> dict[str, float]:
    return {f"{name} p50 ms": statistics.median(values), f"{name} p99 ms": percentile(values, 0.99)}


def append_throughput(path: Path, n: int = 20000) -> float:
    path.unlink(missing_ok=True)
    with VerificationLog(path) as log:
        start = time.perf_counter()
        for i in range(n):
            log.append(sample_record(i, ""))
        return n / (time.perf_counter() - start)


def naive_rewrite_baseline(path: Path, prior: int, n: int = 20) -> dict[str, float]:
    """The replaced design: read the whole log, add one record, write it all back."""
    build_log(path, prior)
    lines = path.read_text(encoding="utf-8")

    def once() -> None:
        records = [json.loads(x) for x in lines.splitlines()]
        records.append(sample_record(len(records), ""))
        path.with_suffix(".tmp").write_text(
            "\n".join(json.dumps(r, ensure_ascii=False) for r in records)
        )

    return summary(f"naive rewrite @{prior}", timed(once, n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="0,10000,1000000")
    parser.add_argument("--n", type=int, default=2000, help="verifications per size")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        path = CACHE / f"verify-log-{size}.jsonl"
        sys.stderr.write(f"building/using a {size}-record log at {path}\n")
        build_log(path, size)
        work = CACHE / f"work-{size}.jsonl"
        work.unlink(missing_ok=True)
        if size:  # append to a copy, so the cached log stays at its size
            shutil.copyfile(path, work)
        results[f"log {size}"] = measure(work, args.n)
        work.unlink(missing_ok=True)
    results["append records/s"] = append_throughput(CACHE / "append.jsonl")
    results["baseline"] = naive_rewrite_baseline(CACHE / "verify-log-10000.jsonl", 10000)
    out = json.dumps(results, indent=2, ensure_ascii=False)
    sys.stdout.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
