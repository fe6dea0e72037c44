"""Upstreams that crash, hang, answer garbage or fail: a clear error for that call, and the
guard (and the upstream, restarted) keeps serving. A slow upstream is bounded by its timeout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from lingyi.server import GuardApp, build_server
from tests.gateway_kit import FAKE_POLICIES, fake_upstream, git_deployment
from tests.test_server import Deployment, with_client


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return git_deployment(tmp_path / "deploy", fake_upstream(timeout_s=3), FAKE_POLICIES)


async def call(client: Client, tool: str, **args: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, args)
    return bool(result.is_error), dict(result.structured_content or {})


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        ("fake.crash", "upstream 'fake' failed"),
        ("fake.hang", "did not answer within 3s"),
        ("fake.garbage", "did not answer within 3s"),
        ("fake.fail", "fake.fail failed upstream"),
    ],
)
def test_a_bad_upstream_fails_the_call_clearly_and_the_guard_stays_up(
    dep: Deployment, tool: str, says: str
) -> None:
    """The bad call is an error result naming the upstream and what went wrong (after the
    approval was logged); the next call to the same upstream works again."""
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        seen["bad"] = await call(client, tool)
        seen["after"] = await call(client, "fake.echo", text="still here")
        seen["built_in"] = await call(client, "search_knowledge", query="气功")

    with_client(dep, body)
    failed, data = seen["bad"]
    assert failed and says in data["verdict"]["error"]
    assert data["result"] is None
    ok, after = seen["after"]
    assert not ok and after["result"]["content"] == ["still here"]
    assert seen["built_in"][0] is False


def test_an_unreachable_upstream_serves_nothing_and_the_rest_is_served(tmp_path: Path) -> None:
    """A command that does not exist: its tools are not listed; the git upstream still is."""
    broken = fake_upstream().replace('command = ["', 'command = ["/nonexistent/python", "')
    dep = git_deployment(tmp_path / "deploy", broken, FAKE_POLICIES)
    names: list[str] = []

    async def body(client: Client) -> None:
        names.extend(t.name for t in (await client.list_tools()).tools)

    with_client(dep, body)
    assert not [n for n in names if n.startswith("fake.")]
    assert "git.git_log" not in names  # this deployment's policies own only fake.* upstream tools
    assert "search_knowledge" in names


def _with_app(dep: Deployment, body: Any) -> GuardApp:
    """Run ``body(client, app)`` over an in-process client; returns the closed app."""
    app = GuardApp(dep.config())

    async def main() -> None:
        try:
            async with Client(build_server(app)) as client:
                with anyio.fail_after(60):
                    await body(client, app)
        finally:
            app.close()

    anyio.run(main)
    return app


async def _until(condition: Any) -> None:
    """Wait (bounded by the caller's fail_after) for the background re-listing."""
    while not condition():
        await anyio.sleep(0.05)


@pytest.mark.parametrize(
    ("on_change", "change", "served_after"),
    [("withhold", "retitle", False), ("flag", "retitle", True), ("flag", "mutate", False)],
)
def test_a_tool_whose_definition_changes_is_flagged_and_withheld_by_policy(
    tmp_path: Path, on_change: str, change: str, served_after: bool
) -> None:
    """fake.retitle changes echo's description and sends tools/list_changed: the gateway
    re-lists, logs the change, and (withhold) stops serving echo, or (flag) serves the new
    definition. fake.mutate's new description asks the model to read ~/.ssh/id_rsa (a poisoned
    tool): withheld even with flag."""
    extra = fake_upstream(timeout_s=10, on_change=on_change)
    dep = git_deployment(tmp_path / "deploy", extra, FAKE_POLICIES)
    seen: dict[str, Any] = {}

    async def body(client: Client, app: GuardApp) -> None:
        assert app.gateway is not None
        gateway = app.gateway
        seen["before"] = (await client.call_tool("fake.echo", {"text": "a"})).is_error
        await client.call_tool(f"fake.{change}", {})
        await _until(
            lambda: (
                "fake.echo" in gateway.withheld
                or "unchanged" in (gateway.tools["fake.echo"].tool.description or "")
            )
        )
        listed = {t.name: t for t in (await client.list_tools()).tools}
        seen["listed"] = "fake.echo" in listed
        seen["description"] = listed["fake.echo"].description if "fake.echo" in listed else ""
        seen["after"] = (await client.call_tool("fake.echo", {"text": "b"})).is_error

    _with_app(dep, body)
    assert seen["before"] is False
    assert seen["listed"] is served_after
    assert seen["after"] is (not served_after)
    if served_after:
        assert "unchanged" in seen["description"]
