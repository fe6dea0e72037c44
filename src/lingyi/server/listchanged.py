"""``notifications/tools/list_changed``: the guard tells its clients when what it serves changed.

What the guard serves changes at run time when an upstream adds, removes or changes a tool
(:meth:`lingyi.gateway.Gateway.relist`). The MCP protocol has two ways to say so, one per era:

- handshake-era connections (2025-11-25: stdio, in-process, stateful Streamable HTTP) get the
  notification on their connection's own channel (the standalone stream over HTTP); the
  ``tools.listChanged`` capability is declared in the ``initialize`` result
  (:func:`declare_list_changed`). The connections are collected as their messages pass
  (:class:`ToolListNotifier` is a server middleware), weakly, and dropped when they close;
- 2026-07-28 connections open a ``subscriptions/listen`` stream; the event is published on the
  server's subscription bus, which delivers it to every stream that asked for tool changes
  (the SDK declares ``listChanged`` there because it serves ``subscriptions/listen``).

The re-listing runs in a thread of its own, so the notification is sent on the server's event
loop (its token is taken from the first message the server handles). A client that never sent
a message has nothing to refresh.
"""

from __future__ import annotations

import weakref
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from lingyi._logging import get_logger

log = get_logger()
LIST_CHANGED = "notifications/tools/list_changed"


class ToolListNotifier:
    """Collects the handshake-era connections and sends them (and the bus) the change."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        self.connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._token: anyio.lowlevel.EventLoopToken | None = None

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if self._token is None:
            self._token = anyio.lowlevel.current_token()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._keep(ctx.session._connection)  # the session is per request: keep its connection
        return await call_next(ctx)

    def _keep(self, connection: Connection) -> None:
        if connection not in self.connections:
            self.connections.add(connection)
            connection.exit_stack.callback(self.connections.discard, connection)

    def announce(self) -> None:
        """From any thread but the server's loop: tell every client (no loop yet: no client)."""
        if self._token is None:
            return
        try:
            anyio.from_thread.run(self._send, token=self._token)
        except Exception as exc:  # the server stopped meanwhile: no one is left to tell
            log.warning("tools.list_changed_not_sent", error=str(exc) or type(exc).__name__)

    async def _send(self) -> None:
        sent = 0
        for connection in list(self.connections):
            try:
                await connection.outbound.notify(LIST_CHANGED, None)
                sent += 1
            except Exception:  # a connection that closed: forget it, tell the others
                self.connections.discard(connection)
        await self.bus.publish(ToolsListChanged())  # the 2026-07-28 listen streams
        log.info("tools.list_changed_sent", connections=sent)


def declare_list_changed(lowlevel: Server[Any]) -> None:
    """Declare ``tools.listChanged`` in handshake-era ``initialize`` results.

    The SDK builds them with ``create_initialization_options()`` and no notification options
    (its own TODO: they have to be passed from outside), so the default is given here.
    """
    create = lowlevel.create_initialization_options
    ours = NotificationOptions(tools_changed=True)

    def with_ours(
        notification_options: NotificationOptions | None = None, *args: Any, **kw: Any
    ) -> Any:
        return create(notification_options or ours, *args, **kw)

    lowlevel.create_initialization_options = with_ours  # type: ignore[method-assign]
