"""What the guard costs per tool call, against a truly bare MCP server, over stdio and HTTP.

Starts ``lingyi serve`` (a temporary deployment over the shipped policies and knowledge base)
and, beside it, ``benchmarks/bare_server.py``: a server of its own built with the same SDK,
making the same knowledge-base call in the same worker-thread hop, with no guard. Real MCP
clients (``mcp.Client``) then time ``search_knowledge`` on both, interleaved call by call (the
order alternating), so drift and other load on the machine touch both alike:

- stdio: one client per server, ``--calls`` timed calls each after ``--warmup``;
- Streamable HTTP: both servers as ``--http`` subprocesses on loopback, the same;
- throughput: ``--clients`` concurrent HTTP clients (one MCP session each) calling as fast as
  they can, ``--rounds`` rounds alternating guarded and bare; calls per second.

Reports median and p99 client-side latency, their ratios guarded/bare, and the throughput
ratio; and, less sensitive to other load on the machine, the CPU time each server process
used per call (from ``/proc``, Linux). No assertions (tests never time anything).

    .venv/bin/python benchmarks/bench_server.py                  # 500 calls, 10 clients
    .venv/bin/python benchmarks/bench_server.py --only stdio --calls 2000 --fsync
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lingyi.config import load_config
from lingyi.demo import make_repo, write_config
from lingyi.guard import kb_domains
from lingyi.policy import load_policies

QUERIES = ("气功", "庄子逍遥游", "科学方法论", "meditation", "太极拳", "儒家 仁义")
BARE = Path(__file__).resolve().parent / "bare_server.py"
TOOL = "search_knowledge"
Times = dict[str, list[float]]


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Deployment:
    """The guarded server's config, and what the bare one needs of it (the same KB)."""

    config: Path
    kb: Path
    domains: list[str] | None

    def guarded(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "lingyi", "--config", str(self.config), "serve", *extra]

    def bare(self, *extra: str) -> list[str]:
        domains = ["--domains", json.dumps(self.domains)] if self.domains is not None else []
        return [sys.executable, str(BARE), str(self.kb), *domains, *extra]


def deploy(root: Path, fsync: bool) -> Deployment:
    make_repo(root)
    config = write_config(root, root / "bench-log.jsonl")
    config.write_text(
        config.read_text(encoding="utf-8") + f"\n[log]\nfsync = {str(fsync).lower()}\n"
    )
    loaded = load_config(config)
    policies = load_policies(loaded.validators_dir)
    return Deployment(config, loaded.kb_dir, kb_domains(policies))


def clean_env() -> dict[str, str]:
    """This environment without lingyi's variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}


def stdio(argv: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:], env=clean_env())


async def call(client: Client, i: int) -> float:
    """One timed call, in ms; a failed call ends the benchmark (it would measure nothing)."""
    started = time.perf_counter()
    result = await client.call_tool(TOOL, {"query": QUERIES[i % len(QUERIES)]})
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise SystemExit(f"{TOOL} failed: {result.content}")
    return elapsed


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, in ms; 0 where /proc is absent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def children() -> dict[str, int]:
    """This process's server subprocesses by role, from their command lines."""
    found: dict[str, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid():
            found["bare" if BARE.name in argv else "guarded"] = int(stat.parent.name)
    return found


async def interleaved(
    clients: dict[str, Client], calls: int, warmup: int, pids: dict[str, int] | None = None
) -> Times:
    """Call each server in turn, the order alternating, so drift touches both alike; with
    ``pids``, each server's CPU time per timed call goes in as ``cpu:NAME``."""
    times: Times = {name: [] for name in clients}
    pids = pids if pids is not None else children()
    started: dict[str, float] = {}
    for i in range(warmup + calls):
        if i == warmup:
            started = {name: cpu_ms(pid) for name, pid in pids.items()}
        order = list(clients) if i % 2 == 0 else list(reversed(clients))
        for name in order:
            elapsed = await call(clients[name], i)
            if i >= warmup:
                times[name].append(elapsed)
    for name, pid in pids.items():
        times[f"cpu:{name}"] = [(cpu_ms(pid) - started[name]) / calls]
    return times


async def over_stdio(dep: Deployment, calls: int, warmup: int) -> Times:
    async with Client(stdio(dep.guarded())) as guarded, Client(stdio(dep.bare())) as bare:
        return await interleaved({"guarded": guarded, "bare": bare}, calls, warmup)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port} after {timeout_s} s")


