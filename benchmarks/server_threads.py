"""Where each server process spends its CPU per call: the event loop against the worker threads.

``bench_server.py`` reads each server's CPU per call as one figure; this splits it by thread
(``/proc/PID/task/TID/stat``, Linux), so that the guard's extra CPU can be placed: in the
event-loop thread (the SDK's request handling, our tool function, serialising the larger
result, stdio) or in the worker threads (verify, log, search, ledger, the reply). It starts
``lingyi serve`` and ``benchmarks/bare_server.py`` over stdio, as ``bench_server.py`` does, warms
both, lets them idle (a background thread that spends CPU while no call runs shows there),
then times ``--calls`` calls interleaved call by call, the order alternating.

Per server: user + system CPU per call of the main thread and of every other thread together,
and of the whole process; the idle CPU per second. No assertions. A sampling profile of either
process under the same load: run ``py-spy record --pid PID`` beside it (not a dependency).

    .venv/bin/python benchmarks/server_threads.py [--calls 2000] [--idle 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from bench_server import Deployment, call, children, deploy, p99, stdio

Threads = dict[int, float]  # thread id → CPU ms so far
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> Threads:
    """CPU time (user + system, ms) of each live thread of ``pid``."""
    found: Threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile: its time is in no later reading either
            continue
        found[int(task.name)] = (int(fields[11]) + int(fields[12])) * TICK_MS
    return found


def split(pid: int, before: Threads, after: Threads, calls: int) -> tuple[float, float]:
    """µs per call of the main (event-loop) thread and of all other threads together."""
    used = {tid: ms - before.get(tid, 0.0) for tid, ms in after.items()}
    main = used.get(pid, 0.0)
    return main * 1000 / calls, (sum(used.values()) - main) * 1000 / calls


async def measure(dep: Deployment, calls: int, warmup: int, idle_s: float) -> list[str]:
    async with Client(stdio(dep.guarded())) as guarded, Client(stdio(dep.bare())) as bare:
        clients = {"guarded": guarded, "bare": bare}
        for i in range(warmup):
            for client in clients.values():
                await call(client, i)
        pids = children()
        rest = {name: threads(pid) for name, pid in pids.items()}
        await anyio.sleep(idle_s)
        start = {name: threads(pid) for name, pid in pids.items()}
        times: dict[str, list[float]] = {name: [] for name in clients}
        for i in range(calls):
            for name in list(clients) if i % 2 == 0 else list(reversed(clients)):
                times[name].append(await call(clients[name], i))
        end = {name: threads(pid) for name, pid in pids.items()}
    rows = []
    for name, pid in pids.items():
        idle = sum(start[name].values()) - sum(rest[name].values())
        main, workers = split(pid, start[name], end[name], calls)
        rows.append(
            f"{name:<8} median {statistics.median(times[name]):.3f} ms, p99 "
            f"{p99(times[name]):.3f} ms; CPU per call: event loop {main:.0f} µs, worker and "
            f"other threads {workers:.0f} µs, all {main + workers:.0f} µs; "
            f"idle {idle / idle_s:.1f} ms/s"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per server")
    parser.add_argument("--warmup", type=int, default=60, help="untimed calls per server first")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds idle before the calls")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lingyi-bench-") as tmp:
        dep = deploy(Path(tmp), fsync=False)
        load = os.getloadavg()[0]
        rows = anyio.run(measure, dep, args.calls, args.warmup, args.idle)
    rows.insert(0, f"load average {load:.2f} → {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    rows.append(f"({args.calls} calls each, {time.monotonic() - started:.0f} s)")
    sys.stdout.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
