"""What the keyed chain and the checkpoints cost per append, against the plain chain.

    python benchmarks/bench_log.py [--n 20000] [--warmup 500] [--fsync] [--json]

Three writers in one process, each on its own log in the same folder: the plain hash chain,
the keyed chain (HMAC-SHA256), and the keyed chain with a signed checkpoint appended to a
second file after every record. Appends are interleaved (plain, keyed, keyed+checkpoints,
then the next round in another order), so the three see the same machine noise. Each append
is timed alone, on the wall clock (``perf_counter``) and in CPU time of the thread
(``thread_time``: what the append itself costs, without the time the scheduler gave other
processes, which dominates the wall-clock p99 on a shared machine); the records are shaped
like the guard's (about 1.3 KB, seven checks). Also reported: verifying each log (per record), and what the size limit costs
on the rare record that needs it (a 2 MB argument, cut to 16 KB).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lingyi.log import KeyRing, LogOptions, VerificationLog, verify_log

KEY = "5e" * 32


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sample_record(i: int) -> dict[str, Any]:
    """A verification record as the guard writes one (before the writer's envelope)."""
    checks = [
        {"stage": stage, "code": code, "passed": True, "on_fail": "reject", "reason": "ok", "degraded": False}
        for stage, code in [
            ("pre_check", "pre.content"), ("tool_validation", "tool.owned"),
            ("tool_validation", "tool.args_schema"), ("tool_validation", "tool.path_allowed"),
            ("boundary", "boundary.medical"), ("boundary", "domain.scope"),
            ("fact_verification", "evidence.cited_ids_exist"),
        ]
    ]  # fmt: skip
    return {
        "kind": "verification",
        "source": "bench",
        "session": f"mcp-{i % 50:026d}",
        "member": "lingzhi",
        "type": "action",
        "assertion_id": None,
        "content": "检索：气功的修炼方法与呼吸的关系",
        "tool_call": {"name": "search_knowledge", "arguments": {"query": "气功", "limit": 5}},
        "evidence_ids": [],
        "decision": ("approved", "rejected", "fallback")[i % 3],
        "reason": "全部 7 项检查通过",
        "recommendation": None,
        "fallback": None,
        "checks": checks,
        "latency_ms": 0.21,
        "policy_version": "499c14e40f15",
    }


def writers(folder: Path, fsync: bool) -> dict[str, VerificationLog]:
    keys = KeyRing.from_text(KEY, "bench", "bench")
    variants = {
        "plain": LogOptions(fsync=fsync),
        "keyed": LogOptions(fsync=fsync, keys=keys),
        "keyed+checkpoints": LogOptions(fsync=fsync, keys=keys, checkpoints=folder / "anchor"),
    }
    return {name: VerificationLog(folder / f"{name}.jsonl", o) for name, o in variants.items()}


Times = dict[str, tuple[list[float], list[float]]]  # per variant: wall µs, CPU µs


def interleaved(logs: dict[str, VerificationLog], n: int, warmup: int) -> Times:
    """Append ``n`` records to each log, one of each per round, the order rotating."""
    names = list(logs)
    times: Times = {name: ([], []) for name in names}
    for i in range(warmup + n):
        order = names[i % 3 :] + names[: i % 3]
        for name in order:
            record = sample_record(i)
            wall, cpu = time.perf_counter(), time.thread_time()
            logs[name].append(record)
            if i >= warmup:
                times[name][0].append((time.perf_counter() - wall) * 1e6)
                times[name][1].append((time.thread_time() - cpu) * 1e6)
    return times


def summary(wall: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "median_us": statistics.median(wall),
        "p99_us": percentile(wall, 0.99),
        "cpu_median_us": statistics.median(cpu),
        "cpu_p99_us": percentile(cpu, 0.99),
    }


def verify_cost(folder: Path, records: int) -> dict[str, float]:
    """Microseconds per record for `lingyi log verify` of each log (one full pass)."""
    keys = KeyRing.from_text(KEY, "bench", "bench")
    runs = {
        "plain": (folder / "plain.jsonl", None, None),
        "keyed": (folder / "keyed.jsonl", keys, None),
        "keyed+checkpoints": (folder / "keyed+checkpoints.jsonl", keys, folder / "anchor"),
    }
    out = {}
    for name, (path, ring, anchor) in runs.items():
        start = time.perf_counter()
        result = verify_log(path, ring, anchor)
        assert result.ok, name
        out[name] = (time.perf_counter() - start) * 1e6 / records
    return out


def big_record_cost(folder: Path, n: int = 10) -> dict[str, float]:
    """Median ms to append a record with a 2 MB argument: cut to 16 KB, or kept whole."""
    record = sample_record(0)
    record["tool_call"] = {"name": "search_knowledge", "arguments": {"query": "气" * 700_000}}
    out = {}
    for name, limit in (("cut to 16 KB", 16384), ("no limit", 0)):
        with VerificationLog(
            folder / f"big-{limit}.jsonl", LogOptions(max_field_bytes=limit)
        ) as log:
            times = []
            for _ in range(n):
                start = time.perf_counter()
                log.append(dict(record))
                times.append((time.perf_counter() - start) * 1000)
        out[name] = statistics.median(times)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20000, help="timed appends per variant")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--fsync", action="store_true", help="fsync every record (and checkpoint)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lingyi-bench-log-", dir=Path.cwd()) as tmp:
        folder = Path(tmp)
        logs = writers(folder, args.fsync)
        times = interleaved(logs, args.n, args.warmup)
        for log in logs.values():
            log.close()
        results: dict[str, Any] = {name: summary(*values) for name, values in times.items()}
        base = results["plain"]
        for name in ("keyed", "keyed+checkpoints"):
            got = results[name]
            got["extra_median_us"] = got["median_us"] - base["median_us"]
            got["ratio_median"] = got["median_us"] / base["median_us"]
            got["ratio_p99"] = got["p99_us"] / base["p99_us"]
            got["cpu_ratio_median"] = got["cpu_median_us"] / base["cpu_median_us"]
            got["cpu_ratio_p99"] = got["cpu_p99_us"] / base["cpu_p99_us"]
        results["verify_us_per_record"] = verify_cost(folder, args.n + args.warmup)
        results["append_2mb_argument_ms"] = big_record_cost(folder)
    if args.json:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for name, value in results.items():
            sys.stdout.write(f"{name}: {json.dumps(value)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
