"""The MCP server over a :class:`GuardApp`: the tool table, the resources, logging, auth."""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import MCPServer
from mcp_types import Tool as MCPTool

from lingyi import __version__
from lingyi.server.app import ConnectionScope, GuardApp
from lingyi.server.auth import StaticTokens, auth_settings, principal_of
from lingyi.server.notifications import offer_logging
from lingyi.server.resources import add_resources
from lingyi.server.tools import GUARD_NOTE, ToolTable, check_tools


class GuardServer(MCPServer[ConnectionScope]):
    """MCPServer whose tools/list follows the policies: a reload republishes the schemas."""

    def __init__(self, table: ToolTable, **settings: Any) -> None:
        super().__init__(tools=table.tools(), **settings)
        self.table = table

    async def list_tools(self) -> list[MCPTool]:
        self.table.refresh()
        principal = principal_of(get_access_token())
        shown = self.table.listed(principal.members if principal else None)
        return [t for t in await super().list_tools() if t.name in shown]


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
