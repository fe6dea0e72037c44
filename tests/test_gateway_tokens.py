"""The gateway over Streamable HTTP with tokens: each member sees and calls only its tools.

The guard runs on a real uvicorn on loopback; ``mcp-server-git`` is its stdio upstream. A
token bound to 灵通 lists and calls ``git.*``; a token bound to other members neither sees
them nor gets a call through to the upstream (the repository is checked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.gateway_kit import git_deployment
from tests.test_server import Deployment, git
from tests.test_server_http import TOKENS, client, with_server


@pytest.fixture
def dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", "tok-flow-0123456789abcdef0123456789")
    return git_deployment(tmp_path / "deploy", TOKENS)


@pytest.mark.parametrize(
    ("token", "sees_git"),
    [
        ("tok-flow-0123456789abcdef0123456789", True),
        ("tok-desktop-0123456789abcdef0123456789", False),
    ],
)
def test_tools_list_follows_the_callers_token(dep: Deployment, token: str, sees_git: bool) -> None:
    """灵通's token lists git.git_commit; a token for 灵依 and 灵知 does not, nor 灵通's
    built-in tools; the guard's own tools are listed for both."""
    names: list[str] = []

    async def body(url: str) -> None:
        async with client(url, token) as c:
            names.extend(t.name for t in (await c.list_tools()).tools)

    with_server(dep, body)
    assert ("git.git_commit" in names) is sees_git
    assert ("git_commit" in names) is sees_git
    assert "verify_assertion" in names
    assert "git.git_reset" not in names


@pytest.mark.parametrize(
    ("token", "decision", "committed"),
    [
        ("tok-flow-0123456789abcdef0123456789", "approved", True),
        ("tok-desktop-0123456789abcdef0123456789", "rejected", False),
    ],
)
def test_a_commit_through_http_is_made_only_for_the_owners_token(
    dep: Deployment, token: str, decision: str, committed: bool
) -> None:
    """The same call: made for 灵通's token; refused (auth.member_bound) for another
    member's token, and the repository is untouched."""
    (dep.repo / "n.txt").write_text("n\n", encoding="utf-8")
    git(dep.repo, "add", "n.txt")
    before = git(dep.repo, "rev-parse", "HEAD")
    found: dict[str, Any] = {}

    async def body(url: str) -> None:
        async with client(url, token) as c:
            args = {"repo_path": str(dep.repo), "message": "via the gateway"}
            result = await c.call_tool("git.git_commit", args)
            found.update(result.structured_content or {})

    with_server(dep, body)
    assert found["verdict"]["decision"] == decision
    assert (git(dep.repo, "rev-parse", "HEAD") != before) is committed
    if not committed:
        assert "auth.member_bound" in found["verdict"]["codes"]
