"""What the guard costs in front of an upstream MCP server, against calling the upstream directly.

Starts, in one run, the official git MCP server (``mcp-server-git``) twice over stdio: once
behind ``lingyi serve`` (client → guard → gateway → upstream: verify → call upstream → audit →
record evidence → log) and once directly (client → upstream). Times ``git.git_status`` and
``git_log`` through the guard against ``git_status`` and ``git_log`` direct, interleaved call
by call so drift affects both alike. Reports median and p99 per path and their ratios. No
assertions.

    .venv/bin/python benchmarks/bench_gateway.py              # 300 calls each, 30 warm-up
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lingyi.config import defaults_dir
from lingyi.demo import make_repo, write_config

REPO = '{ type = "path", required = true, roots = "repos", git_repo = true }'
POLICIES = f"""
[tools."git.git_status"]
read_only = true
args.repo_path = {REPO}

[tools."git.git_log"]
read_only = true
args.repo_path = {REPO}
args.max_count = {{ type = "integer", min = 1, max = 100 }}
"""
UPSTREAM = f"""
[[upstreams]]
name = "git"
command = ["{sys.executable}", "-m", "mcp_server_git"]
members = ["lingflow"]

[[upstreams.evidence]]
tool = "git_log"
pattern = 'Commit: ([0-9a-f]{{40}})'
"""
GIT = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_git"])


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def guard(root: Path) -> StdioServerParameters:
    """``lingyi serve`` over a temporary deployment with the git upstream for 灵通."""
    folder = root / "validators"
    shutil.copytree(defaults_dir() / "validators", folder)
    flow = folder / "lingflow.toml"
    flow.write_text(flow.read_text(encoding="utf-8") + POLICIES, encoding="utf-8")
    config = write_config(root, root / "bench-log.jsonl")
    text = config.read_text(encoding="utf-8")
    text = text.replace(str(defaults_dir() / "validators"), str(folder))
    config.write_text(text + UPSTREAM, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    args = ["-m", "lingyi", "--config", str(config), "serve"]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def timed(client: Client, tool: str, args: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await client.call_tool(tool, args)
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content}")
    return elapsed


async def measure(root: Path, calls: int, warmup: int) -> dict[str, list[float]]:
    repo = str(root / "repos" / "council-app")
    pairs = {
        "git_status": ({"repo_path": repo}, "git.git_status"),
        "git_log": ({"repo_path": repo, "max_count": 5}, "git.git_log"),
    }
    times: dict[str, list[float]] = {f"{k} {w}": [] for k in pairs for w in ("guarded", "direct")}
    async with Client(guard(root)) as guarded, Client(GIT) as direct:
        for i in range(warmup + calls):
            for tool, (args, served) in pairs.items():
                g = await timed(guarded, served, args)
                d = await timed(direct, tool, args)
                if i >= warmup:
                    times[f"{tool} guarded"].append(g)
                    times[f"{tool} direct"].append(d)
    return times


def report(times: dict[str, list[float]]) -> str:
    rows = [f"{'path':<22} {'calls':>6} {'median ms':>10} {'p99 ms':>8}"]
    rows += [
        f"{k:<22} {len(v):>6} {statistics.median(v):>10.3f} {p99(v):>8.3f}"
        for k, v in times.items()
    ]
    for tool in ("git_status", "git_log"):
        g, d = times[f"{tool} guarded"], times[f"{tool} direct"]
        rows.append(
            f"{tool}: guarded / direct median {statistics.median(g) / statistics.median(d):.2f}x, "
            f"p99 {p99(g) / p99(d):.2f}x; guard overhead (median) "
            f"{statistics.median(g) - statistics.median(d):.3f} ms"
        )
    return "\n".join(rows)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300, help="timed calls per path")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls per path first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lingyi-bench-gw-") as tmp:
        root = Path(tmp)
        make_repo(root)
        times = anyio.run(measure, root, args.calls, args.warmup)
    sys.stdout.write(report(times) + "\n")


if __name__ == "__main__":
    main()
