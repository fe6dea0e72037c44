"""Transports: stdio (stdout carries nothing but protocol) and Streamable HTTP.

HTTP listens on loopback by default, with bearer tokens and Host/Origin checks; beyond loopback
it refuses to start without tokens. At start it says on stderr where it listens, which config
and log are in effect and how many tokens are active (stdout stays clean either way).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator

import anyio
import anyio.from_thread
import anyio.lowlevel
import uvicorn
from anyio.lowlevel import EventLoopToken
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette

from lingyi._logging import get_logger
from lingyi.config import Config
from lingyi.errors import ConfigError
from lingyi.server.app import GuardApp
from lingyi.server.auth import (
    auth_settings,
    is_loopback,
    tokens_line,
    tokens_of,
    transport_security,
)
from lingyi.server.build import GuardServer, build_server
from lingyi.server.sessions import EndedSessions

log = get_logger()

DRAIN_TIMEOUT_S = 30.0  # how long a signal waits for running tool calls
REPLY_GRACE_S = 0.2  # after the last call returned: its reply is written and flushed
STREAMS_GRACE_S = 1  # then, over HTTP: the clients' event streams still open are closed
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StdinLines:
    """The client's messages, read from stdin in a daemon thread.

    The SDK reads stdin in a worker thread that a cancellation waits for, so a client that
    keeps stdin open would hold a server told to stop; a daemon thread is left behind at exit.
    fd 0 is pointed at the null device meanwhile (children and stray reads see EOF).
    """

    def __init__(self) -> None:
        self.fd = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)

    def __aiter__(self) -> AsyncIterator[str]:
        return self.lines()

    async def lines(self) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[str](16)
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self.pump, args=(send, token), daemon=True).start()
        async with receive:
            async for line in receive:
                yield line

    def pump(self, send: MemoryObjectSendStream[str], token: EventLoopToken) -> None:
        try:
            for line in self.read():
                anyio.from_thread.run(send.send, line, token=token)
            anyio.from_thread.run_sync(send.close, token=token)  # end of input: the client left
        except Exception:  # the server stopped reading meanwhile: no one wants the line
            return

    def read(self) -> Iterator[str]:
        rest = b""
        while chunk := os.read(self.fd, 65536):
            *lines, rest = (rest + chunk).split(b"\n")  # split as bytes: no character cut
            yield from (line.decode("utf-8", errors="replace") + "\n" for line in lines)
        if rest:  # a last message with no newline
            yield rest.decode("utf-8", errors="replace")


async def finish_calls(app: GuardApp, server: GuardServer) -> None:
    """Refuse new tool work, let running calls finish (their log record and commit are
    whole) and hand back their replies; then the transport may close."""
    app.drained = await anyio.to_thread.run_sync(app.drain, DRAIN_TIMEOUT_S)
    with anyio.move_on_after(DRAIN_TIMEOUT_S):
        await server.idle()
    await anyio.sleep(REPLY_GRACE_S)  # the SDK writes and flushes the last replies


async def _stop_on_signal(app: GuardApp, server: GuardServer, scope: anyio.CancelScope) -> None:
    """On SIGTERM/SIGINT: finish the running calls, then stop serving."""
    with anyio.open_signal_receiver(*SIGNALS) as signals:
        async for signum in signals:
            log.warning("signal received; finishing running tool calls", signal=signum)
            await finish_calls(app, server)
            scope.cancel()
            return


async def _serve_stdio(app: GuardApp, server: GuardServer) -> None:
    lines = stdio_server(stdin=StdinLines())  # type: ignore[arg-type]  # the SDK iterates it
    with anyio.CancelScope() as stopped:  # a signal: the SDK's reader and writer stop too
        async with lines as (read, write), anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, app, server, stopped)
            await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()  # the client closed stdin: the writer ends by itself


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
    if not app.drained:
        sys.exit(1)  # a signal's wait for running calls timed out


def _client_gone() -> None:
    """Log that the client left, and point stdout at the null device: Python flushes stdout
    (and the SDK's wrapper of it) at exit, which would fail, and print, once more."""
    log.warning("client closed the connection; stopping", transport="stdio")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def http_app(app: GuardApp, host: str, port: int) -> Starlette:
    """The Starlette app for Streamable HTTP (tokens and Host/Origin checks applied)."""
    return _http(app, host, port)[0]


def _http(app: GuardApp, host: str, port: int) -> tuple[Starlette, GuardServer]:
    tokens = tokens_of(app.config)  # every configured token usable, or no start
    if not is_loopback(host) and not tokens:
        raise ConfigError(
            f"refusing to serve HTTP on {host}: not loopback and no [[server.tokens]] with a value"
        )
    server = build_server(app)
    security = transport_security(app.config, host, port)
    asgi = server.streamable_http_app(
        host=host,
        transport_security=security,
        session_idle_timeout=app.config.raw.ledger.idle_s,  # the SDK's and the ledger's agree
        token_verifier=tokens or None,
        auth=auth_settings(app.config) if tokens else None,
    )
    asgi.add_middleware(EndedSessions, guard=app)  # a DELETE drops its evidence too
    return asgi, server


def start_banner(config: Config, host: str, port: int) -> str:
    """What `serve --http` says at start: where, which config and log, how many tokens."""
    shown = f"[{host}]" if ":" in host else host
    return (
        f"lingyi serve: Streamable HTTP at http://{shown}:{port}/mcp\n"
        f"  config: {config.source}\n"
        f"  log:    {config.log_path}\n"
        f"  tokens: {tokens_line(config)}\n"
    )


class HttpServer(uvicorn.Server):
    """uvicorn, stopping the way the guard stops: on SIGTERM/SIGINT the running tool calls
    finish and answer before the connections close (a client's open event stream would
    otherwise hold the stop until it leaves), and a stop asked for is an exit 0."""

    def __init__(self, config: uvicorn.Config, app: GuardApp, server: GuardServer) -> None:
        super().__init__(config)
        self.guard, self.mcp = app, server

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        log.warning("stopping; finishing running tool calls")
        await finish_calls(self.guard, self.mcp)
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without raising the signal again once stopped (exit 130 on Ctrl-C)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {sig: signal.signal(sig, self.handle_exit) for sig in SIGNALS}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)


def serve_http(config: Config, host: str, port: int) -> None:
    """Serve Streamable HTTP at http://host:port/mcp until SIGTERM/SIGINT (then exit 0)."""
    app = GuardApp(config)
    try:
        asgi, server = _http(app, host, port)
        settled()
        sys.stderr.write(start_banner(config, host, port))
        sys.stderr.flush()
        settings = uvicorn.Config(
            asgi,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            log_level="warning",
            timeout_graceful_shutdown=STREAMS_GRACE_S,  # the calls have answered: idle streams
        )
        HttpServer(settings, app, server).run()
    finally:
        app.close()
    if not app.drained:
        sys.exit(1)  # the wait for running calls timed out
