"""How fast lingyi starts, against the budgets of issue 23 (reported in BENCHMARKS.md):

- ``lingyi verify`` cold (a fresh process: interpreter, imports, policies, one assertion
  verified and logged): budget 1 s;
- ``lingyi verify --server URL`` (a fresh process that asks a running ``lingyi serve --http``
  through the MCP client; process start included): budget 150 ms;
- ``lingyi serve`` over stdio, from spawning the process to the answer of ``initialize`` (a
  real MCP client): budget 1.5 s.

``python -c pass`` (the interpreter alone) is measured beside them as the floor. The steps run
interleaved, ``--runs`` times each (at least 20), so load on the machine touches all alike;
reported: median and p99 of wall time, and the median CPU time of the processes measured
(steadier on a shared machine). No assertions.

``--importtime`` also prints where the import time of ``verify --server`` goes (``python -X
importtime``, the 15 costliest modules by cumulative time).

Bytecode: the benchmark compiles ``src/lingyi`` once first, as an install would.

    .venv/bin/python benchmarks/bench_start.py [--runs 20] [--importtime]
"""

from __future__ import annotations

import argparse
import compileall
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from mcp import Client

from bench_server import Deployment, clean_env, deploy, stdio

VERIFY = ["verify", "--member", "lingzhi", "--type", "fact", "--content", "庄子的逍遥游讲的是自由"]
BUDGETS_MS = {"verify cold": 1000.0, "verify --server": 150.0, "serve initialize": 1500.0}


def wall_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode not in (0, 1):  # approved or rejected: the command itself ran
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()}")
    return elapsed


async def initialize_ms(argv: list[str]) -> float:
    """Spawn the server and complete the MCP handshake (initialize answered)."""
    started = time.perf_counter()
    async with Client(stdio(argv)):
        return (time.perf_counter() - started) * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(dep: Deployment) -> Iterator[str]:
    """``lingyi serve --http`` of the deployment on a free loopback port; yields its URL."""
    port = _free_port()
    argv = [*dep.guarded("--http", "--port", str(port))]
    proc = subprocess.Popen(argv, env=clean_env(), stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise SystemExit("lingyi serve --http did not listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def steps(dep: Deployment, url: str) -> dict[str, Callable[[], float]]:
    lingyi = [sys.executable, "-m", "lingyi", "--config", str(dep.config)]
    return {
        "python -c pass": lambda: wall_ms([sys.executable, "-c", "pass"]),
        "verify cold": lambda: wall_ms([*lingyi, *VERIFY, "--local"]),
        "verify --server": lambda: wall_ms([*lingyi, *VERIFY, "--server", url]),
        "serve initialize": lambda: anyio.run(initialize_ms, dep.guarded()),
    }


def child_cpu_ms() -> float:
    """CPU time (user + system) of the children waited for so far, in ms (0 without
    ``resource``)."""
    try:
        import resource
    except ImportError:
        return 0.0
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (used.ru_utime + used.ru_stime) * 1000


def run_all(
    measured: dict[str, Callable[[], float]], runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each step ``runs`` times, interleaved, in alternating order, after one warm-up each."""
    times: dict[str, list[float]] = {name: [] for name in measured}
    cpu: dict[str, list[float]] = {name: [] for name in measured}
    for step in measured.values():  # warm the disk cache and the bytecode
        step()
    for r in range(runs):
        for name in list(measured) if r % 2 == 0 else list(reversed(measured)):
            before = child_cpu_ms()
            times[name].append(measured[name]())
            cpu[name].append(child_cpu_ms() - before)
    return times, cpu


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(times: dict[str, list[float]], cpu: dict[str, list[float]], load: float) -> list[str]:
    rows = [f"load average {load:.2f} → {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)"]
    for name, samples in times.items():
        budget = BUDGETS_MS.get(name)
        median = statistics.median(samples)
        verdict = (
            ""
            if budget is None
            else f"  budget {budget:.0f} ms: " + ("met" if median <= budget else "NOT met")
        )
        rows.append(
            f"{name:<17} median {median:7.1f} ms  p99 {pct(samples, 0.99):7.1f} ms  "
            f"CPU median {statistics.median(cpu[name]):7.1f} ms{verdict}"
        )
    return rows


def import_profile(dep: Deployment, url: str, top: int = 15) -> list[str]:
    """The costliest imports of ``verify --server`` by cumulative time (python -X importtime)."""
    argv = [sys.executable, "-X", "importtime", "-m", "lingyi", "--config", str(dep.config)]
    done = subprocess.run(
        [*argv, *VERIFY, "--server", url], env=clean_env(), capture_output=True, text=True
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            depth = len(parts[2]) - len(parts[2].lstrip()) - 1  # 0: imported by no module
            if depth <= 2:
                rows.append((int(parts[1]), "  " * depth + parts[2].strip()))
    ordered = sorted(rows, reverse=True)[:top]
    return [f"  {us / 1000:7.1f} ms  {name}" for us, name in ordered]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--importtime", action="store_true", help="where verify --server's imports go"
    )
    args = parser.parse_args()
    import lingyi

    compileall.compile_dir(Path(lingyi.__file__).parent, quiet=1)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lingyi-start-") as tmp:
        dep = deploy(Path(tmp), fsync=False)
        with http_server(dep) as url:
            times, cpu = run_all(steps(dep, url), max(args.runs, 20))
            profile = import_profile(dep, url) if args.importtime else []
    lines = report(times, cpu, load)
    if profile:
        lines += ["verify --server, imports by cumulative time:", *profile]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
