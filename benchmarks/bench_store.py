"""The index beside the log, against its budgets (issue 23), on a log of 1M records.

* ``ingest``: the index built from nothing (every line through the chain verifier into the
  tables): budget ≤ 30 s;
* ``stats``: ``lingyi stats`` for the last 7 days (and the 7 before, which the JSON
  compares with) from an index that is up to date: budget ≤ 1 s;
* ``verify``: ``lingyi log verify`` of the whole log (every line parsed, hashed, linked):
  budget ≤ 10 s.

The log is written once into ``benchmarks/.cache/`` (git-ignored): 1M verification records
of the writer's shape (its canonical JSON, its hash tail, ``prev`` and ``seq``), spread
evenly over 90 days, so a week holds about 78,000 of them. Each figure is the median of
``--runs`` runs in this process: wall time (``time.perf_counter``, what the budget is
about) and the process's CPU time (``time.process_time``, less blurred by a loaded machine).

    .venv/bin/python benchmarks/bench_store.py [--records N] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lingyi.log import GENESIS, canonical, verify_log
from lingyi.stats import compute_stats, days_window, resolve_zone
from lingyi.store import default_path, open_store

CACHE = Path(__file__).resolve().parent / ".cache"
BIG = 1_000_000
START = datetime(2026, 9, 1, tzinfo=UTC)
SPAN = timedelta(days=90)
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
BUDGETS = {"ingest": 30.0, "stats": 1.0, "verify": 10.0}


def _check(code: str, passed: bool, on_fail: str, reason: str) -> dict[str, Any]:
    stage = "boundary" if code.startswith(("boundary", "domain")) else "fact_verification"
    return {"code": code, "degraded": False, "on_fail": on_fail, "passed": passed,
            "reason": reason, "stage": stage}  # fmt: skip


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    """One verification as the server logs it (the fields of ``verification_record``)."""
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
    """``count`` chained records over 90 days, laid out byte for byte as the writer does."""
    rng, prev, step = random.Random(seed), GENESIS, SPAN / count
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for i in range(count):
            ts = (START + step * i).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            record = {"v": 1, "id": f"{i:026d}", "ts": ts, **_record(rng, i)}
            body = canonical({**record, "prev": prev, "seq": i + 1})
            prev = hashlib.sha256(body.encode()).hexdigest()
            out.write((body[:-1] + f',"hash":"{prev}"}}\n').encode())
    tmp.replace(path)


def cached_log(count: int) -> Path:
    """The log of ``count`` records, built once into the cache."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"log-{count}.jsonl"
    if not path.exists():
        print(f"building {path} (once) ...", file=sys.stderr)
        started = time.perf_counter()
        build_log(path, count)
        print(f"  built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return path


def last_week(path: Path) -> Any:
    """The 7 local days (UTC) that end with the log's last record."""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 8192))
        last = json.loads(handle.read().splitlines()[-1])
    now = datetime.fromisoformat(last["ts"].replace("Z", "+00:00"))
    return days_window(7, resolve_zone("UTC"), now=now)


def _ingest(path: Path) -> None:
    default_path(path).unlink(missing_ok=True)
    open_store(path).close()


def _timed(run: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds (CPU: this process's own, less blurred by load)."""
    walls, cpus = [], []
    for _ in range(runs):
        started, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=BIG)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = cached_log(args.records)
    window = last_week(path)
    scenarios: dict[str, Callable[[], object]] = {
        "ingest": lambda: _ingest(path),
        "stats": lambda: compute_stats(path, window),
        "verify": lambda: verify_log(path),
    }
    print(f"log: {path} ({args.records:,} records, {path.stat().st_size / 1e9:.2f} GB)")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, run in scenarios.items():
        wall, cpu = _timed(run, args.runs)
        verdict = "within" if wall <= BUDGETS[name] else "OVER"
        print(f"{name:<7} wall {wall:8.2f} s  cpu {cpu:8.2f} s  "
              f"budget {BUDGETS[name]:5.1f} s  {verdict}", flush=True)  # fmt: skip
    total = compute_stats(path, window)["totals"]["total"]
    print(f"(stats window: {total:,} verifications in the week, and the week before)")


if __name__ == "__main__":
    main()
