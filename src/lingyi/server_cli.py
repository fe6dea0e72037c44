"""The ``lingyi serve`` and ``lingyi demo`` commands (registered into the main parser).

``serve`` speaks MCP over stdio by default: stdout then carries nothing but protocol, and
every diagnostic goes to stderr. ``--http`` serves Streamable HTTP instead, on loopback
unless the config or ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from lingyi.config import load_config


def cmd_serve(args: argparse.Namespace) -> int:
    from lingyi import server  # imports the MCP SDK only for this command

    config = load_config(args.config, log=args.log)
    bench = True if args.bench else None  # None: $LINGYI_BENCH decides
    if not args.http:
        server.serve_stdio(config, bench=bench)
        return 0
    host = args.host or config.raw.server.host
    port = config.raw.server.port if args.port is None else args.port
    server.serve_http(config, host, port, bench=bench)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from lingyi.demo import run

    return run(log=args.log, keep=args.keep)


def register(sub: Any) -> None:
    """Add ``serve`` and ``demo`` to the ``lingyi`` subcommands."""
    s = sub.add_parser(
        "serve",
        help="run the MCP server (stdio by default, --http for Streamable HTTP)",
        description="Serve the guarded tools over MCP. stdio: stdout is protocol only, logs go "
        "to stderr. --http: Streamable HTTP at http://HOST:PORT/mcp with bearer tokens from "
        "[[server.tokens]] and Host/Origin checks.",
    )
    s.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    s.add_argument("--host", help="HTTP bind address (default: config server.host, 127.0.0.1)")
    s.add_argument("--port", type=int, help="HTTP port (default: config server.port, 8765)")
    s.add_argument(
        "--bench",
        action="store_true",
        default=os.environ.get("LINGYI_BENCH") == "1",
        help=argparse.SUPPRESS,  # adds an unguarded twin tool for benchmarks/bench_server.py
    )
    s.set_defaults(func=cmd_serve)
    d = sub.add_parser(
        "demo",
        help="a scripted session against a real server: approve, reject, fallback",
        description="Start `lingyi serve` over stdio with a temporary config (a fresh git "
        "repository, the shipped knowledge base and data), play a short session through a real "
        "MCP client, print the verdicts, and leave the verification log behind.",
    )
    d.add_argument("--keep", action="store_true", help="keep the temporary folder (repo, council)")
    d.set_defaults(func=cmd_demo)
