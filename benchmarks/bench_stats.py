"""How fast ``lingyi stats`` is over a big log: from the rollup, and recomputed with ``--full``.

Builds a realistic log of 1,000,000 verification records (6 members, 5-9 checks each,
about 1.5 KB a line, a valid hash chain, 90 days) once under ``benchmarks/.cache/``, and
times the stats of its last 7 days, each run in a fresh process (wall time of
``compute_stats`` and the process's peak resident memory, ``ru_maxrss``; worker processes
separately), interleaved round by round so that every scenario sees the same machine:

* ``full``: the windowed pass over the whole log (``lingyi stats --full``): every line's
  hash and link checked, the week's records parsed; the design the rollup replaces;
* ``rollup``: from the rollup, up to date (``lingyi stats``);
* ``rollup+N``: from the rollup after N records were appended since it was saved (on a copy
  of the log that grows by N each round);
* ``rebuild`` (``--rebuild``): no rollup yet: it is built from the whole log first.

    .venv/bin/python benchmarks/bench_stats.py                 # 1M records, 5 rounds
    .venv/bin/python benchmarks/bench_stats.py --runs 9 --append 10000
    .venv/bin/python benchmarks/bench_stats.py --records 100000 --rebuild
    .venv/bin/python benchmarks/bench_stats.py --memory 10000 100000 1000000
    .venv/bin/python benchmarks/bench_stats.py --baseline /tmp/base/src   # + full@base

``--pairs N`` (with ``--baseline``) times ``full`` and ``full@base`` one right after the
other N times, alternating which goes first, and reports each pair and the median of the
ratios: on a shared machine a pair sees the same neighbours, where medians of rounds do not.

``--memory`` reports the rollup's peak memory and time at several log sizes (same 90 days).
``--baseline SRC`` adds the scenario ``full@base``: ``--full`` with the ``lingyi`` package
found in SRC (e.g. ``git archive <commit> src | tar -x -C /tmp/base``), interleaved with the
others, so that a change is timed against the code before it on the same machine. The CPU
seconds of each run (its own and its worker processes') are reported beside the wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lingyi.log import GENESIS, canonical
from lingyi.stats import compute_stats, days_window, resolve_zone, rollup_path

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


def _ts(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write(out: Any, rng: random.Random, first: int, count: int, prev: str, step: timedelta) -> str:
    """Append ``count`` chained records numbered from ``first``; returns the last hash."""
    for i in range(first, first + count):
        ts = _ts(START + step * i)
        record = {"v": 1, "id": f"{i:026d}", "ts": ts, **_record(rng, i), "prev": prev}
        body = canonical(record)
        prev = hashlib.sha256(body.encode()).hexdigest()
        out.write((body[:-1] + f',"hash":"{prev}"}}\n').encode())
    return prev


def build_log(path: Path, count: int, seed: int = 7) -> None:
    """Write ``count`` records over 90 days with a valid hash chain, as VerificationLog would."""
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        _write(out, random.Random(seed), 0, count, GENESIS, SPAN / count)
    tmp.replace(path)


def append_records(path: Path, count: int) -> None:
    """Append ``count`` more records to a log made by :func:`build_log`, chained to its end
    and dated right after its last record (so still in its last week)."""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 8192))
        last = json.loads(handle.read().splitlines()[-1])
    first = int(last["id"]) + 1
    step = (datetime.fromisoformat(last["ts"]) - START) / max(first - 1, 1)
    with path.open("ab") as out:
        _write(out, random.Random(first), first, count, last["hash"], step)


def cached_log(count: int) -> Path:
    """The first ``count`` records of the 1M log (built once), as their own log file."""
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


def last_week(path: Path) -> Any:
    """The 7 local days (UTC) that end with the log's last record."""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 8192))
        last = json.loads(handle.read().splitlines()[-1])
    now = datetime.fromisoformat(last["ts"].replace("Z", "+00:00"))
    return days_window(7, resolve_zone("UTC"), now=now)


# --------------------------------------------------------------------------- one run


def child(path: Path, scenario: str, append: int) -> None:
    """One measured run in a fresh process: prints wall seconds and peak memory."""
    if scenario == "rebuild":
        rollup_path(path).unlink(missing_ok=True)
    if scenario.startswith("rollup+"):
        append_records(path, append)  # not timed: the guard wrote these meanwhile
    window = last_week(path)
    started = time.perf_counter()
    result = compute_stats(path, window, rollup=scenario != "full")
    wall = time.perf_counter() - started
    own, workers = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                "counted": result["totals"]["total"],
                "ok": result["integrity"]["ok"],
            }
        )
    )


