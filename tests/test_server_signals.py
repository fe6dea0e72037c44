"""Ctrl-C or SIGTERM during a call: the call finishes, is logged once, and its reply reaches
the client before the server exits (issue 24, item 14), over stdio and over HTTP.

A real ``lingyi serve`` subprocess, the real MCP client, and a trace backend on loopback whose
search answers only when the test lets it: the call is in flight when the signal arrives.
A model that never gets the reply of a call that ran may retry it (a commit twice).
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from lingyi.log import read_log
from tests.loopback import serving
from tests.test_server import TIMEOUT_S, Deployment, _gone, _server_pid, deploy, verdict
from tests.test_server_http import free_port

TRACE = "aa11bb22cc33dd44ee55ff6600778899"


class SlowTempo:
    """A trace search that waits until ``release`` is set; ``reached``: a search arrived."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        tempo = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                tempo.reached.set()
                tempo.release.wait(TIMEOUT_S)
                found = {"traceID": TRACE, "rootServiceName": "checkout", "durationMs": 5}
                body = json.dumps({"traces": [found]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@contextmanager
def slow_deployment(tmp_path: Path) -> Iterator[tuple[Deployment, SlowTempo]]:
    tempo = SlowTempo()
    with serving(tempo.handler()) as url:
        yield deploy(tmp_path / "deploy", f'\n[traces]\nbase_url = "{url}"\n'), tempo
        tempo.release.set()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    return env | {"LINGYI_DAEMON": "0"}


async def _signal_mid_call(
    client: Client, tempo: SlowTempo, pid: int, signum: int
) -> CallToolResult:
    """Call query_traces; while its search waits, send ``signum``, then let the search end."""
    out: list[CallToolResult] = []

    async def call() -> None:
        out.append(await client.call_tool("query_traces", {"service": "checkout"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.to_thread.run_sync(tempo.reached.wait, TIMEOUT_S)
        os.kill(pid, signum)
        await anyio.sleep(0.3)  # the server has the signal while the call still waits
        tempo.release.set()
    return out[0]


def _listening(port: int) -> None:
    """Returns once the server accepts connections on ``port``."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def _traces_logged(dep: Deployment) -> list[dict[str, Any]]:
    records = [line.record for line in read_log(dep.log) if line.record]
    return [r for r in records if (r.get("tool_call") or {}).get("name") == "query_traces"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stdio_call_in_flight_at_a_signal_gets_its_reply(tmp_path: Path, signum: int) -> None:
    """stdio: the call in flight when the signal arrives returns its result (the trace it
    found), is logged once, and the server then exits 0."""
    got: list[CallToolResult] = []
    with slow_deployment(tmp_path) as (dep, tempo):
        args = ["-m", "lingyi", "--config", str(dep.config_path), "serve"]
        params = StdioServerParameters(command=sys.executable, args=args, env=_env())

        async def main() -> None:
            with anyio.fail_after(TIMEOUT_S):
                async with Client(params) as client:
                    pid = _server_pid(dep.config_path)
                    got.append(await _signal_mid_call(client, tempo, pid, signum))
                    while not _gone(pid):
                        await anyio.sleep(0.05)

        anyio.run(main)
    assert verdict(got[0])["decision"] == "approved" and not got[0].is_error
    assert [t["trace_id"] for t in (got[0].structured_content or {})["result"]["traces"]] == [TRACE]
    assert len(_traces_logged(dep)) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_http_call_in_flight_at_a_signal_gets_its_reply_and_exits_0(
    tmp_path: Path, signum: int
) -> None:
    """`serve --http`: the call in flight gets its reply, is logged once, and the server
    exits 0 (Ctrl-C too, as the README says; it was 130)."""
    got: list[CallToolResult] = []
    with slow_deployment(tmp_path) as (dep, tempo):
        port = free_port()
        args = ["--config", str(dep.config_path), "serve", "--http", "--port", str(port)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "lingyi", *args], stderr=subprocess.PIPE, env=_env(), text=True
        )
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # it says where it listens once it is about to
                if "tokens:" in line:
                    break

            _listening(port)

            async def main() -> None:
                with anyio.fail_after(TIMEOUT_S):
                    url = f"http://127.0.0.1:{port}/mcp"
                    async with Client(streamable_http_client(url)) as client:
                        got.append(await _signal_mid_call(client, tempo, proc.pid, signum))

            anyio.run(main)
            code = proc.wait(TIMEOUT_S)
        finally:
            proc.kill()
            proc.communicate(timeout=TIMEOUT_S)
    assert verdict(got[0])["decision"] == "approved" and not got[0].is_error
    assert len(_traces_logged(dep)) == 1
    assert code == 0
