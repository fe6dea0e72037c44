"""What finding a call's approval costs, against one append of a verification record.

    python benchmarks/bench_approvals.py [--n 300] [--json]

The gate reads the log backwards only as far as two expiry windows (``[approvals] ttl_s``),
so its cost should not grow with the log. Two logs, each with 200 approval records (100
requests, 100 approvals) in the window: a small one (1,000 older records before them) and a
large one (200,000). Timed, interleaved in one process: ``Book.recent()`` on each, and the
baseline, one append of a guard-shaped verification record (what every guarded call already
pays). Wall clock (``perf_counter``), median and p99, and the ratio of each to the baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench_log import percentile, sample_record
from lingyi.approvals import Book
from lingyi.log import VerificationLog
from lingyi.log.records import ts_key

TTL_S = 900.0


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def make_log(path: Path, old: int) -> None:
    """``old`` verification records from a day ago, then 200 approval records of now."""
    then = ts_key(datetime.now(UTC) - timedelta(days=1))
    now = datetime.now(UTC)
    with path.open("w", encoding="utf-8") as out:
        for i in range(old):
            out.write(_line({"v": 1, "id": f"old-{i}", "ts": then, **sample_record(i)}))
        for i in range(100):
            base = {"kind": "approval", "approval_id": f"ap-{i}", "session": "s", "member": "lingflow",
                    "tool": "git.git_reset", "args_digest": f"sha256:{i:064x}", "args": {"repo_path": "/r"},
                    "policy_version": "v1", "expires": ts_key(now + timedelta(seconds=TTL_S)), "v": 1}  # fmt: skip
            out.write(_line({**base, "id": f"r{i}", "ts": ts_key(now), "event": "requested"}))
            out.write(_line({**base, "id": f"a{i}", "ts": ts_key(now), "event": "approved"}))


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        books = {}
        for name, old in (("small", 1_000), ("large", 200_000)):
            make_log(root / f"{name}.jsonl", old)
            books[name] = Book(VerificationLog(root / f"{name}.jsonl"), TTL_S)
        base = VerificationLog(root / "baseline.jsonl")
        times: dict[str, list[float]] = {"append": [], "small": [], "large": []}
        assert len(books["large"].recent()) == 100
        for i in range(args.n):
            record = sample_record(i)
            times["append"].append(timed(lambda r=record: base.append(r)))
            for name in ("large", "small") if i % 2 else ("small", "large"):
                times[name].append(timed(books[name].recent))
    report = {
        name: {"median_ms": round(statistics.median(v), 3), "p99_ms": round(percentile(v, 0.99), 3)}
        for name, v in times.items()
    }
    for name in ("small", "large"):
        for stat in ("median_ms", "p99_ms"):
            report[name][stat.replace("_ms", "_ratio")] = round(
                report[name][stat] / report["append"][stat], 2
            )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, row in report.items():
            print(f"{name:8} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