def run(path: Path, scenario: str, append: int = 0, base: str | None = None) -> dict[str, Any]:
    """One run in a fresh process; ``full@base`` is ``full`` with the package in ``base``."""
    env = None
    if scenario == "full@base":
        scenario, env = "full", {**os.environ, "PYTHONPATH": str(base)}
    cmd = [sys.executable, __file__, "--child", str(path), scenario, "--append", str(append)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _row(name: str, results: list[dict[str, Any]], base: float | None) -> str:
    walls = sorted(r["wall"] for r in results)
    median = statistics.median(walls)
    ratio = f"{base / median:8.1f}×" if base else f"{'':>9}"
    rss = statistics.median(r["rss_mb"] for r in results)
    workers = max(r["workers_mb"] for r in results)
    cpu = statistics.median(r["cpu"] for r in results)
    return (
        f"{name:>14} {len(walls):>4} {median:>9.3f} {walls[0]:>8.3f} {walls[-1]:>8.3f} "
        f"{ratio} {cpu:>7.2f} {rss:>7.1f} {workers:>8.1f} {results[0]['counted']:>8}"
    )


def compare(records: int, runs: int, append: int, rebuild: bool, base: str | None) -> None:
    path = cached_log(records)
    grown = path.with_name(f"{path.stem}-grown.jsonl")
    shutil.copyfile(path, grown)  # the copy that records are appended to
    print(f"log: {path} ({path.stat().st_size / 1e9:.2f} GB); preparing the rollups ...")
    run(path, "rollup")
    run(grown, "rollup")
    scenarios = ["full", "rollup", f"rollup+{append}"] + (["rebuild"] if rebuild else [])
    scenarios += ["full@base"] if base else []
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in scenarios}
    loads = [os.getloadavg()[0]]
    for i in range(runs):
        order = scenarios[i % len(scenarios) :] + scenarios[: i % len(scenarios)]
        for scenario in order:
            target = grown if scenario.startswith("rollup+") else path
            results[scenario].append(run(target, scenario, append, base))
        loads.append(os.getloadavg()[0])
    grown.unlink()
    rollup_path(grown).unlink(missing_ok=True)
    print(
        f"load average (1 min) during the runs: {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'scenario':>14} {'runs':>4} {'median s':>9} {'min s':>8} {'max s':>8} "
        f"{'vs full':>9} {'CPU s':>7} {'RSS MB':>7} {'wkr MB':>8} {'counted':>8}"
    )
    base = statistics.median(r["wall"] for r in results["full"])
    for scenario in scenarios:
        print(_row(scenario, results[scenario], None if scenario == "full" else base))


def pairs(records: int, count: int, base: str) -> None:
    """``full`` against ``full@base`` in ``count`` back-to-back pairs."""
    path = cached_log(records)
    ratios: list[tuple[float, float]] = []
    for i in range(count):
        order = ["full", "full@base"] if i % 2 == 0 else ["full@base", "full"]
        got = {s: run(path, s, 0, base) for s in order}
        new, old = got["full"], got["full@base"]
        ratios.append((new["wall"] / old["wall"], new["cpu"] / old["cpu"]))
        print(
            f"pair {i + 1}: full {new['wall']:.2f} s, {new['cpu']:.2f} s CPU; full@base "
            f"{old['wall']:.2f} s, {old['cpu']:.2f} s CPU; load {os.getloadavg()[0]:.1f}"
        )
    walls, cpus = (sorted(r[k] for r in ratios) for k in (0, 1))
    print(
        f"full / full@base, median of {count} pairs: wall {statistics.median(walls):.3f}× "
        f"({walls[0]:.3f}–{walls[-1]:.3f}), CPU {statistics.median(cpus):.3f}× "
        f"({cpus[0]:.3f}–{cpus[-1]:.3f})"
    )


def memory(sizes: list[int], runs: int) -> None:
    print(f"{'records':>9} {'median s':>9} {'RSS MB':>7} {'rollup KB':>9}")
    for size in sizes:
        path = cached_log(size)
        run(path, "rollup")
        results = [run(path, "rollup") for _ in range(runs)]
        wall = statistics.median(r["wall"] for r in results)
        rss = statistics.median(r["rss_mb"] for r in results)
        kb = rollup_path(path).stat().st_size / 1024
        print(f"{size:>9} {wall:>9.3f} {rss:>7.1f} {kb:>9.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=BIG, help="log size (≤ 1,000,000)")
    parser.add_argument("--runs", type=int, default=5, help="rounds of interleaved runs")
    parser.add_argument("--append", type=int, default=1000, help="records appended per round")
    parser.add_argument("--rebuild", action="store_true", help="also time building the rollup")
    parser.add_argument("--memory", type=int, nargs="+", metavar="N", help="rollup at sizes N")
    parser.add_argument("--baseline", metavar="SRC", help="also time --full with the code in SRC")
    parser.add_argument("--pairs", type=int, metavar="N", help="N back-to-back pairs (--baseline)")
    parser.add_argument("--child", nargs=2, metavar=("LOG", "SCENARIO"))
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], args.append)
    elif args.pairs:
        if not args.baseline:
            parser.error("--pairs needs --baseline SRC")
        pairs(args.records, args.pairs, args.baseline)
    elif args.memory:
        memory(args.memory, args.runs)
    else:
        compare(args.records, args.runs, args.append, args.rebuild, args.baseline)


if __name__ == "__main__":
    main()
