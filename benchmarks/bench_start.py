"""How fast lingyi starts: ``lingyi verify`` per call, and ``lingyi serve`` to its first answer.

Interleaved in one run, ``--runs`` times each, so load on the machine touches all alike:

- ``python -c pass``: the interpreter alone, the floor of any command;
- ``lingyi verify``: one assertion verified and logged, the process's whole wall time;
- ``lingyi serve``: from spawning the process to the answer of ``initialize`` (a real MCP
  client over stdio), against the same for ``benchmarks/bare_server.py`` (the same SDK and
  knowledge base, no guard).

Medians and p90 in ms, and the ratios. No assertions.

    .venv/bin/python benchmarks/bench_start.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import Client

from bench_server import Deployment, clean_env, deploy, stdio

VERIFY = ["verify", "--member", "lingzhi", "--type", "fact", "--content", "庄子的逍遥游讲的是自由"]


def wall_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


async def first_answer_ms(argv: list[str]) -> float:
    """Spawn the server and complete the MCP handshake (initialize answered)."""
    started = time.perf_counter()
    async with Client(stdio(argv)):
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed


def measures(dep: Deployment) -> dict[str, Callable[[], float]]:
    lingyi = [sys.executable, "-m", "lingyi", "--config", str(dep.config)]

    def serve(argv: list[str]) -> Callable[[], float]:
        run: Callable[[], Awaitable[float]] = lambda: first_answer_ms(argv)  # noqa: E731
        return lambda: anyio.run(run)

    return {
        "python -c pass": lambda: wall_ms([sys.executable, "-c", "pass"]),
        "lingyi verify": lambda: wall_ms([*lingyi, *VERIFY]),
        "serve initialize": serve(dep.guarded()),
        "bare initialize": serve(dep.bare()),
    }


def p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lingyi-start-") as tmp:
        steps = measures(deploy(Path(tmp), fsync=False))
        times: dict[str, list[float]] = {name: [] for name in steps}
        for step in steps.values():  # warm the disk cache and the bytecode
            step()
        for r in range(args.runs):
            for name in list(steps) if r % 2 == 0 else list(reversed(steps)):
                times[name].append(steps[name]())
    med = {n: statistics.median(v) for n, v in times.items()}
    rows = [f"load average {load:.2f} → {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)"]
    rows += [f"{n:<18} median {med[n]:7.1f} ms  p90 {p90(v):7.1f} ms" for n, v in times.items()]
    rows.append(
        f"verify / python -c pass: {med['lingyi verify'] / med['python -c pass']:.2f}x; "
        f"serve / bare initialize: {med['serve initialize'] / med['bare initialize']:.2f}x"
    )
    sys.stdout.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
