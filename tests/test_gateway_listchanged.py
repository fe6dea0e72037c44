"""Tools that change upstream reach the clients: an upstream adds, removes and changes tools at
run time (:mod:`tests.upstream_server`'s ``reshape``, a real MCP server in its own process) and
announces it; the guard re-lists, serves what a policy owns, stops serving what is gone, and
tells its own clients (``notifications/tools/list_changed``) only when what it serves changed.

Both protocol eras: a handshake-era client (2025-11-25) gets the notification on its session; a
2026-07-28 client gets it on the ``subscriptions/listen`` stream it opened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import ToolListChangedNotification
from structlog.testing import capture_logs

from lingyi.log import read_log
from lingyi.server import GuardApp, build_server
from lingyi.server.build import GuardServer
from tests.gateway_kit import FAKE_POLICIES, fake_upstream, git_deployment
from tests.test_server import Deployment
from tests.test_server_http import TOKENS, client, with_server

# fake.reshape changes the upstream's list; fake.extra is owned before the upstream lists it;
# fake.stray (added by reshape too) is owned by no policy.
POLICIES = (
    FAKE_POLICIES
    + '\n[tools."fake.reshape"]\nargs.action = { type = "string", required = true }\n'
    + '\n[tools."fake.extra"]\nread_only = true\nargs.text = { type = "string", required = true }\n'
)
MODES = ["legacy", "auto"]  # the initialize handshake (2025-11-25); auto: discover, 2026-07-28


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return git_deployment(tmp_path / "deploy", fake_upstream(timeout_s=10), POLICIES)


class Watch:
    """The tools/list_changed a client received, in either era."""

    def __init__(self) -> None:
        self.count = 0
        self.arrived = anyio.Event()

    def seen(self) -> None:
        self.count += 1
        self.arrived.set()

    async def handler(self, message: Any) -> None:  # the handshake era: on the session
        if isinstance(message, ToolListChangedNotification):
            self.seen()

    async def until(self, count: int) -> None:
        while self.count < count:
            self.arrived = anyio.Event()
            await self.arrived.wait()


async def _listen(client: Client, watch: Watch, stack: AsyncExitStack) -> None:
    """2026-07-28: open a subscriptions/listen stream and count its tool events."""
    sub = await stack.enter_async_context(client.listen(tools_list_changed=True))
    group = await stack.enter_async_context(anyio.create_task_group())

    async def pump() -> None:
        async for _event in sub:
            watch.seen()

    group.start_soon(pump)
    stack.callback(group.cancel_scope.cancel)


Body = Callable[[Client, GuardApp, GuardServer, Watch], Awaitable[None]]


def run(dep: Deployment, mode: str, body: Body) -> None:
    """``body`` over an in-process client of ``mode`` that watches for tools/list_changed."""
    app = GuardApp(dep.config())
    server = build_server(app)
    watch = Watch()
    options = {"message_handler": watch.handler} if mode == "legacy" else {}

    async def main() -> None:
        try:
            async with AsyncExitStack() as stack:
                client_ = await stack.enter_async_context(Client(server, mode=mode, **options))
                if mode != "legacy":
                    await _listen(client_, watch, stack)
                with anyio.fail_after(60):
                    await body(client_, app, server, watch)
        finally:
            app.close()

    anyio.run(main)


async def names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def checked(server: GuardServer, count: int) -> None:
    """Wait (bounded by the body's fail_after) until the server weighed ``count`` changes."""
    while server.checked < count:
        await anyio.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("text", ["灵通的新工具", "a tool added at run time"])
def test_an_added_tool_a_policy_owns_is_served_guarded_and_announced(
    dep: Deployment, mode: str, text: str
) -> None:
    """The upstream adds extra: the client is told, its next tools/list has fake.extra with the
    policy's schema merged in, and a call to it is verified, approved and answered."""
    seen: dict[str, Any] = {}

    async def body(client: Client, app: GuardApp, server: GuardServer, watch: Watch) -> None:
        seen["before"] = "fake.extra" in await names(client)
        await client.call_tool("fake.reshape", {"action": "add"})
        await watch.until(1)
        listed = {t.name: t for t in (await client.list_tools()).tools}
        seen["schema"] = listed["fake.extra"].input_schema if "fake.extra" in listed else {}
        result = await client.call_tool("fake.extra", {"text": text})
        seen["result"] = result.structured_content or {}
        seen["unknown"] = (await client.call_tool("fake.extra", {"text": text, "x": 1})).is_error

    run(dep, mode, body)
    assert seen["before"] is False
    assert seen["schema"]["required"] == ["text"]
    assert seen["schema"]["additionalProperties"] is False
    assert seen["result"]["verdict"]["decision"] == "approved"
    assert seen["result"]["result"]["content"] == [f"extra: {text}"]
    assert seen["unknown"] is True  # an argument neither the policy nor the upstream declares


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("change", "tool"), [("none", None), ("add_unowned", "fake.stray")])
def test_nothing_is_announced_when_nothing_served_changed(
    dep: Deployment, mode: str, change: str, tool: str | None
) -> None:
    """An announcement with no difference, or a tool no policy owns (default deny: never
    listed, a call to it rejected before the upstream): no notification; the next change
    that is served is announced once, so the channel works."""
    seen: dict[str, Any] = {}

    async def body(client: Client, app: GuardApp, server: GuardServer, watch: Watch) -> None:
        assert app.gateway is not None
        await names(client)
        await client.call_tool("fake.reshape", {"action": change})
        if tool is not None:
            await checked(server, 1)
            seen["listed"] = tool in await names(client)
            calls = app.gateway.connections["fake"].calls
            seen["call"] = await client.call_tool(tool, {})
            seen["reached"] = app.gateway.connections["fake"].calls - calls
            await client.call_tool("fake.reshape", {"action": "change"})  # stray, unserved
            await checked(server, 2)
        await client.list_tools()  # a round trip: a notification sent before it is in
        seen["quiet"] = watch.count
        await client.call_tool("fake.reshape", {"action": "add"})
        await watch.until(1)
        await client.list_tools()
        seen["after"] = watch.count

    run(dep, mode, body)
    assert seen["quiet"] == 0 and seen["after"] == 1
    if tool is not None:
        assert seen["listed"] is False
        assert seen["call"].is_error and seen["reached"] == 0


