"""How fast ``lingyi stats`` is over big logs, and whether its memory stays flat.

Builds a realistic log of 1,000,000 verification records (6 members, 5-9 checks each,
about 1.2 KB a line, a valid hash chain) once under ``benchmarks/.cache/``, takes its first
10k and 100k lines as smaller logs, then runs the stats in a fresh process per run and
reports the median wall time and the peak resident memory (``ru_maxrss``) of that process.

    .venv/bin/python benchmarks/bench_stats.py            # 10k, 100k, 1M; 3 runs each
    .venv/bin/python benchmarks/bench_stats.py --runs 5 --sizes 10000 1000000
    .venv/bin/python benchmarks/bench_stats.py --workers 1   # a single pass, no workers
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lingyi.log import GENESIS, canonical
from lingyi.stats import compute_stats, range_window, resolve_zone, week_window

CACHE = Path(__file__).resolve().parent / ".cache"
BIG = 1_000_000
START = datetime(2026, 9, 1, tzinfo=UTC)
MEMBERS = ("lingyi", "lingzhi", "lingflow", "lingresearch", "lingtong", "灵研")
TOOLS = ("search_knowledge", "git_push", "git_log", "query_data", "council_post", None)
PASSING = ("pre.non_empty", "member.known", "tool.owned", "tool.args_schema")
FAILING = (
    ("boundary.medical", "reject", "医疗边界：不能检索用药建议"),
    ("communication.on_record", "reject", "灵通没有发过这条消息"),
    ("inference.labelled", "fallback", "推演未标注【推演】"),
    ("evidence.cited_ids_exist", "reject", "cited id not in the session ledger"),
    ("domain.scope", "fallback", "outside the allowed domains"),
    ("tool.path_allowed", "reject", "path outside the allowed roots"),
)


def _check(code: str, passed: bool, on_fail: str, reason: str) -> dict[str, Any]:
    stage = "boundary" if code.startswith(("boundary", "domain")) else "fact_verification"
    return {
        "code": code,
        "degraded": False,
        "on_fail": on_fail,
        "passed": passed,
        "reason": reason,
        "stage": stage,
    }


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    checks = [_check(c, True, "reject", "ok") for c in PASSING]
    checks += [_check(c, True, o, "ok") for c, o, _ in rng.sample(FAILING, rng.randint(1, 3))]
    decision = "approved"
    if rng.random() < 0.2:
        code, on_fail, reason = rng.choice(FAILING)
        checks.append(_check(code, False, on_fail, reason))
        decision = "rejected" if on_fail == "reject" else "fallback"
    tool = rng.choice(TOOLS)
    return {
        "kind": "verification",
        "session": f"s-{i // 50}",
        "member": rng.choice(MEMBERS),
        "type": rng.choice(("fact", "action", "communication")),
        "content": "灵知知识库中有关于气功的文章，见 kb:qigong-001 与相关综述 " * 2,
        "tool_call": {"name": tool, "arguments": {"query": "气功"}} if tool else None,
        "evidence_ids": ["kb:qigong-001"],
        "assertion_id": f"a-{i}",
        "decision": decision,
        "reason": "all checks passed" if decision == "approved" else "blocked",
        "recommendation": None if decision == "approved" else "call search_knowledge first",
        "fallback": None,
        "checks": checks,
        "latency_ms": round(rng.lognormvariate(2.5, 0.8), 3),
        "policy_version": "2026.11.1",
        "source": "server",
    }


def build_log(path: Path, count: int, seed: int = 7) -> None:
    """Write ``count`` records with a valid hash chain, as VerificationLog would."""
    rng, prev = random.Random(seed), GENESIS
    step = timedelta(days=90) / count
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for i in range(count):
            ts = (START + step * i).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            record = {"v": 1, "id": f"{i:026d}", "ts": ts, **_record(rng, i), "prev": prev}
            body = canonical(record)
            prev = hashlib.sha256(body.encode()).hexdigest()
            out.write((body[:-1] + f',"hash":"{prev}"}}\n').encode())
    tmp.replace(path)


def cached_log(count: int) -> Path:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"log-{count}.jsonl"
    if path.exists():
        return path
    big = CACHE / f"log-{BIG}.jsonl"
    if not big.exists():
        print(f"building {big} (once) ...", file=sys.stderr)
        build_log(big, BIG)
    if count == BIG:
        return big
    with big.open("rb") as src, path.open("wb") as dst:
        for _, line in zip(range(count), src, strict=False):
            dst.write(line)
    return path


def child(path: Path, scope: str, workers: int | None) -> None:
    """One measured run in a fresh process: prints wall seconds and peak RSS."""
    zone = resolve_zone("UTC")
    if scope == "all":
        window = range_window("2026-01-01", "2026-12-31", zone)
    else:
        window = week_window("2026-W45", zone)
    started = time.perf_counter()
    result = compute_stats(path, window, workers=workers)
    wall = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    counted = result["totals"]["total"]
    print(
        json.dumps({"wall": wall, "rss_mb": rss_mb, "workers_mb": workers_mb, "counted": counted})
    )


def measure(path: Path, scope: str, runs: int, workers: int | None) -> dict[str, float]:
    results = []
    for _ in range(runs):
        cmd = [sys.executable, __file__, "--child", str(path), scope]
        cmd += ["--workers", str(workers)] if workers else []
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out))
    return {
        "wall": statistics.median(r["wall"] for r in results),
        "rss_mb": max(r["rss_mb"] for r in results),
        "workers_mb": max(r["workers_mb"] for r in results),
        "counted": results[0]["counted"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, BIG])
    parser.add_argument("--workers", type=int, help="force N chunks (1 = one pass); default auto")
    parser.add_argument("--child", nargs=2, metavar=("LOG", "SCOPE"))
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], args.workers)
        return
    print(
        f"{'records':>9} {'scope':>6} {'counted':>9} {'median s':>9} {'rec/s':>9} "
        f"{'RSS MB':>7} {'worker RSS MB':>13}"
    )
    for size in args.sizes:
        path = cached_log(size)
        for scope in ("all", "week"):
            m = measure(path, scope, args.runs, args.workers)
            rate = size / m["wall"]
            print(
                f"{size:>9} {scope:>6} {m['counted']:>9.0f} {m['wall']:>9.2f} "
                f"{rate:>9.0f} {m['rss_mb']:>7.1f} {m['workers_mb']:>13.1f}"
            )


if __name__ == "__main__":
    main()