@contextlib.contextmanager
def http_servers(dep: Deployment) -> Iterator[tuple[dict[str, str], dict[str, int]]]:
    """Both servers over Streamable HTTP on free loopback ports: their /mcp URLs and pids."""
    ports = {"guarded": free_port(), "bare": free_port()}
    argv = {
        "guarded": dep.guarded("--http", "--port", str(ports["guarded"])),
        "bare": dep.bare("--http", "--port", str(ports["bare"])),
    }
    procs = {
        n: subprocess.Popen(a, env=clean_env(), stderr=subprocess.DEVNULL) for n, a in argv.items()
    }
    try:
        for name, proc in procs.items():
            wait_listening(ports[name], proc)
        urls = {n: f"http://127.0.0.1:{p}/mcp" for n, p in ports.items()}
        yield urls, {n: proc.pid for n, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=30)


async def over_http(urls: dict[str, str], pids: dict[str, int], calls: int, warmup: int) -> Times:
    async with Client(urls["guarded"]) as guarded, Client(urls["bare"]) as bare:
        return await interleaved({"guarded": guarded, "bare": bare}, calls, warmup, pids)


async def throughput(url: str, clients: int, calls: int) -> float:
    """Calls per second of ``clients`` concurrent sessions making ``calls`` calls each
    (all sessions opened and warmed first)."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(Client(url)) for _ in range(clients)]
        for session in sessions:  # warm every session (and the server's caches) first
            await call(session, 0)

        async def run(session: Client, offset: int) -> None:
            for i in range(calls):
                await call(session, offset + i)

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n, session in enumerate(sessions):
                tg.start_soon(run, session, n)
        return clients * calls / (time.perf_counter() - started)


async def throughputs(urls: dict[str, str], clients: int, calls: int, rounds: int) -> Times:
    rates: Times = {name: [] for name in urls}
    for r in range(rounds):
        for name in list(urls) if r % 2 == 0 else list(reversed(urls)):
            rates[name].append(await throughput(urls[name], clients, calls))
    return rates


def latency_rows(label: str, times: Times) -> list[str]:
    g, b = times["guarded"], times["bare"]
    rows = [
        *(f"{label:<6} {n:<8} {len(times[n]):>6} {statistics.median(times[n]):>10.3f} "
          f"{p99(times[n]):>8.3f}" for n in ("guarded", "bare")),
        f"{label:<6} guarded/bare: median {statistics.median(g) / statistics.median(b):.2f}x, "
        f"p99 {p99(g) / p99(b):.2f}x; overhead (median) "
        f"{statistics.median(g) - statistics.median(b):+.3f} ms",
    ]  # fmt: skip
    cpu = {n: times.get(f"cpu:{n}", [0.0])[0] for n in ("guarded", "bare")}
    if cpu["bare"] > 0:
        rows.append(
            f"{label:<6} server CPU per call: guarded {cpu['guarded']:.3f} ms, bare "
            f"{cpu['bare']:.3f} ms, guarded/bare {cpu['guarded'] / cpu['bare']:.2f}x"
        )
    return rows


def rate_rows(clients: int, rates: Times) -> list[str]:
    g, b = statistics.median(rates["guarded"]), statistics.median(rates["bare"])
    each = ", ".join(f"{n} " + " / ".join(f"{r:.0f}" for r in v) for n, v in rates.items())
    return [
        f"{clients} HTTP clients: guarded {g:.0f} calls/s, bare {b:.0f} calls/s (medians of "
        f"{len(rates['bare'])} rounds: {each}); guarded/bare {g / b:.2f}x"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per server")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per server first")
    parser.add_argument("--clients", type=int, default=10, help="concurrent HTTP clients")
    parser.add_argument("--client-calls", type=int, default=100, help="calls per client a round")
    parser.add_argument("--rounds", type=int, default=4, help="throughput rounds per server")
    parser.add_argument("--only", choices=("stdio", "http", "throughput"), action="append")
    parser.add_argument("--fsync", action="store_true", help="fsync every log record")
    args = parser.parse_args()
    parts = args.only or ["stdio", "http", "throughput"]
    rows = [f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)",
            f"{'':<6} {'server':<8} {'calls':>6} {'median ms':>10} {'p99 ms':>8}"]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="lingyi-bench-") as tmp:
        dep = deploy(Path(tmp), args.fsync)
        if "stdio" in parts:
            rows += latency_rows("stdio", anyio.run(over_stdio, dep, args.calls, args.warmup))
        if "http" in parts or "throughput" in parts:
            with http_servers(dep) as (urls, pids):
                if "http" in parts:
                    times = anyio.run(over_http, urls, pids, args.calls, args.warmup)
                    rows += latency_rows("http", times)
                if "throughput" in parts:
                    rates = anyio.run(
                        throughputs, urls, args.clients, args.client_calls, args.rounds
                    )
                    rows += rate_rows(args.clients, rates)
    rows.append(f"load average at end: {os.getloadavg()[0]:.2f}")
    sys.stdout.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
