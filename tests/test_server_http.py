"""Streamable HTTP: a real uvicorn on 127.0.0.1, a real MCP client, real bearer tokens.

Without a token the server answers 401; a token may only speak for the members it is
bound to; a foreign Origin and a bad Host are refused (DNS-rebinding protection).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, LoggingMessageNotificationParams

from lingyi.config import load_config
from lingyi.errors import ConfigError
from lingyi.log import read_log
from lingyi.server import GuardApp, http_app, transport_security
from tests.test_server import Deployment, deploy, verdict

TIMEOUT_S = 30.0
TOKENS = """
[server]
host = "127.0.0.1"

[[server.tokens]]
name = "desktop"
token = "tok-desktop-0123456789abcdef0123456789"
members = ["lingyi", "lingzhi"]

[[server.tokens]]
name = "flow"
env = "LINGYI_TEST_FLOW_TOKEN"
members = ["lingflow"]
"""
INIT = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def running(dep: Deployment) -> AsyncIterator[str]:
    """uvicorn serving the deployment on a free loopback port; yields the /mcp URL."""
    port = free_port()
    app = GuardApp(dep.config())
    server = uvicorn.Server(
        uvicorn.Config(http_app(app, "127.0.0.1", port), host="127.0.0.1", port=port,
                       log_config=None, access_log=False, log_level="warning")
    )  # fmt: skip
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            with anyio.fail_after(TIMEOUT_S):
                while not server.started:
                    await anyio.sleep(0.02)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True
    app.close()


def client(url: str, token: str | None, mode: str = "auto", **options: Any) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode, **options)


Body = Callable[[str], Awaitable[None]]


def with_server(dep: Deployment, body: Body) -> None:
    async def main() -> None:
        async with running(dep) as url:
            with anyio.fail_after(TIMEOUT_S):
                await body(url)

    anyio.run(main)


@pytest.fixture
def dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", "tok-flow-0123456789abcdef0123456789")
    return deploy(tmp_path / "deploy", TOKENS)


async def raw_post(url: str, headers: dict[str, str]) -> int:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=10) as http:
        return (await http.post(url, json=INIT, headers=base | headers)).status_code


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        (
            {
                "Authorization": "Bearer tok-desktop-0123456789abcdef0123456789",
                "Origin": "http://evil.example",
            },
            403,
        ),
        (
            {
                "Authorization": "Bearer tok-desktop-0123456789abcdef0123456789",
                "Host": "evil.example",
            },
            421,
        ),
        (
            {
                "Authorization": "Bearer tok-desktop-0123456789abcdef0123456789",
                "Host": "localhost:1",
            },
            421,
        ),
    ],
)
def test_http_refuses_missing_tokens_foreign_origins_and_bad_hosts(
    dep: Deployment, headers: dict[str, str], status: int
) -> None:
    """No/unknown token → 401; foreign Origin → 403; a Host not ours (name or port) → 421."""
    seen: list[int] = []

    async def body(url: str) -> None:
        seen.append(await raw_post(url, headers))

    with_server(dep, body)
    assert seen == [status]


def test_http_accepts_a_token_and_allowed_origin(dep: Deployment) -> None:
    """With a token and our own Origin, a real MCP client lists tools and searches; the list
    follows the token (灵依 and 灵知: search_knowledge, not 灵通's git_push)."""
    out: list[Any] = []

    async def body(url: str) -> None:
        origin = url.rsplit("/", 1)[0]
        out.append(
            await raw_post(
                url,
                {
                    "Authorization": "Bearer tok-desktop-0123456789abcdef0123456789",
                    "Origin": origin,
                },
            )
        )
        async with client(url, "tok-desktop-0123456789abcdef0123456789") as mcp:
            out.append({t.name for t in (await mcp.list_tools()).tools})
            out.append(await mcp.call_tool("search_knowledge", {"query": "气功"}))

    with_server(dep, body)
    assert out[0] not in (401, 403, 421)  # past auth and the Host/Origin checks
    assert "search_knowledge" in out[1] and "git_push" not in out[1]
    assert verdict(out[2])["decision"] == "approved"


@pytest.mark.parametrize(
    ("token", "tool", "args", "decision", "code"),
    [
        ("tok-desktop-0123456789abcdef0123456789", "search_knowledge", {"query": "庄子"}, "approved", None),
        ("tok-desktop-0123456789abcdef0123456789", "git_branch", {"repo_path": "council-app", "name": "x"}, "rejected", "auth.member_bound"),
        ("tok-flow-0123456789abcdef0123456789", "git_branch", {"repo_path": "council-app", "name": "x"}, "approved", None),
        ("tok-flow-0123456789abcdef0123456789", "search_knowledge", {"query": "庄子"}, "rejected", "auth.member_bound"),
        ("tok-desktop-0123456789abcdef0123456789", "verify_assertion", {"member": "灵依", "type": "communication", "content": "用户说下周一之前要看到报告"}, "approved", None),
        ("tok-desktop-0123456789abcdef0123456789", "verify_assertion", {"member": "LingFlow", "type": "fact", "content": "The release is done"}, "rejected", "auth.member_bound"),
        ("tok-desktop-0123456789abcdef0123456789", "verify_assertion", {"member": "nobody", "type": "fact", "content": "hi"}, "rejected", "auth.member_bound"),
        ("tok-flow-0123456789abcdef0123456789", "post_council_message", {"member": "lingresearch", "content": "Dataset v3 is done"}, "rejected", "auth.member_bound"),
    ],
)  # fmt: skip
def test_tokens_speak_only_for_their_members(
    dep: Deployment, token: str, tool: str, args: dict[str, Any], decision: str, code: str | None
) -> None:
    """A token bound to some members is refused (a verdict, not a crash) for any other."""
    out: list[CallToolResult] = []

    async def body(url: str) -> None:
        async with client(url, token) as mcp:
            out.append(await mcp.call_tool(tool, args))

    with_server(dep, body)
    found = verdict(out[0])
    assert found["decision"] == decision and out[0].is_error is (decision == "rejected")
    if code:
        assert code in found["codes"]


def test_http_sessions_keep_their_own_evidence(dep: Deployment) -> None:
    """Stateful HTTP clients (mcp-session-id) each get their own ledger session."""
    fact = {"member": "lingzhi", "type": "fact", "content": "调息是气功的核心"}
    decisions: list[str] = []

    async def body(url: str) -> None:
        async with client(url, "tok-desktop-0123456789abcdef0123456789", "legacy") as first:
            hits = (await first.call_tool("search_knowledge", {"query": "气功"})).structured_content
            cited = fact | {"evidence_ids": [hits["result"]["hits"][0]["id"]]}  # type: ignore[index]
            decisions.append(verdict(await first.call_tool("verify_assertion", cited))["decision"])
        async with client(url, "tok-desktop-0123456789abcdef0123456789", "legacy") as second:
            decisions.append(verdict(await second.call_tool("verify_assertion", cited))["decision"])

    with_server(dep, body)
    assert decisions == ["approved", "rejected"]


def test_non_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    """Binding beyond loopback needs bearer tokens; the allow-lists name our port."""
    dep = deploy(tmp_path / "deploy")
    app = GuardApp(dep.config())
    try:
        with pytest.raises(ConfigError, match="not loopback"):
            http_app(app, "0.0.0.0", 8765)
    finally:
        app.close()
    security = transport_security(load_config(dep.config_path), "10.0.0.5", 9000)
    assert "127.0.0.1:9000" in security.allowed_hosts and "10.0.0.5:9000" in security.allowed_hosts
    assert "http://localhost:9000" in security.allowed_origins
    assert security.enable_dns_rebinding_protection


@pytest.mark.filterwarnings(
    "ignore:The logging capability is deprecated"
)  # 2025-11-25 clients use it
def test_http_raw_arguments_are_logged_and_verdicts_reach_the_clients_log(dep: Deployment) -> None:
    """Over HTTP too: an invalid argument is a logged verdict, and the client's log hears it."""
    out: list[CallToolResult] = []
    logs: list[tuple[str, str]] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.data["verification_id"]))

    async def body(url: str) -> None:
        async with client(
            url, "tok-desktop-0123456789abcdef0123456789", "legacy", logging_callback=on_log
        ) as mcp:
            await mcp.set_logging_level("info")
            out.append(await mcp.call_tool("search_knowledge", {"query": "气功", "limit": "lots"}))
            out.append(await mcp.call_tool("search_knowledge", {"query": "气功"}))

    with_server(dep, body)
    found = [verdict(r) for r in out]
    assert out[0].is_error and found[0]["codes"] == ["tool.args_schema"]
    logged = [line.record["id"] for line in read_log(dep.log) if line.record]
    assert logged == [v["verification_id"] for v in found]
    assert logs == [("warning", logged[0]), ("info", logged[1])]


def test_serve_http_says_where_it_listens_on_stderr(dep: Deployment) -> None:
    """`lingyi serve --http` prints its URL, config, log and number of tokens on stderr."""
    port = free_port()
    args = [
        "-m",
        "lingyi",
        "--config",
        str(dep.config_path),
        "serve",
        "--http",
        "--port",
        str(port),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("LINGYI_LOG", "LINGYI_CONFIG")}
    proc = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        lines = _stderr_until(proc, "tokens:")
    finally:
        proc.terminate()
        stdout, _ = proc.communicate(timeout=TIMEOUT_S)
    text = "".join(lines)
    assert f"http://127.0.0.1:{port}/mcp" in text
    assert str(dep.config_path) in text and str(dep.log) in text
    assert "tokens: 2" in text  # desktop's token and flow's from its environment variable
    assert stdout == ""


def _stderr_until(proc: subprocess.Popen[str], marker: str) -> list[str]:
    """stderr lines up to the first holding ``marker`` (fails if the server exits first)."""
    lines: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError("the server exited before it said where it listens:\n" + "".join(lines))
