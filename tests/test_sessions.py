"""Every MCP client connection is its own session, over HTTP too, and the ledger is bounded.

The attacks: all anonymous (or same-token) stateless HTTP clients shared one ledger session, so
one conversation's search backed another's assertion; sessions a client closed were kept
forever; the ledger grew by about 4 MB per 1,000 calls. Now a stateless request is a session of
its own, a stateful HTTP session or a stdio/in-process connection is dropped when it ends, a
client shares only by asking (``Lingyi-Session``, scoped to its token), and the ledger keeps
what its limits allow, counting what it forgets. Real uvicorn on loopback, the real MCP client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from lingyi.ledger import Ledger, LedgerLimits
from lingyi.models import Evidence
from lingyi.server import GuardApp, build_server
from tests.test_server import Deployment, deploy, verdict
from tests.test_server_http import TIMEOUT_S, TOKENS, running

FACT = {"member": "lingzhi", "type": "fact", "content": "调息是气功的核心"}


@pytest.fixture
def dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", "tok-flow-0123456789abcdef0123456789")
    laptop = '\n[[server.tokens]]\nname = "laptop"\ntoken = "tok-laptop-0123456789abcdef0123456789"\nmembers = ["lingzhi"]\n'
    return deploy(tmp_path / "deploy", TOKENS + laptop)


def http_client(url: str, token: str, mode: str = "auto", share: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} | ({"Lingyi-Session": share} if share else {})
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode)


async def _search(client: Client) -> str:
    hits = (await client.call_tool("search_knowledge", {"query": "气功"})).structured_content
    return str(hits["result"]["hits"][0]["id"])  # type: ignore[index]


async def _cite(client: Client, evidence_id: str) -> str:
    """The decision on a fact citing ``evidence_id``; a rejection must be for that evidence."""
    cited = FACT | {"evidence_ids": [evidence_id]}
    found = verdict(await client.call_tool("verify_assertion", cited))
    assert found["decision"] == "approved" or found["codes"] == ["evidence.cited_ids_exist"]
    return str(found["decision"])


# (first client, second client, the second's decision citing the first's evidence)
SHARING = [
    # two stateless clients of one token: once one session, now two
    (
        ("tok-desktop-0123456789abcdef0123456789", "auto", None),
        ("tok-desktop-0123456789abcdef0123456789", "auto", None),
        "rejected",
    ),
    # asked to share, same token: shared on purpose
    (
        ("tok-desktop-0123456789abcdef0123456789", "auto", "conv-1"),
        ("tok-desktop-0123456789abcdef0123456789", "auto", "conv-1"),
        "approved",
    ),
    # the same name under another token (one that may speak for 灵知 too) is another session
    (
        ("tok-desktop-0123456789abcdef0123456789", "auto", "conv-1"),
        ("tok-laptop-0123456789abcdef0123456789", "auto", "conv-1"),
        "rejected",
    ),
    # a stateful client asking to share with a stateless one
    (
        ("tok-desktop-0123456789abcdef0123456789", "legacy", "conv-2"),
        ("tok-desktop-0123456789abcdef0123456789", "auto", "conv-2"),
        "approved",
    ),
]


@pytest.mark.parametrize(("first", "second", "decision"), SHARING)
def test_http_clients_share_evidence_only_when_they_ask(
    dep: Deployment, first: tuple[str, str, str | None], second: tuple[str, str, str | None],
    decision: str,
) -> None:  # fmt: skip
    """A second HTTP client cites what the first one's search returned: approved only when
    both asked for the same session under the same token."""
    found: list[str] = []

    async def body(url: str) -> None:
        async with http_client(url, *first) as a:
            evidence = await _search(a)
        async with http_client(url, *second) as b:
            found.append(await _cite(b, evidence))

    _serve(dep, body)
    assert found == [decision]


def test_a_stateless_request_is_its_own_session(dep: Deployment) -> None:
    """Stateless (2026-07-28) requests share nothing, even from one client; a stateful client's
    requests share its session."""
    found: list[str] = []

    async def body(url: str) -> None:
        for mode in ("auto", "legacy"):
            async with http_client(url, "tok-desktop-0123456789abcdef0123456789", mode) as client:
                found.append(await _cite(client, await _search(client)))

    _serve(dep, body)
    assert found == ["rejected", "approved"]


def _serve(dep: Deployment, body: Any) -> None:
    async def main() -> None:
        async with running(dep) as url:
            with anyio.fail_after(TIMEOUT_S):
                await body(url)

    anyio.run(main)


def _ledger_stats(result: Any) -> dict[str, Any]:
    return dict(result.structured_content["ledger"])


def test_an_ended_http_session_is_dropped_and_counted(dep: Deployment) -> None:
    """A stateful client that closes (DELETE) takes its evidence with it; the stats say so.
    A stateless request's session is gone once it is answered."""
    stats: list[dict[str, Any]] = []

    async def body(url: str) -> None:
        async with http_client(url, "tok-desktop-0123456789abcdef0123456789", "legacy") as a:
            await _search(a)
            stats.append(_ledger_stats(await a.call_tool("verification_stats", {})))
        async with http_client(url, "tok-desktop-0123456789abcdef0123456789") as b:
            await _search(b)
            stats.append(_ledger_stats(await b.call_tool("verification_stats", {})))

    _serve(dep, body)
    assert stats[0]["sessions"] == 1
    assert stats[1]["sessions"] == 0  # a's ended; b's search was a request of its own
    assert stats[1]["sessions_dropped"]["ended"] == 1
    assert stats[1]["sessions_dropped"]["request"] >= 1