def test_an_unowned_added_tool_is_logged_once_with_why_it_is_not_served(dep: Deployment) -> None:
    """upstream.tool_added, served=False, reason "no policy owns it": one record, however
    often the upstream announces its list afterwards; an owned one is logged served."""

    async def body(client: Client, app: GuardApp, server: GuardServer, watch: Watch) -> None:
        # (the change, the changes weighed after it: an announcement alone changes nothing)
        for action, count in [("add_unowned", 1), ("none", 1), ("none", 1), ("add", 2)]:
            await client.call_tool("fake.reshape", {"action": action})
            await checked(server, count)

    with capture_logs() as logs:
        run(dep, "legacy", body)
    added = [e for e in logs if e["event"] == "upstream.tool_added"]
    assert [(e["tool"], e["served"]) for e in added] == [
        ("fake.stray", False),
        ("fake.extra", True),
    ]
    assert added[0]["reason"] == "no policy owns it"
    assert added[1]["owner"] == "lingflow"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("text", ["还在吗", "still there?"])
def test_a_removed_tool_disappears_and_a_call_to_it_is_refused_and_logged(
    dep: Deployment, mode: str, text: str
) -> None:
    """The upstream removes echo: the client is told, fake.echo is no longer listed, and a
    call to it is a rejection in the log naming the tool, never forwarded upstream; the
    upstream's other tools are still served."""
    seen: dict[str, Any] = {}

    async def body(client: Client, app: GuardApp, server: GuardServer, watch: Watch) -> None:
        assert app.gateway is not None
        seen["before"] = (await client.call_tool("fake.echo", {"text": text})).is_error
        await client.call_tool("fake.reshape", {"action": "remove"})
        await watch.until(1)
        seen["names"] = await names(client)
        calls = app.gateway.connections["fake"].calls
        seen["call"] = await client.call_tool("fake.echo", {"text": text})
        seen["reached"] = app.gateway.connections["fake"].calls - calls

    with capture_logs() as logs:
        run(dep, mode, body)
    assert seen["before"] is False
    assert "fake.echo" not in seen["names"] and "fake.leak" in seen["names"]
    call = seen["call"]
    assert call.is_error and seen["reached"] == 0
    verdict = (call.structured_content or {})["verdict"]
    assert verdict["decision"] == "rejected" and "fake.echo" in verdict["reason"]
    [record] = [
        r
        for line in read_log(dep.log)
        if (r := line.record) and r["id"] == verdict["verification_id"]
    ]
    assert record["tool_call"]["name"] == "fake.echo" and record["decision"] == "rejected"
    assert record["member"] == "lingflow" and "tool.owned" in verdict["codes"]
    assert any(e["event"] == "upstream.tool_removed" and e["tool"] == "fake.echo" for e in logs)


