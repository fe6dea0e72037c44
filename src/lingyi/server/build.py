"""The MCP server over a :class:`GuardApp`: the SDK's low-level ``Server``, made for tools
defined by data, with the tool table, the resources and logging as its handlers."""

from __future__ import annotations

import threading
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    SetLevelRequestParams,
    TextContent,
)

from lingyi import __version__
from lingyi._logging import get_logger
from lingyi.server.app import ConnectionScope, Ctx, GuardApp, Request
from lingyi.server.auth import principal_of
from lingyi.server.listchanged import ToolListNotifier
from lingyi.server.notifications import set_level
from lingyi.server.resources import Resources
from lingyi.server.tools import GUARD_NOTE, ToolTable, check_tools

log = get_logger()


class GuardServer(Server[ConnectionScope]):
    """tools/list follows the policies and the upstreams' listings: a reload republishes the
    schemas, an upstream's new tools get entries, and the clients are told
    (``notifications/tools/list_changed``) when what the guard serves changed."""

    def __init__(self, table: ToolTable) -> None:
        resources = Resources(table.app)
        self.bus = InMemorySubscriptionBus()  # the 2026-07-28 listen streams
        super().__init__(
            "lingyi-guard",
            version=__version__,
            instructions="Verify before you assert. " + GUARD_NOTE,
            lifespan=table.app.lifespan,
            get_tool_input_schema=table.input_schema,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=resources.list,
            on_list_resource_templates=resources.templates,
            on_read_resource=resources.read,
            on_completion=resources.complete,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        # logging/setLevel through the public registration: the constructor's argument for it
        # warns that 2026-07-28 deprecates logging, which 2025-11-25 clients still use.
        self.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
        self.table = table
        self.notifier = ToolListNotifier(self.bus)
        self.middleware.append(self.notifier)
        self.lock = threading.Lock()  # the table changes in the re-listing's thread too
        self.shown: str | None = None  # what the clients were last shown (None: nothing yet)
        self.checked = 0  # changes weighed (and announced, if served ones): tests wait on it
        self.calls = 0  # tools/call handlers running: a stop waits for their replies
        table.app.on_tools_changed.append(self.tools_changed)
        table.app.on_session_end.append(self.notifier.forget)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The transports ask with no options; the guard's tool list changes (``listChanged``)."""
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )

    async def list_tools(
        self, request: Request, params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        with self.lock:
            self.table.sync()
            self.table.refresh()
            if self.shown is None:
                self.shown = self.table.served()
        principal = principal_of(get_access_token())
        return ListToolsResult(tools=self.table.listed(principal.members if principal else None))

    async def call_tool(
        self, request: Request, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        with self.lock:  # a tool listed since the last tools/list can be called at once
            self.table.sync()
        entry = self.table.entry(params.name)
        if entry is None:
            return _error(f"Unknown tool: {params.name}")
        self.calls += 1
        try:
            return await entry.call(Ctx(request, params), dict(params.arguments or {}))
        except Exception:  # a bug: the trace stays on the server, the model reads the tool
            log.exception("tool.crashed", tool=params.name)
            return _error(f"Error executing tool {params.name}")
        finally:
            self.calls -= 1

    async def idle(self) -> None:
        """Returns when no tools/call handler is running (each has handed back its reply)."""
        while self.calls:
            await anyio.sleep(0.01)

    def tools_changed(self) -> None:
        """An upstream's tools changed (in the re-listing's thread): announce it to the
        clients only when what they are served (names, schemas, descriptions) changed."""
        with self.lock:
            self.table.sync()
            served, shown = self.table.served(), self.shown
            self.shown = served
        if shown is not None and served != shown:
            self.notifier.announce()
        self.checked += 1


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build_server(app: GuardApp) -> GuardServer:
    """The MCP server over ``app``; refuses when the policies and the served tools differ."""
    check_tools(app.policies, tuple(u.name for u in app.config.raw.upstreams))
    return GuardServer(ToolTable(app))