def test_an_ended_connection_is_dropped(tmp_path: Path) -> None:
    """In-process (and stdio) connections: each its own session, dropped when it closes."""
    dep = deploy(tmp_path / "deploy")
    held: list[dict[str, Any]] = []

    async def main() -> None:
        app = GuardApp(dep.config())
        server = build_server(app)
        try:
            for _ in range(3):
                async with Client(server) as client:
                    await _search(client)
                    held.append(app.ledger.stats())
            held.append(app.ledger.stats())
        finally:
            app.close()

    anyio.run(main)
    assert [h["sessions"] for h in held] == [1, 1, 1, 0]
    assert held[-1]["sessions_dropped"]["ended"] == 3


# --- the bounded ledger ---------------------------------------------------------------------


class Clock:
    """A clock the test moves (ages and idle times without sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(ledger: Ledger, session: str, i: int) -> None:
    evidence = [Evidence(id=f"kb:{i}-{k}", title="t", snippet="s" * 200) for k in range(5)]
    ledger.record(session, "lingzhi", "search_knowledge", {"query": str(i)}, evidence)


CALLS = 20_000


def test_one_session_stays_bounded_over_20000_calls() -> None:
    """20,000 tool results in one session: the newest ``max_entries`` are kept (the latest
    evidence still verifies, the oldest does not), the rest counted as forgotten."""
    ledger = Ledger(LedgerLimits(max_entries=1000))
    for i in range(CALLS):
        _record(ledger, "s", i)
        assert len(ledger.session("s").entries) <= 1000
    assert ledger.session("s").has(f"kb:{CALLS - 1}-4") and not ledger.session("s").has("kb:0-0")
    stats = ledger.stats()
    assert stats["entries"] + stats["entries_forgotten"]["max_entries"] == CALLS


def test_many_sessions_stay_bounded_over_20000_calls() -> None:
    """20,000 calls from 20,000 clients that never say goodbye: ``max_sessions`` bounds them,
    the least recently used going first; ``idle_s`` drops the rest once they are idle."""
    clock = Clock()
    ledger = Ledger(LedgerLimits(max_sessions=500, idle_s=60), clock=clock)
    for i in range(CALLS):
        _record(ledger, f"c{i}", i)
        clock.now += 0.001
        assert ledger.stats()["sessions"] <= 500 if i % 1000 == 0 else True
    assert (
        ledger.stats()["sessions"] == 500 and ledger.stats()["sessions_dropped"]["full"] == 19_500
    )
    clock.now += 61
    assert ledger.sweep() == 500 and ledger.stats()["sessions"] == 0


def test_evidence_older_than_max_age_no_longer_verifies() -> None:
    """A tool result older than ``max_age_s`` is forgotten when its session is next read."""
    clock = Clock()
    ledger = Ledger(LedgerLimits(max_age_s=60), clock=clock)
    _record(ledger, "s", 1)
    clock.now += 30
    _record(ledger, "s", 2)
    assert ledger.session("s").has("kb:1-0")
    clock.now += 31
    assert not ledger.session("s").has("kb:1-0") and ledger.session("s").has("kb:2-0")
    assert ledger.stats()["entries_forgotten"]["max_age"] == 1


def test_a_used_session_is_not_idle() -> None:
    """Reading a session (a verification) counts as use: only sessions nobody used are dropped."""
    clock = Clock()
    ledger = Ledger(LedgerLimits(idle_s=60), clock=clock)
    _record(ledger, "busy", 1)
    _record(ledger, "quiet", 2)
    clock.now += 50
    ledger.session("busy")
    clock.now += 20
    assert ledger.sweep() == 1 and ledger.session("busy").has("kb:1-0")
    assert not ledger.session("quiet").entries


def test_an_unbounded_ledger_keeps_everything() -> None:
    """Replay and the CLI use a ledger without limits: a transcript's evidence all stays."""
    ledger = Ledger()
    for i in range(3000):
        _record(ledger, "s", i)
    assert len(ledger.session("s").entries) == 3000 and ledger.sweep() == 0


def test_the_server_ledger_follows_the_config(tmp_path: Path) -> None:
    """[ledger] in the config bounds the server's ledger through its own runtime: 600 guarded
    searches in one session keep at most max_entries of them."""
    from lingyi.server.app import Caller
    from lingyi.server.executors import IMPLEMENTATIONS

    dep = deploy(tmp_path / "deploy", "\n[ledger]\nmax_entries = 50\nmax_sessions = 3\n")
    app = GuardApp(dep.config())
    search = IMPLEMENTATIONS["search_knowledge"].execute
    try:
        for i in range(600):
            app.run_tool(Caller(f"s{i % 5}"), "search_knowledge", {"query": "气功"}, search)
        stats = app.ledger.stats()
    finally:
        app.close()
    assert stats["limits"]["max_entries"] == 50 and stats["sessions"] <= 3
    assert stats["entries"] <= 3 * 50
