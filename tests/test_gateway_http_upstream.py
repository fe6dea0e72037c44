"""A second upstream over Streamable HTTP: the test upstream started by the test on loopback.

Its tools are served and guarded like the stdio upstream's; the URLs its results hold are
evidence; when it goes away, calls fail clearly and the guard keeps serving.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.gateway_kit import FAKE_POLICIES, SERVER, fake_upstream, git_deployment
from tests.test_server import Deployment, verdict, with_client
from tests.test_server_http import free_port


@pytest.fixture
def upstream() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test upstream serving Streamable HTTP on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def dep(tmp_path: Path, upstream: tuple[str, Any]) -> Deployment:
    extra = fake_upstream("http", url=upstream[0], timeout_s=10)
    return git_deployment(tmp_path / "deploy", extra, FAKE_POLICIES)


def test_an_http_upstreams_tools_are_served_guarded_and_evidenced(dep: Deployment) -> None:
    """fake.echo over HTTP is approved and answered; a URL it returned may be cited, one it
    did not return may not; an argument the policy bounds (max_length) is refused unsent."""
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        echoed = await client.call_tool("fake.echo", {"text": "见 https://kb.example.org/a-1"})
        seen["echo"] = echoed.structured_content
        seen["long"] = verdict(await client.call_tool("fake.echo", {"text": "x" * 1001}))
        for url in ("https://kb.example.org/a-1", "https://kb.example.org/made-up"):
            args = {"member": "lingflow", "type": "fact", "content": f"资料见 {url}",
                    "evidence_ids": [url]}  # fmt: skip
            seen[url] = verdict(await client.call_tool("verify_assertion", args))["decision"]

    with_client(dep, body)
    assert seen["echo"]["verdict"]["decision"] == "approved"
    assert seen["echo"]["result"]["content"] == ["见 https://kb.example.org/a-1"]
    assert seen["long"]["decision"] == "rejected" and "tool.args_schema" in seen["long"]["codes"]
    assert seen["https://kb.example.org/a-1"] == "approved"
    assert seen["https://kb.example.org/made-up"] == "rejected"


def test_an_http_upstream_that_goes_away_fails_calls_clearly(
    dep: Deployment, upstream: tuple[str, subprocess.Popen[bytes]]
) -> None:
    """The upstream process is killed between two calls: the second is an error result naming
    the upstream; the guard's built-in tools still answer."""
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        seen["first"] = (await client.call_tool("fake.echo", {"text": "one"})).is_error
        upstream[1].kill()
        upstream[1].wait()
        gone = await client.call_tool("fake.echo", {"text": "two"})
        seen["gone"] = (gone.is_error, verdict(gone).get("error") or "")
        seen["kb"] = (await client.call_tool("search_knowledge", {"query": "气功"})).is_error

    with_client(dep, body)
    assert seen["first"] is False
    assert seen["gone"][0] is True and "fake" in seen["gone"][1]
    assert seen["kb"] is False