@pytest.mark.parametrize("mode", MODES)
def test_a_changed_definition_is_withheld_and_announced(dep: Deployment, mode: str) -> None:
    """The rug pull as before (upstream.tool_changed, withheld), now also announced: the
    client's next tools/list no longer has fake.echo."""
    seen: dict[str, Any] = {}

    async def body(client: Client, app: GuardApp, server: GuardServer, watch: Watch) -> None:
        await names(client)
        await client.call_tool("fake.mutate", {})
        await watch.until(1)
        seen["names"] = await names(client)

    run(dep, mode, body)
    assert "fake.echo" not in seen["names"] and "fake.leak" in seen["names"]


@pytest.mark.parametrize("mode", MODES)
def test_the_capability_is_declared(dep: Deployment, mode: str) -> None:
    """tools.listChanged is true in what the server declares, in either era."""
    caps: list[Any] = []

    async def body(client: Client, app: GuardApp, server: GuardServer, watch: Watch) -> None:
        tools = client.server_capabilities.tools
        caps.append(tools.list_changed if tools else None)

    run(dep, mode, body)
    assert caps == [True]


# --- over Streamable HTTP, with tokens --------------------------------------------------------


@pytest.fixture
def http_dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", "tok-flow-0123456789abcdef0123456789")
    return git_deployment(tmp_path / "deploy", TOKENS + fake_upstream(timeout_s=10), POLICIES)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("token", "sees"),
    [
        ("tok-flow-0123456789abcdef0123456789", True),
        ("tok-desktop-0123456789abcdef0123456789", False),
    ],
)
def test_over_http_an_added_tool_appears_only_for_its_member(
    http_dep: Deployment, mode: str, token: str, sees: bool
) -> None:
    """灵通's token adds fake.extra upstream; a second session (this token) is told, and its
    next tools/list shows fake.extra for 灵通's token and not for 灵依 and 灵知's."""
    seen: dict[str, Any] = {}

    async def body(url: str) -> None:
        watch = Watch()
        legacy = {"message_handler": watch.handler} if mode == "legacy" else {}
        async with AsyncExitStack() as stack:
            flow = await stack.enter_async_context(
                client(url, "tok-flow-0123456789abcdef0123456789")
            )
            other = await stack.enter_async_context(client(url, token, mode, **legacy))
            if mode != "legacy":
                await _listen(other, watch, stack)
            seen["before"] = "fake.extra" in await names(other)
            await flow.call_tool("fake.reshape", {"action": "add"})
            await watch.until(1)
            seen["after"] = "fake.extra" in await names(other)
            seen["flow"] = "fake.extra" in await names(flow)

    with_server(http_dep, body)
    assert seen["before"] is False
    assert seen["after"] is sees
    assert seen["flow"] is True
