"""What the guard costs per tool call, over stdio, against the same call without it.

Starts one ``lingyi serve --bench`` subprocess (a temporary deployment over the shipped
knowledge base), connects a real MCP client, and times, interleaved in one run:

- ``search_knowledge``: the guarded tool (verify → search → record evidence → append the
  hash-chained log record → return);
- ``bench_search_knowledge``: a bench-only twin doing the same knowledge-base search in the
  same worker-thread hop, with no guard, no ledger and no log.

Both go through the same client, transport and server, so the ratio isolates the guard.
Reports median and p99 client-side latency for each and their ratios. No assertions.

    .venv/bin/python benchmarks/bench_server.py               # 500 calls each, 50 warm-up
    .venv/bin/python benchmarks/bench_server.py --calls 2000 --fsync
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
from mcp.client.stdio import StdioServerParameters

from lingyi.demo import make_repo, write_config

QUERIES = ("气功", "庄子逍遥游", "科学方法论", "meditation", "太极拳", "儒家 仁义")


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def server(root: Path, fsync: bool) -> StdioServerParameters:
    log = root / "bench-log.jsonl"
    config = write_config(root, log)
    config.write_text(
        config.read_text(encoding="utf-8") + f"\n[log]\nfsync = {str(fsync).lower()}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    args = ["-m", "lingyi", "--config", str(config), "serve", "--bench"]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def measure(params: StdioServerParameters, calls: int, warmup: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"search_knowledge": [], "bench_search_knowledge": []}
    async with Client(params) as client:
        for i in range(warmup + calls):
            for tool in times:  # interleaved, so drift affects both alike
                started = time.perf_counter()
                result = await client.call_tool(tool, {"query": QUERIES[i % len(QUERIES)]})
                elapsed = (time.perf_counter() - started) * 1000
                if result.is_error:
                    raise SystemExit(f"{tool} failed: {result.content}")
                if i >= warmup:
                    times[tool].append(elapsed)
    return times


def report(times: dict[str, list[float]]) -> str:
    guarded, bare = times["search_knowledge"], times["bench_search_knowledge"]
    rows = [
        f"{'tool':<24} {'calls':>6} {'median ms':>10} {'p99 ms':>8}",
        *(f"{t:<24} {len(v):>6} {statistics.median(v):>10.3f} {p99(v):>8.3f}" for t, v in times.items()),
        f"guarded / bare: median {statistics.median(guarded) / statistics.median(bare):.2f}x, "
        f"p99 {p99(guarded) / p99(bare):.2f}x; guard overhead (median) "
        f"{statistics.median(guarded) - statistics.median(bare):.3f} ms",
    ]  # fmt: skip
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per tool")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per tool first")
    parser.add_argument("--fsync", action="store_true", help="fsync every log record")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lingyi-bench-") as tmp:
        root = Path(tmp)
        make_repo(root)
        times = anyio.run(measure, server(root, args.fsync), args.calls, args.warmup)
    sys.stdout.write(report(times) + "\n")


if __name__ == "__main__":
    main()
