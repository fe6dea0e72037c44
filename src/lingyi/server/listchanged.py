"""``notifications/tools/list_changed``: the guard tells its clients when what it serves changed.

What the guard serves changes at run time when an upstream adds, removes or changes a tool
(:meth:`lingyi.gateway.Gateway.relist`). The MCP protocol has two ways to say so, one per era:

- handshake-era connections (2025-11-25: stdio, in-process, stateful Streamable HTTP) get the
  notification on their connection's own channel (the standalone stream over HTTP); the
  ``tools.listChanged`` capability is declared in the ``initialize`` result
  (:meth:`lingyi.server.build.GuardServer.create_initialization_options`). Each ledger session's
  latest request session is kept as its messages pass (:class:`ToolListNotifier` is a server
  middleware); a session that ended, or whose send fails, is forgotten;
- 2026-07-28 connections open a ``subscriptions/listen`` stream; the event is published on the
  server's subscription bus, which delivers it to every stream that asked for tool changes.

The re-listing runs in a thread of its own, so the notification is sent on the server's event
loop (its token is taken from the first message the server handles). A client that never sent
a message has nothing to refresh.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from lingyi._logging import get_logger
from lingyi.server.app import caller_of

log = get_logger()


class ToolListNotifier:
    """Keeps a channel to each handshake-era client and sends them (and the bus) the change."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        self.sessions: dict[str, ServerSession] = {}  # ledger session → its latest request's
        self.lock = threading.Lock()
        self.token: anyio.lowlevel.EventLoopToken | None = None

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if self.token is None:
            self.token = anyio.lowlevel.current_token()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            caller = caller_of(ctx)
            if not caller.once:
                with self.lock:
                    self.sessions[caller.session] = ctx.session
        return await call_next(ctx)

    def forget(self, session: str) -> None:
        """A ledger session ended: its client is gone."""
        with self.lock:
            self.sessions.pop(session, None)

    def announce(self) -> None:
        """From any thread but the server's loop: tell every client (no loop yet: no client)."""
        if self.token is None:
            return
        try:
            anyio.from_thread.run(self.send, token=self.token)
        except Exception as exc:  # the server stopped meanwhile: no one is left to tell
            log.warning("tools.list_changed_not_sent", error=str(exc) or type(exc).__name__)

    async def send(self) -> None:
        with self.lock:
            known = list(self.sessions.items())
        sent = 0
        for name, session in known:
            try:  # no related request: the connection's own channel
                await session.send_tool_list_changed()
                sent += 1
            except Exception:  # a connection that closed: forget it, tell the others
                self.forget(name)
        await self.bus.publish(ToolsListChanged())  # the 2026-07-28 listen streams
        log.info("tools.list_changed_sent", connections=sent)
