"""``lingyi serve`` through the warm process (lingyi._warm): the same server, started sooner.

Real processes, the real MCP client over stdio, real sockets: each server is ``python -m
lingyi serve`` started by the client, with the warm process switched on (``LINGYI_DAEMON=1``)
and a socket folder of this module's own. A session through the warm process is compared
with the same session against a fresh server (``LINGYI_DAEMON=0``): the tools listed, and
each call's decision and check codes. That a server really came from the warm process is
read from its call counter (``lingyi daemon status --json``). No timing is asserted.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters

from lingyi._warm import place
from lingyi.log import read_log
from tests.test_server_http import client, free_port
from tests.test_warm import World, _children, _gone, make_world

pytestmark = [
    pytest.mark.skipif(not place.supported(), reason="POSIX only (fork, SCM_RIGHTS)"),
    pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds children in /proc"),
]

TIMEOUT_S = 120
MEDICAL_ZH = {"member": "lingzhi", "query": "失眠吃什么药"}
MEDICAL_EN = {"member": "lingzhi", "query": "what dose of melatonin should I take for insomnia"}
# (tool, arguments, decision): what a session calls, approved, rejected and fallback, zh and en.
SESSION = [
    ("verify_assertion", {"member": "lingzhi", "type": "fact",
                          "content": "庄子的逍遥游讲的是自由"}, "approved"),
    ("verify_assertion", {"member": "lingzhi", "type": "fact",
                          "content": "Zhuangzi wrote about freedom"}, "approved"),
    ("verify_assertion", {"member": "lingyi", "type": "communication",
                          "content": "灵通说v0.16审计已经完成"}, "rejected"),
    ("verify_assertion", {"member": "lingyi", "type": "communication",
                          "content": "LingFlow told me the v0.16 audit is done"}, "rejected"),
    ("verify_assertion", {"member": "lingzhi", "type": "fact",
                          "content": "基于数据趋势，灵通下周一会上线"}, "fallback"),
    ("verify_assertion", {"member": "lingzhi", "type": "fact",
                          "content": "Based on the trend, LingFlow will ship on Monday"}, "fallback"),
    ("search_knowledge", MEDICAL_ZH, "rejected"),
    ("search_knowledge", MEDICAL_EN, "rejected"),
]  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    found = make_world(tmp_path_factory.mktemp("warm-serve"))
    yield found
    found.stop()


def _params(world: World, config: Path, *, warm: bool, **env: str) -> StdioServerParameters:
    environ = world.env(**env) if warm else world.env(LINGYI_DAEMON="0", **env)
    args = ["-m", "lingyi", "--config", str(config), "serve"]
    return StdioServerParameters(command=sys.executable, args=args, env=environ, cwd=world.root)


def _digest(result: Any) -> tuple[str, list[str]]:
    """A call's decision and its failed check codes: what must not depend on how it started."""
    data = result.structured_content or {}
    verdict = dict(data.get("verdict", data))
    failed = sorted(c["code"] for c in verdict.get("checks", []) if not c.get("passed", True))
    return str(verdict.get("decision")), failed


def session(params: StdioServerParameters) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The tool names a server lists, and each call of :data:`SESSION`'s decision and codes."""

    async def main() -> tuple[list[str], list[tuple[str, list[str]]]]:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(params) as client:
                tools = sorted(t.name for t in (await client.list_tools()).tools)
                calls = [await client.call_tool(name, args) for name, args, _ in SESSION]
        return tools, [_digest(c) for c in calls]

    return anyio.run(main)


def _serving(world: World) -> dict[str, Any]:
    """The warm process once it has the server's stack and a policy set warm (a readiness
    wait: the first serve starts it in the background)."""
    for _ in range(1200):
        running = world.current()
        if running is not None and "serve" in running["warm_stacks"] and running["warm_policies"]:
            return running
        time.sleep(0.1)
    raise AssertionError(f"no warm process with the server stack in {world.warm_dir}")


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_serve_through_the_warm_process_answers_as_a_fresh_one(
    world: World, language: str
) -> None:
    """The first serve runs in-process and starts the warm process with the server's modules;
    the next comes from it and lists the same tools and gives each call (approved, rejected,
    fallback, zh and en) the decision and the codes a fresh server gives; each is logged."""
    config = world.configs[language]
    fresh = session(_params(world, config, warm=False))
    assert [d for d, _ in fresh[1]] == [decision for _, _, decision in SESSION]
    first = session(_params(world, config, warm=True))
    calls = _serving(world)["calls"]
    warm = session(_params(world, config, warm=True))
    assert world.calls() == calls + 1  # this one came from the warm process
    assert first == fresh
    assert warm == fresh
    records = [r.record for r in read_log(world.log) if r.record is not None]
    assert len(records) >= 3 * len(SESSION)


