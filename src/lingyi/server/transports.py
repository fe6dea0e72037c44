"""Transports: stdio (stdout carries nothing but protocol) and Streamable HTTP.

HTTP listens on loopback by default, with bearer tokens and Host/Origin checks; beyond loopback
it refuses to start without tokens. At start it says on stderr where it listens, which config
and log are in effect and how many tokens are active (stdout stays clean either way).
"""

from __future__ import annotations

import gc
import os
import signal
import sys

import anyio
from starlette.applications import Starlette

from lingyi._logging import get_logger
from lingyi.config import Config
from lingyi.errors import ConfigError
from lingyi.server.app import GuardApp
from lingyi.server.auth import is_loopback, tokens_line, tokens_of, transport_security
from lingyi.server.build import GuardServer, build_server
from lingyi.server.sessions import EndedSessions

log = get_logger()

DRAIN_TIMEOUT_S = 30.0  # how long a signal waits for running tool calls


async def _stop_on_signal(app: GuardApp) -> None:
    """On SIGTERM/SIGINT: let running tool work finish (its log record and commit are
    whole), then exit. The SDK's stdin reader blocks in a thread that cancellation cannot
    interrupt, so we leave with ``os._exit``; every log record is already on disk (one
    ``write`` per record), so nothing written is lost."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.warning("signal received; finishing running tool calls", signal=signum)
            drained = await anyio.to_thread.run_sync(app.drain, DRAIN_TIMEOUT_S)
            app.close()
            sys.stderr.flush()
            os._exit(0 if drained else 1)


async def _serve_stdio(app: GuardApp, server: GuardServer) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, app)
        await server.run_stdio_async()  # returns when the client closes stdin
        tg.cancel_scope.cancel()


def settled() -> None:
    """What start-up loaded (policies, lexicons and their automata, the SDK) lives as long as
    the server: moved out of the cyclic collector's reach, so that a full collection does
    not walk those ~125,000 objects again (one took ~0.15 s on this machine, a p99 spike of a
    call; measured with gc callbacks over 3,000 guarded calls). Garbage among them that a
    reference count frees is still freed. No collection first: freezing costs nothing, a
    collection would delay the server's start (issue 10 times ``initialize``)."""
    gc.freeze()


def serve_stdio(config: Config) -> None:
    """Serve one client over stdio until it leaves or a signal arrives.

    A client that dies closes its end of our stdout: the SDK's next flush raises
    ``BrokenPipeError`` inside its task group. That is the client leaving, not a fault of the
    server: one log line on stderr, and ``lingyi serve`` exits 0 as when stdin closes."""
    app = GuardApp(config)
    try:
        server = build_server(app)
        settled()
        try:
            anyio.run(_serve_stdio, app, server)
        except* BrokenPipeError:  # any other error in the group still propagates
            _client_gone()
    finally:
        app.close()


def _client_gone() -> None:
    """Log that the client left, and point stdout at the null device: Python flushes stdout
    (and the SDK's wrapper of it) at exit, which would fail, and print, once more."""
    log.warning("client closed the connection; stopping", transport="stdio")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def http_app(app: GuardApp, host: str, port: int) -> Starlette:
    """The Starlette app for Streamable HTTP (tokens and Host/Origin checks applied)."""
    tokens = tokens_of(app.config)
    if not is_loopback(host) and not tokens:
        raise ConfigError(
            f"refusing to serve HTTP on {host}: not loopback and no [[server.tokens]] with a value"
        )
    server = build_server(app, tokens=tokens or None)
    security = transport_security(app.config, host, port)
    asgi = server.streamable_http_app(
        host=host,
        transport_security=security,
        session_idle_timeout=app.config.raw.ledger.idle_s,  # the SDK's and the ledger's agree
    )
    asgi.add_middleware(EndedSessions, guard=app)  # a DELETE drops its evidence too
    return asgi


def start_banner(config: Config, host: str, port: int) -> str:
    """What `serve --http` says at start: where, which config and log, how many tokens."""
    shown = f"[{host}]" if ":" in host else host
    return (
        f"lingyi serve: Streamable HTTP at http://{shown}:{port}/mcp\n"
        f"  config: {config.source}\n"
        f"  log:    {config.log_path}\n"
        f"  tokens: {tokens_line(config)}\n"
    )


def serve_http(config: Config, host: str, port: int) -> None:
    """Serve Streamable HTTP at http://host:port/mcp; uvicorn stops cleanly on SIGTERM/SIGINT."""
    import uvicorn

    app = GuardApp(config)
    try:
        asgi = http_app(app, host, port)
        settled()
        sys.stderr.write(start_banner(config, host, port))
        sys.stderr.flush()
        settings = uvicorn.Config(
            asgi, host=host, port=port, log_config=None, access_log=False, log_level="warning"
        )
        uvicorn.Server(settings).run()
    finally:
        app.close()
