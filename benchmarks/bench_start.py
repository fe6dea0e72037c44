"""How fast lingyi starts: ``lingyi verify`` per call, and ``lingyi serve`` to its first answer.

Interleaved in one run, ``--runs`` times each, so load on the machine touches all alike:

- ``python -c pass``: the interpreter alone, the floor of any command;
- ``lingyi verify``: one assertion verified and logged, the process's whole wall time;
- ``lingyi serve``: from spawning the process to the answer of ``initialize`` (a real MCP
  client over stdio), against the same for ``benchmarks/bare_server.py`` (the same SDK and
  knowledge base, no guard); then the first ``tools/list`` right after, timed on its own
  (every client sends it next; a start made cheaper by moving work into it is no gain). The
  CPU time of a server is its whole process: start, that listing, and its exit.

Medians and p90 of wall time in ms, the median and the least CPU time of the processes
measured (steadier on a shared machine: the least is what the work costs when nothing else
competes for the core's caches), and the ratios. No assertions.

Bytecode: an installed wheel ships its modules compiled (pip writes ``__pycache__`` at
install), but an editable checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (as on the shared
build machine) compiles every lingyi module from source on every start, about 0.3 s. The
benchmark compiles ``src/lingyi`` once before measuring, as an install would, and says whether
the environment would have written bytecode itself; ``--no-compile`` measures as found.

    .venv/bin/python benchmarks/bench_start.py [--runs 20] [--no-compile] [--baseline SRC]

``--baseline SRC``: also run ``verify`` and ``serve`` from another checkout's ``src`` folder
(``git worktree add /tmp/base main``, or ``git archive main src | tar -x -C /tmp/base``),
interleaved with the rest, for a before/after under the same load.
"""

from __future__ import annotations

import argparse
import compileall
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


def env_for(src: Path | None) -> dict[str, str]:
    """The clean environment; with ``src``, lingyi imported from that checkout instead."""
    env = clean_env()
    if src is not None:  # PYTHONPATH comes before the editable install's .pth entry
        env["PYTHONPATH"] = str(src)
    return env


def wall_ms(argv: list[str], src: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env_for(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


# The first tools/list of each server step, in ms, beside its initialize (filled by serve()).
LISTINGS: dict[str, list[float]] = {}


async def first_answer_ms(argv: list[str], src: Path | None, listing: list[float]) -> float:
    """Spawn the server and complete the MCP handshake (initialize answered); then time the
    first tools/list into ``listing``."""
    params = stdio(argv)
    params.env = env_for(src)
    started = time.perf_counter()
    async with Client(params) as client:
        elapsed = (time.perf_counter() - started) * 1000
        listed = time.perf_counter()
        await client.list_tools()
        listing.append((time.perf_counter() - listed) * 1000)
    return elapsed


def serve(name: str, argv: list[str], src: Path | None = None) -> Callable[[], float]:
    listing = LISTINGS.setdefault(name, [])
    run: Callable[[], Awaitable[float]] = lambda: first_answer_ms(argv, src, listing)  # noqa: E731
    return lambda: anyio.run(run)


def measures(dep: Deployment, baseline: Path | None) -> dict[str, Callable[[], float]]:
    lingyi = [sys.executable, "-m", "lingyi", "--config", str(dep.config)]
    steps = {
        "python -c pass": lambda: wall_ms([sys.executable, "-c", "pass"]),
        "lingyi verify": lambda: wall_ms([*lingyi, *VERIFY]),
        "serve initialize": serve("serve", dep.guarded()),
        "bare initialize": serve("bare", dep.bare()),
    }
    if baseline is not None:  # the same two commands of an older checkout, interleaved
        steps["baseline verify"] = lambda: wall_ms([*lingyi, *VERIFY], baseline)
        steps["baseline serve"] = serve("baseline serve", dep.guarded(), baseline)
    return steps


def bytecode(compile_first: bool, baseline: Path | None) -> str:
    """Compile lingyi's modules as an install would (unless told not to); say what was done."""
    import lingyi

    packages = [Path(lingyi.__file__).parent] + ([baseline / "lingyi"] if baseline else [])
    for package in packages if compile_first else []:
        compileall.compile_dir(package, quiet=1)
    flag = "PYTHONDONTWRITEBYTECODE set" if sys.flags.dont_write_bytecode else "bytecode written"
    return f"bytecode: {'compiled first' if compile_first else 'as found'} ({flag})"


def child_cpu_ms() -> float:
    """CPU time (user + system) of the children waited for so far, in ms (0 without
    ``resource``): steadier than wall time on a shared machine, so it is reported beside it."""
    try:
        import resource
    except ImportError:
        return 0.0
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (used.ru_utime + used.ru_stime) * 1000


def timed(step: Callable[[], float]) -> tuple[float, float]:
    """(wall ms, CPU ms of the processes the step ran: the command, or the server)."""
    before = child_cpu_ms()
    wall = step()
    return wall, child_cpu_ms() - before


def p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="do not compile lingyi first")
    parser.add_argument(
        "--baseline", type=Path, help="an older checkout's src/ folder, measured interleaved"
    )
    args = parser.parse_args()
    note = bytecode(not args.no_compile, args.baseline)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lingyi-start-") as tmp:
        steps = measures(deploy(Path(tmp), fsync=False), args.baseline)
        times: dict[str, list[float]] = {name: [] for name in steps}
        cpu: dict[str, list[float]] = {name: [] for name in steps}
        for step in steps.values():  # warm the disk cache and the bytecode
            step()
        for listing in LISTINGS.values():
            listing.clear()
        for r in range(args.runs):
            for name in list(steps) if r % 2 == 0 else list(reversed(steps)):
                wall, used = timed(steps[name])
                times[name].append(wall)
                cpu[name].append(used)
    med = {n: statistics.median(v) for n, v in times.items()}
    rows = [f"load average {load:.2f} → {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); {note}"]
    rows += [
        f"{n:<18} median {med[n]:7.1f} ms  p90 {p90(v):7.1f} ms  "
        f"CPU median {statistics.median(cpu[n]):7.1f} ms  min {min(cpu[n]):7.1f} ms"
        for n, v in times.items()
    ]
    rows += [
        f"first tools/list, {n:<14} median {statistics.median(v):6.2f} ms  p90 {p90(v):6.2f} ms"
        for n, v in LISTINGS.items()
    ]
    rows.append(
        f"verify / python -c pass: {med['lingyi verify'] / med['python -c pass']:.2f}x; "
        f"serve / bare initialize: {med['serve initialize'] / med['bare initialize']:.2f}x"
    )
    if args.baseline is not None:
        rows.append(
            f"baseline: verify {med['baseline verify']:.1f} ms, serve / bare "
            f"{med['baseline serve'] / med['bare initialize']:.2f}x"
        )
    sys.stdout.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