def _new_child(pid: int, before: list[int]) -> int:
    """The child the warm process ``pid`` forks for the call just made (not one of
    ``before``, which may still be ending)."""
    for _ in range(600):
        if found := [c for c in _children(pid) if c not in before]:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no child was forked for the call")


def _raw_server(world: World, *, warm: bool, config: Path | None = None) -> subprocess.Popen[bytes]:
    """``lingyi serve`` on pipes that this test holds (stdin stays open), initialized."""
    environ = world.env() if warm else world.env(LINGYI_DAEMON="0")
    config = config or world.configs["zh"]
    server = subprocess.Popen(
        [sys.executable, "-m", "lingyi", "--config", str(config), "serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=environ, cwd=world.root,
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    server.stdin.write(json.dumps(hello).encode() + b"\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    assert answer["id"] == 1 and "result" in answer, answer
    return server


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_warm_server_ends_with_the_process_its_client_started(world: World, how: str) -> None:
    """SIGTERM to the process an MCP client started: the warm server it runs drains and
    exits 0, as a fresh one does; SIGKILL (nothing to forward): the server still ends,
    though its stdin is open, so no server outlives its client's process."""
    signum = getattr(signal, how)
    session(_params(world, world.configs["zh"], warm=True))  # a warm process, if none yet
    pid = _serving(world)["pid"]
    fresh = _raw_server(world, warm=False)
    before = _children(pid)
    warm = _raw_server(world, warm=True)
    try:
        child = _new_child(pid, before)
        time.sleep(0.5)  # the caller installs its forwarding once it has the child's pid
        fresh.send_signal(signum)
        warm.send_signal(signum)
        codes = fresh.wait(timeout=TIMEOUT_S), warm.wait(timeout=TIMEOUT_S)
        ended = _gone(child)
    finally:
        for server in (fresh, warm):
            server.kill()
            server.wait()
    assert codes == ((0, 0) if how == "SIGTERM" else (-signum, -signum))
    assert ended, f"the warm server {child} outlived the process its client started"


def test_a_config_that_says_warm_false_serves_in_process_and_stops_the_warm_process(
    world: World,
) -> None:
    """``[cli] warm = false``: a serve with no warm process up starts none; one served by a
    warm process (started by another config) answers as a fresh one and the warm process
    exits at once, while that server still runs."""
    other = World(world.root, world.root / "declined", world.policies, world.log, world.configs)
    other.warm_dir.mkdir(mode=0o700)
    cold = world.root / "cold.toml"
    cold.write_text(
        world.configs["zh"].read_text(encoding="utf-8") + "[cli]\nwarm = false\n", encoding="utf-8"
    )
    fresh = session(_params(other, cold, warm=False))
    try:
        assert session(_params(other, cold, warm=True)) == fresh
        time.sleep(1.0)  # a warm process started by mistake would have made its socket by now
        assert not any(p.suffix == ".sock" for p in other.warm_dir.iterdir())
        session(_params(other, other.configs["zh"], warm=True))
        calls = _serving(other)["calls"]
        assert session(_params(other, cold, warm=True)) == fresh
        assert other.calls() in (calls + 1, -1)  # served by it (and then it may be gone)
        session(_params(other, other.configs["zh"], warm=True))  # the next one starts
        pid = _serving(other)["pid"]
        server = _raw_server(other, warm=True, config=cold)  # served by it, and held open
        try:
            assert _gone(pid), "the warm process outlived a warm = false serve"
        finally:
            server.communicate(timeout=TIMEOUT_S)  # stdin closed: the server ends
        assert server.returncode == 0
    finally:
        other.stop()


def _waiting(pid: int) -> None:
    """Until ``pid`` sleeps and its CPU time stops growing (its imports are done and it
    waits for input): a readiness wait, not a timing assertion."""
    last = None
    for _ in range(600):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        used = (fields[0], int(fields[11]) + int(fields[12]))  # state, utime + stime
        if used == last and used[0] == "S":
            return
        last = used
        time.sleep(0.25)
    raise AssertionError(f"{pid} never settled waiting for input")


def test_ctrl_c_lets_the_warm_child_end_as_a_fresh_process_would(world: World) -> None:
    """Ctrl-C (SIGINT) to a caller whose verify waits for stdin in a warm child: the child
    gets it and ends as a fresh process does (exit 130, "interrupted" said once), and the
    caller waits for that instead of leaving the child behind."""
    pid = world.up()["pid"]
    outs = []
    for warm in (False, True):
        environ = world.env() if warm else world.env(LINGYI_DAEMON="0")
        before = _children(pid)
        caller = subprocess.Popen(
            [sys.executable, "-m", "lingyi", "--config", str(world.configs["en"]), "verify",
             "--member", "lingzhi", "--stdin"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=environ, cwd=world.root,
        )  # fmt: skip
        try:
            child = _new_child(pid, before) if warm else caller.pid
            _waiting(child)  # started, and blocked reading stdin
            caller.send_signal(signal.SIGINT)
            caller.wait(timeout=TIMEOUT_S)  # stdin stays open: a terminal's Ctrl-C closes nothing
            out, err = caller.communicate(timeout=TIMEOUT_S)
        finally:
            caller.kill()
        outs.append((caller.returncode, out, err.count("interrupted")))
        if warm:
            assert _gone(child)
    assert outs[1] == outs[0]
    assert outs[0][0] == 130


def test_the_warm_process_status_names_its_stacks(world: World) -> None:
    """``lingyi daemon status`` says which stacks a warm process keeps loaded: ``serve``
    once it has seen a serve, never before (a user who only verifies does not pay for it)."""
    other = World(world.root, world.root / "stacks", world.policies, world.log, world.configs)
    other.warm_dir.mkdir(mode=0o700)
    try:
        assert other.up()["warm_stacks"] == ["verify"]
        session(_params(other, other.configs["en"], warm=True))
        assert _serving(other)["warm_stacks"] == ["verify", "serve"]
        shown = other.lingyi("daemon", "status")
        assert "stacks warm: verify, serve" in shown.stdout
    finally:
        other.stop()


def _http_session(port: int) -> list[tuple[str, list[str]]]:
    """Each call of :data:`SESSION` over Streamable HTTP, once the server listens."""

    async def main() -> list[tuple[str, list[str]]]:
        with anyio.fail_after(TIMEOUT_S):
            while True:  # a readiness wait: the server binds its port as it starts
                try:
                    async with client(f"http://127.0.0.1:{port}/mcp", None) as session_:
                        calls = [await session_.call_tool(n, a) for n, a, _ in SESSION]
                        return [_digest(c) for c in calls]
                except* (OSError, httpx2.HTTPError):
                    await anyio.sleep(0.1)

    return anyio.run(main)


def test_a_warm_http_server_answers_as_a_fresh_one_and_stops_on_sigterm(world: World) -> None:
    """``serve --http`` from the warm process: the same decisions and codes as a fresh HTTP
    server; SIGTERM to its caller stops it as it stops a fresh one (the running calls
    answer first, then exit 0) and frees the port."""
    session(_params(world, world.configs["en"], warm=True))  # a warm process, if none yet
    calls = _serving(world)["calls"]
    seen, codes = [], []
    for warm in (False, True):
        port = free_port()
        environ = world.env() if warm else world.env(LINGYI_DAEMON="0")
        server = subprocess.Popen(
            [sys.executable, "-m", "lingyi", "--config", str(world.configs["en"]), "serve",
             "--http", "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=environ, cwd=world.root,
        )  # fmt: skip
        try:
            seen.append(_http_session(port))
            server.send_signal(signal.SIGTERM)
            codes.append(server.wait(timeout=TIMEOUT_S))
        finally:
            server.kill()
            server.wait()
        with socket.socket() as probe:  # nothing listens there any more (TIME_WAIT aside)
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
            probe.listen()
    assert world.calls() == calls + 1
    assert codes[1] == codes[0] == 0
    assert seen[1] == seen[0]
    assert [d for d, _ in seen[0]] == [decision for _, _, decision in SESSION]


def test_status_lists_the_servers_a_warm_process_runs(world: World) -> None:
    """``lingyi daemon status`` names the servers running from the warm process (command
    and pid; ``daemon stop`` leaves them running), and no longer once their client leaves."""
    session(_params(world, world.configs["zh"], warm=True))  # a warm process, if none yet
    pid = _serving(world)["pid"]
    before = _children(pid)
    server = _raw_server(world, warm=True)
    try:
        child = _new_child(pid, before)
        listed = [(c["command"], c["pid"]) for c in _serving(world)["children"]]
        shown = world.lingyi("daemon", "status").stdout
    finally:
        server.communicate(timeout=TIMEOUT_S)
    assert ("serve", child) in listed
    assert f"serve pid {child} since" in shown
    for _ in range(200):  # a readiness wait: the parent reads the child's pipe close
        if all(c["pid"] != child for c in _serving(world)["children"]):
            break
        time.sleep(0.05)
    assert all(c["pid"] != child for c in _serving(world)["children"])
