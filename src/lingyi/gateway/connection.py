"""One upstream MCP server, reached with the real MCP client.

The guard's tool work runs in worker threads (verify → execute → record); the MCP client is
async and its session must live in one task. So the gateway owns a blocking portal (an event
loop in a thread of its own): each connection's session lives in a task there, and a worker
thread calls through the portal, bounded by the upstream's timeout. An upstream that crashes,
hangs or answers garbage fails that call with an :class:`UpstreamError`; the next call
reconnects (a hung process is stopped first). Nothing an upstream does stops the guard.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx2
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, PaginatedRequestParams, Tool, ToolListChangedNotification

from lingyi._logging import get_logger
from lingyi.config import UpstreamEntry
from lingyi.errors import BackendError

log = get_logger()
T = TypeVar("T")


class UpstreamError(BackendError):
    """An upstream call that gave no result: down, too slow, or malformed."""


# The guard's own interpreter: a client such as Claude Desktop starts the guard with a PATH
# that may hold no python at all, or another one without the upstream installed.
PYTHON_NAMES = ("python", "python3", "{python}")


def interpreter(command: str) -> str:
    """``python``, ``python3`` or ``{python}`` as the interpreter running the guard."""
    return sys.executable if command in PYTHON_NAMES else command


def _transport(entry: UpstreamEntry) -> AbstractAsyncContextManager[Any]:
    """The client transport: the stdio command, or the Streamable HTTP endpoint."""
    if entry.command is not None:
        command, *args = entry.command
        command = interpreter(command)
        env = entry.env or None
        # The upstream's stderr is ours (stderr); our stdout stays protocol only.
        return stdio_client(StdioServerParameters(command=command, args=args, env=env), sys.stderr)
    return _http(str(entry.url), entry)


@asynccontextmanager
async def _http(url: str, entry: UpstreamEntry) -> AsyncIterator[Any]:
    client = httpx2.AsyncClient(headers=entry.headers, timeout=entry.timeout_s)
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


class Connection:
    """A session with one upstream; ``calls`` counts the calls forwarded to it."""

    def __init__(
        self, entry: UpstreamEntry, portal: BlockingPortal, on_list_changed: Callable[[], None]
    ) -> None:
        self.entry = entry
        self.portal = portal
        self.calls = 0
        self._on_list_changed = on_list_changed
        self._session: ClientSession | None = None
        self._stop: anyio.Event | None = None

    # --- from worker threads ----------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        """Every tool the upstream lists (all pages)."""
        return self._blocking(_list_tools)

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """One tools/call, bounded by the timeout; the result as the upstream gave it."""
        self.calls += 1
        return self._blocking(lambda s: s.call_tool(tool, arguments))

    def close(self) -> None:
        self.portal.call(self._drop)

    def _blocking(self, fn: Callable[[ClientSession], Awaitable[T]]) -> T:
        try:
            if self._session is None:
                self.portal.start_task(self._serve)
            return self.portal.call(self._bounded, fn)
        except UpstreamError:
            raise
        except Exception as exc:  # whatever the upstream did, this call fails; the guard stays
            self.portal.call(self._drop)
            raise UpstreamError(self._failure(exc)) from exc

    def _failure(self, exc: BaseException) -> str:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]  # the task groups' wrapping says nothing
        text = str(exc) or type(exc).__name__
        return f"upstream {self.entry.name!r} failed: {text}"

    # --- on the portal's event loop ---------------------------------------------------------

    async def _bounded(self, fn: Callable[[ClientSession], Awaitable[T]]) -> T:
        session = self._session
        if session is None:
            raise UpstreamError(f"upstream {self.entry.name!r} is not connected")
        try:
            with anyio.fail_after(self.entry.timeout_s):
                return await fn(session)
        except TimeoutError as exc:
            self._drop()  # a hung upstream is stopped; the next call starts it again
            wait = f"{self.entry.timeout_s:g}s"
            raise UpstreamError(
                f"upstream {self.entry.name!r} did not answer within {wait}"
            ) from exc

    def _drop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        self._session, self._stop = None, None

    async def _serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The session's task: connect and initialize (within the timeout), then live until
        dropped. A failure before it is up fails the connect; after, it is logged only."""
        stop, up = anyio.Event(), False
        try:
            async with (
                _transport(self.entry) as (read, write),
                ClientSession(read, write, message_handler=self._message) as session,
            ):
                with anyio.fail_after(self.entry.connect_timeout_s):
                    await session.initialize()
                self._session, self._stop, up = session, stop, True
                task_status.started()
                await stop.wait()
        except Exception as exc:
            if not up:
                raise
            log.warning("upstream.lost", upstream=self.entry.name, error=self._failure(exc))
        finally:
            if self._stop is stop:
                self._session, self._stop = None, None

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._on_list_changed()
        elif isinstance(message, Exception):  # malformed output: the pending call times out
            log.warning("upstream.bad_message", upstream=self.entry.name, error=str(message))


async def _list_tools(session: ClientSession) -> list[Tool]:
    found: list[Tool] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        found += page.tools
        if not (cursor := page.next_cursor):
            return found
