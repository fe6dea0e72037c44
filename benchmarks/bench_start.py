"""How fast lingyi starts: ``lingyi verify`` per call, and ``lingyi serve`` to its first answer.

Interleaved in one run, ``--runs`` times each, so load on the machine touches all alike:

- ``python -c pass``: the interpreter alone, the floor of any command;
- ``lingyi verify``, three ways (``lingyi._warm``): **warm** (a warm process is up: the call
  is a small client that hands over to a forked child), **in-process** (``LINGYI_DAEMON=0``:
  the whole fresh start, as on Windows), and **first call** (no warm process yet: the call
  runs in-process, then starts one; each sample in a new socket folder, and the warm process
  it started is waited for and stopped outside the timed part, so its start-up CPU does not
  land on the next sample); one assertion verified and logged, the caller's whole wall time;
- ``lingyi serve``: from spawning the process to the answer of ``initialize`` (a real MCP
  client over stdio), against the same for ``benchmarks/bare_server.py`` (the same SDK and
  knowledge base, no guard); then the first ``tools/list`` right after, timed on its own
  (every client sends it next; a start made cheaper by moving work into it is no gain). The
  CPU time of a server is its whole process: start, that listing, and its exit. ``lingyi
  serve`` three ways: in-process (``LINGYI_DAEMON=0``), **warm** (through the warm process,
  which has the server's stack loaded: its CPU is the client's only, the child's is not ours
  to count) and **first call** (no warm process yet: in-process, starting one as it loads its
  policies, the way ``verify first call`` is measured).

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
interleaved with the rest, for a before/after under the same load (its verify in-process).
``--verify-only`` leaves the two ``serve`` rows out.

The warm processes use a socket folder of the benchmark's own (``LINGYI_WARM_DIR``), never
the user's, and are stopped at the end. CPU of a warm call is the client's only (the forked
child is not a child of the benchmark); its wall time includes the child's work.
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
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from lingyi._warm import wire
from mcp import Client

from bench_server import Deployment, clean_env, deploy, stdio

VERIFY = ["verify", "--member", "lingzhi", "--type", "fact", "--content", "庄子的逍遥游讲的是自由"]


def env_for(src: Path | None, warm: Path | None = None) -> dict[str, str]:
    """The clean environment; with ``src``, lingyi imported from that checkout instead; with
    ``warm``, the warm process on, its sockets in that folder (else off)."""
    env = clean_env()
    if src is not None:  # PYTHONPATH comes before the editable install's .pth entry
        env["PYTHONPATH"] = str(src)
    env["LINGYI_DAEMON"] = "1" if warm is not None else "0"
    if warm is not None:
        env.update(LINGYI_WARM_DIR=str(warm), LINGYI_DAEMON_IDLE="3600")
    return env


def wall_ms(argv: list[str], src: Path | None = None, warm: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, env=env_for(src, warm), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return (time.perf_counter() - started) * 1000


def ask(folder: Path, op: str) -> dict[str, object] | None:
    """The answer of the warm process in ``folder`` to ``op`` (status, stop); None: none."""
    for path in folder.glob("*.sock"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(str(path))
                wire.send(sock, {"op": op})
                return wire.receive(sock)[0]
            except (OSError, ValueError):
                continue
    return None


def settled(folder: Path, *, stop: bool, stack: str = "verify") -> None:
    """Wait until the warm process in ``folder`` has its policies (and ``stack``) warm (it
    then idles), and stop it if asked; a readiness wait, outside every timed part."""
    for _ in range(1200):
        answer = ask(folder, "status")
        stacks = answer.get("warm_stacks") if answer is not None else None
        if answer is not None and answer.get("warm_policies") and stack in (stacks or ()):
            break
        time.sleep(0.05)
    else:
        raise SystemExit(f"no warm process became ready in {folder}")
    if stop:
        ask(folder, "stop")
        while any(folder.glob("*.sock")):
            time.sleep(0.02)


def first_call_ms(argv: list[str], root: Path) -> float:
    """A call with no warm process yet (a new socket folder): it runs in-process and starts
    one, which is waited for and stopped before the next sample."""
    folder = Path(tempfile.mkdtemp(prefix="first-", dir=root))
    wall = wall_ms(argv, warm=folder)
    settled(folder, stop=True)
    return wall


# The first tools/list of each server step, in ms, beside its initialize (filled by serve()).
LISTINGS: dict[str, list[float]] = {}


async def first_answer_ms(
    argv: list[str], src: Path | None, listing: list[float], warm: Path | None = None
) -> float:
    """Spawn the server and complete the MCP handshake (initialize answered); then time the
    first tools/list into ``listing``. With ``warm``, the warm process in that folder on."""
    params = stdio(argv)
    params.env = env_for(src, warm)
    started = time.perf_counter()
    async with Client(params) as client:
        elapsed = (time.perf_counter() - started) * 1000
        listed = time.perf_counter()
        await client.list_tools()
        listing.append((time.perf_counter() - listed) * 1000)
    return elapsed


def serve(
    name: str, argv: list[str], src: Path | None = None, warm: Path | None = None
) -> Callable[[], float]:
    listing = LISTINGS.setdefault(name, [])
    run: Callable[[], Awaitable[float]] = lambda: first_answer_ms(argv, src, listing, warm)  # noqa: E731
    return lambda: anyio.run(run)


def measures(
    dep: Deployment, baseline: Path | None, root: Path, *, with_serve: bool
) -> dict[str, Callable[[], float]]:
    lingyi = [sys.executable, "-m", "lingyi", "--config", str(dep.config)]
    warm = root / "warm"
    warm.mkdir(mode=0o700)
    steps = {
        "python -c pass": lambda: wall_ms([sys.executable, "-c", "pass"]),
        "verify warm": lambda: wall_ms([*lingyi, *VERIFY], warm=warm),
        "verify in-process": lambda: wall_ms([*lingyi, *VERIFY]),
        "verify first call": lambda: first_call_ms([*lingyi, *VERIFY], root),
    }
    if with_serve:
        steps["serve initialize"] = serve("serve", dep.guarded())
        steps["serve warm"] = serve("serve warm", dep.guarded(), warm=warm)
        steps["serve first call"] = lambda: first_serve_ms(dep.guarded(), root)
        steps["bare initialize"] = serve("bare", dep.bare())
    if baseline is not None:  # the same commands of an older checkout, interleaved
        steps["baseline verify"] = lambda: wall_ms([*lingyi, *VERIFY], baseline)
        if with_serve:
            steps["baseline serve"] = serve("baseline serve", dep.guarded(), baseline)
    wall_ms([*lingyi, *VERIFY], warm=warm)  # start the warm process of "verify warm"
    settled(warm, stop=False)
    if with_serve:  # a serve through it makes it load the server's stack ("serve warm")
        steps["serve warm"]()
        settled(warm, stop=False, stack="serve")
    return steps


def first_serve_ms(argv: list[str], root: Path) -> float:
    """A serve with no warm process yet (a new socket folder): it runs in-process and starts
    one as it loads its policies, which is waited for and stopped after the sample."""
    folder = Path(tempfile.mkdtemp(prefix="first-serve-", dir=root))
    wall = serve("serve first call", argv, warm=folder)()
    settled(folder, stop=True, stack="serve")
    return wall


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


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="do not compile lingyi first")
    parser.add_argument(
        "--baseline", type=Path, help="an older checkout's src/ folder, measured interleaved"
    )
    parser.add_argument("--verify-only", action="store_true", help="leave the serve rows out")
    args = parser.parse_args()
    note = bytecode(not args.no_compile, args.baseline)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lingyi-start-") as tmp:
        root = Path(tmp)
        steps = measures(
            deploy(root, fsync=False), args.baseline, root, with_serve=not args.verify_only
        )
        try:
            times, cpu = run_all(steps, args.runs)
        finally:
            ask(root / "warm", "stop")
    sys.stdout.write("\n".join(report(times, cpu, load, note)) + "\n")


def run_all(
    steps: dict[str, Callable[[], float]], runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each step ``runs`` times, interleaved, in alternating order, after one warm-up each."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():  # warm the disk cache and the bytecode
        step()
    for listing in LISTINGS.values():
        listing.clear()
    for r in range(runs):
        for name in list(steps) if r % 2 == 0 else list(reversed(steps)):
            wall, used = timed(steps[name])
            times[name].append(wall)
            cpu[name].append(used)
    return times, cpu


def report(
    times: dict[str, list[float]], cpu: dict[str, list[float]], load: float, note: str
) -> list[str]:
    med = {n: statistics.median(v) for n, v in times.items()}
    rows = [f"load average {load:.2f} → {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); {note}"]
    rows += [
        f"{n:<18} median {med[n]:7.1f} ms  p90 {pct(v, 0.9):7.1f} ms  p99 {pct(v, 0.99):7.1f} ms"
        f"  CPU median {statistics.median(cpu[n]):7.1f} ms  min {min(cpu[n]):7.1f} ms"
        for n, v in times.items()
    ]
    rows += [
        f"first tools/list, {n:<14} median {statistics.median(v):6.2f} ms  p90 {pct(v, 0.9):6.2f} ms"
        for n, v in LISTINGS.items()
        if v
    ]
    fresh, floor = med["verify in-process"], med["python -c pass"]
    rows.append(
        f"verify warm / in-process: {med['verify warm'] / fresh:.3f}x; warm / python -c pass: "
        f"{med['verify warm'] / floor:.2f}x; first call / in-process: "
        f"{med['verify first call'] / fresh:.2f}x"
    )
    if "serve initialize" in med:
        bare = med["bare initialize"]
        rows.append(
            f"serve / bare initialize: {med['serve initialize'] / bare:.2f}x (in-process); "
            f"{med['serve warm'] / bare:.3f}x (warm); first call / in-process "
            f"{med['serve first call'] / med['serve initialize']:.2f}x"
        )
    if "baseline verify" in med:
        rows.append(
            f"baseline verify (in-process): {med['baseline verify']:.1f} ms; "
            f"warm / baseline: {med['verify warm'] / med['baseline verify']:.3f}x"
        )
        if "baseline serve" in med:
            rows.append(
                f"baseline serve / bare {med['baseline serve'] / med['bare initialize']:.2f}x"
            )
    return rows


if __name__ == "__main__":
    main()
