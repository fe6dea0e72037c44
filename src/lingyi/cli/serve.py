"""``lingyi serve`` and ``lingyi demo``.

``serve`` speaks MCP over stdio by default: stdout then carries nothing but protocol, and
every diagnostic goes to stderr. ``--http`` serves Streamable HTTP instead, on loopback
unless the config or ``--host`` says otherwise.
"""

from __future__ import annotations

import click

from lingyi.cli._app import EXIT_OK, App, cli, entry
from lingyi.errors import LingyiError


@cli.command("serve", short_help="Run the MCP server (stdio, or --http for Streamable HTTP).")
@click.option("--http", "http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option("--host", help="HTTP bind address (default: config server.host, 127.0.0.1).")
@click.option("--port", type=int, help="HTTP port (default: config server.port, 8765).")
@entry
def serve(app: App, http: bool, host: str | None, port: int | None) -> int:
    """Serve the guarded tools over MCP.

    stdio: stdout is protocol only, logs go to stderr. --http: Streamable HTTP at
    http://HOST:PORT/mcp with bearer tokens from [[server.tokens]] and Host/Origin checks.
    """
    from lingyi import server  # the MCP SDK loads only for this command
    from lingyi.config_paths import path_problems

    config = app.config()
    port = config.raw.server.port if port is None else port
    if http and not 0 < port < 65536:
        raise LingyiError(f"--port {port}: a TCP port is 1..65535 (or set [server] port)")
    for problem in path_problems(config):  # served anyway: the tools that need it will say so
        app.err(f"lingyi: warning: {problem.key}: {problem.message}")
    if not http:
        server.serve_stdio(config)
        return EXIT_OK
    bind = host or config.raw.server.host
    server.serve_http(config, bind, port)
    return EXIT_OK


@cli.command("demo", short_help="A scripted MCP session: approve, reject, fallback.")
@click.option("--keep", is_flag=True, help="Keep the temporary folder (repository, council).")
@entry
def demo(app: App, keep: bool) -> int:
    """Start lingyi serve over stdio with a temporary config (a fresh git repository, the
    shipped knowledge base and data), play a short session through a real MCP client, print
    the verdicts, and leave the verification log behind (--log chooses where)."""
    from lingyi.demo import run

    return run(log=app.log_path, keep=keep)
