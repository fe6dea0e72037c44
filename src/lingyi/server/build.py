"""The MCP server over a :class:`GuardApp`: the tool table, the resources, logging, auth."""

from __future__ import annotations

import threading
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult
from mcp_types import Tool as MCPTool

from lingyi import __version__
from lingyi.server.app import ConnectionScope, GuardApp
from lingyi.server.auth import StaticTokens, auth_settings, principal_of
from lingyi.server.listchanged import ToolListNotifier, declare_list_changed
from lingyi.server.notifications import offer_logging
from lingyi.server.resources import add_resources
from lingyi.server.tools import GUARD_NOTE, ToolTable, check_tools


class GuardServer(MCPServer[ConnectionScope]):
    """MCPServer whose tools/list follows the policies and the upstreams' listings: a reload
    republishes the schemas, an upstream's new tools get entries, and the clients are told
    (``notifications/tools/list_changed``) when what the guard serves changed."""

    def __init__(self, table: ToolTable, **settings: Any) -> None:
        super().__init__(tools=table.tools(), **settings)
        self.table = table
        self.notifier = ToolListNotifier(self._subscriptions)
        self.middleware.append(self.notifier)
        declare_list_changed(self._lowlevel_server)
        self._lock = threading.Lock()  # the table changes in the re-listing's thread too
        self._served: str | None = None  # what the clients were last shown (None: nothing yet)
        self.checked = 0  # changes weighed (and announced, if served ones): tests wait on it
        table.app.on_tools_changed.append(self.tools_changed)

    async def list_tools(self) -> list[MCPTool]:
        with self._lock:
            self._sync()
            self.table.refresh()
            if self._served is None:
                self._served = self.table.served()
        principal = principal_of(get_access_token())
        shown = self.table.listed(principal.members if principal else None)
        return [t for t in await super().list_tools() if t.name in shown]

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[ConnectionScope, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        with self._lock:  # a tool listed since the last tools/list can be called at once
            self._sync()
        return await super().call_tool(name, arguments, context)

    def tools_changed(self) -> None:
        """An upstream's tools changed (in the re-listing's thread): announce it to the
        clients only when what they are served (names, schemas, descriptions) changed."""
        with self._lock:
            self._sync()
            served, shown = self.table.served(), self._served
            self._served = served
        if shown is not None and served != shown:
            self.notifier.announce()
        self.checked += 1

    def _sync(self) -> None:
        for tool in self.table.sync():
            # MCPServer adds tools from functions only; the table builds its own Tool objects.
            self._tool_manager._tools[tool.name] = tool


def build_server(app: GuardApp, *, tokens: StaticTokens | None = None) -> GuardServer:
    """The MCP server over ``app``; refuses when the policies and the served tools differ."""
    check_tools(app.policies, tuple(u.name for u in app.config.raw.upstreams))

    server = GuardServer(
        ToolTable(app),
        name="lingyi-guard",
        version=__version__,
        instructions="Verify before you assert. " + GUARD_NOTE,
        lifespan=app.lifespan,
        log_level="WARNING",
        token_verifier=tokens if tokens else None,
        auth=auth_settings(app.config) if tokens else None,
    )
    add_resources(server, app)
    offer_logging(server)
    return server
