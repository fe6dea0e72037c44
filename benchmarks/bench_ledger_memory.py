"""What the evidence ledger keeps after many guarded calls, and what a call costs.

Drives the server's own runtime (``GuardApp``: verify → search the shipped knowledge base →
record the evidence → append the log record) with no transport in between, in two shapes:

- ``one session``: one client connection making every call (a long conversation);
- ``short sessions``: connections of ``--per`` calls each, opened and ended through the
  server's lifespan, as the MCP SDK runs it once per stdio or in-process connection.

After the calls it reports the sessions and entries the ledger holds, the ledger's memory
(every object reachable from it, measured by walking the references: tracemalloc would slow
each call tenfold), the process's resident memory gained, and the median and p99 time of a
call. No assertions: run it before and after a change and compare.

    .venv/bin/python benchmarks/bench_ledger.py                 # 20,000 calls per shape
    .venv/bin/python benchmarks/bench_ledger.py --calls 2000 --per 10
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import anyio

from lingyi.config import load_config
from lingyi.demo import write_config
from lingyi.server.app import Caller, GuardApp
from lingyi.server.executors import IMPLEMENTATIONS

QUERIES = ("气功", "庄子逍遥游", "科学方法论", "meditation", "太极拳", "儒家 仁义")
SEARCH = IMPLEMENTATIONS["search_knowledge"].execute


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def deep_size(root: object) -> int:
    """Bytes of every object reachable from ``root`` (classes, modules, functions excluded)."""
    seen: set[int] = set()
    stack, total = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def rss_mb() -> float:
    """Resident memory now (Linux), else the peak so far (elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * 4096 / 1e6
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def held(app: GuardApp) -> tuple[int, int]:
    """Sessions and entries the ledger holds (read as the ledger keeps them)."""
    sessions = app.ledger._sessions  # a benchmark may look inside; the figures are the point
    return len(sessions), sum(len(s.entries) for s in sessions.values())


def call(app: GuardApp, session: str, i: int, times: list[float]) -> None:
    started = time.perf_counter()
    app.run_tool(Caller(session), "search_knowledge", {"query": QUERIES[i % 6]}, SEARCH)
    times.append((time.perf_counter() - started) * 1000)


async def short_sessions(app: GuardApp, calls: int, per: int, times: list[float]) -> None:
    for start in range(0, calls, per):
        async with app.lifespan(None) as scope:  # type: ignore[arg-type]
            for i in range(start, min(calls, start + per)):
                call(app, scope.session, i, times)


def run(shape: str, calls: int, per: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "repos").mkdir()
        app = GuardApp(load_config(write_config(root, root / "log.jsonl")))
        call(app, "warm-up", 0, [])  # open the KB and the log before measuring
        app.ledger._sessions.clear()
        gc.collect()
        rss = rss_mb()
        times: list[float] = []
        if shape == "one session":
            for i in range(calls):
                call(app, "one", i, times)
        else:
            anyio.run(short_sessions, app, calls, per, times)
        gc.collect()
        ledger_mb, rss = deep_size(app.ledger) / 1e6, rss_mb() - rss
        sessions, entries = held(app)
        app.close()
    return {
        "shape": shape,
        "calls": calls,
        "sessions": sessions,
        "entries": entries,
        "ledger_mb": ledger_mb,
        "rss_mb": rss,
        "median_ms": statistics.median(times),
        "p99_ms": p99(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--per", type=int, default=10, help="calls per short session")
    args = parser.parse_args()
    head = ("shape", "calls", "sessions", "entries", "ledger", "rss+", "median", "p99")
    print("{:<15} {:>6} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8}".format(*head))
    for shape in ("one session", "short sessions"):
        r = run(shape, args.calls, args.per)
        print(
            f"{r['shape']:<15} {r['calls']:>6} {r['sessions']:>8} {r['entries']:>8} "
            f"{r['ledger_mb']:>7.1f}MB {r['rss_mb']:>7.1f}MB "
            f"{r['median_ms']:>6.2f}ms {r['p99_ms']:>6.2f}ms"
        )


if __name__ == "__main__":
    main()
