"""The gateway with the official git MCP server (``mcp-server-git``) as a real stdio upstream.

Its tools are served as ``git.<tool>`` for 灵通 only, guarded like built-in tools: a commit
inside the roots is approved and really made; outside the roots, or by a member that does not
own the tool, it is rejected and never reaches the upstream; a SHA ``git_log`` returned is
evidence a later assertion may cite, a made-up one is not.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lingyi.server import GuardApp
from tests.gateway_kit import git_deployment
from tests.test_server import Deployment, git, verdict, with_client


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return git_deployment(tmp_path / "deploy")


def stage(repo: Path, name: str, text: str = "hello\n") -> None:
    (repo / name).write_text(text, encoding="utf-8")
    git(repo, "add", name)


def outside_repo(tmp_path: Path) -> Path:
    """A real repository outside the repo roots, with a staged change."""
    repo = tmp_path / "elsewhere"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    stage(repo, "x.txt")
    return repo


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    return {"error": result.is_error, **(result.structured_content or {})}


def test_upstream_tools_are_listed_under_the_prefix_only_when_a_policy_owns_them(
    dep: Deployment,
) -> None:
    """git.git_commit (owned by 灵通) is listed; git.git_reset (no policy) is not served."""
    names: list[str] = []

    async def body(client: Client) -> None:
        names.extend(t.name for t in (await client.list_tools()).tools)

    with_client(dep, body)
    assert {"git.git_commit", "git.git_log", "git.git_add", "git.git_status"} <= set(names)
    assert not {"git.git_reset", "git.git_checkout", "git_reset"} & set(names)
    assert "git_commit" in names  # the built-in tools are still there


def test_the_listed_schema_merges_the_policy_with_the_upstreams_own(dep: Deployment) -> None:
    """The policy's constraints (message length) and the upstream's arguments are one schema."""
    schemas: dict[str, Any] = {}

    async def body(client: Client) -> None:
        schemas.update({t.name: t.input_schema for t in (await client.list_tools()).tools})

    with_client(dep, body)
    commit = schemas["git.git_commit"]
    assert commit["properties"]["message"]["minLength"] == 3
    assert set(commit["required"]) == {"repo_path", "message"}
    assert commit["additionalProperties"] is False
    add = schemas["git.git_add"]  # files: not in the policy, kept as the upstream declares it
    assert add["properties"]["files"]["type"] == "array"


def test_a_commit_inside_the_roots_is_approved_and_really_made(dep: Deployment) -> None:
    """git.git_add then git.git_commit through the guard: the repository has the commit."""
    before = head(dep.repo)
    stage(dep.repo, "notes.txt")
    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        found.update(
            await call(client, "git.git_commit", repo_path=str(dep.repo), message="记录笔记 notes")
        )

    with_client(dep, body)
    assert found["error"] is False and found["verdict"]["decision"] == "approved"
    assert head(dep.repo) != before
    assert git(dep.repo, "log", "-1", "--format=%s") == "记录笔记 notes"


@pytest.mark.parametrize(
    ("where", "message", "code"),
    [
        ("outside", "commit outside the roots", "tool.path_allowed"),
        ("inside", "no", "tool.args_schema"),  # the policy's min_length
        ("inside-extra", "an unknown argument", "tool.args_schema"),
    ],
)
def test_refused_commits_never_reach_the_upstream(
    dep: Deployment, tmp_path: Path, where: str, message: str, code: str
) -> None:
    """Outside the roots, or breaking the policy's constraints: rejected, nothing committed,
    the upstream never called."""
    elsewhere = outside_repo(tmp_path)
    stage(dep.repo, "staged.txt")
    heads = (head(elsewhere), head(dep.repo))
    repo = elsewhere if where == "outside" else dep.repo
    args: dict[str, Any] = {"repo_path": str(repo), "message": message}
    if where == "inside-extra":
        args["amend"] = True
    found: dict[str, Any] = {}
    app = GuardApp(dep.config())
    calls: list[int] = []

    async def body(client: Client) -> None:
        found.update(await call(client, "git.git_commit", **args))

    _with_app(app, body)
    assert app.gateway is not None
    calls.append(app.gateway.connections["git"].calls)
    assert found["error"] is True and code in found["verdict"]["codes"]
    assert calls == [0]
    assert (head(elsewhere), head(dep.repo)) == heads


def _with_app(app: GuardApp, body: Any) -> None:
    import anyio

    from lingyi.server import build_server

    async def main() -> None:
        try:
            async with Client(build_server(app)) as client:
                with anyio.fail_after(60):
                    await body(client)
        finally:
            app.close()

    anyio.run(main)


@pytest.mark.parametrize("member", ["lingzhi", "灵依", "lingflow"])
def test_only_the_owner_may_assert_an_upstream_tool_call(dep: Deployment, member: str) -> None:
    """verify_assertion of git.git_commit by a member that does not own it is rejected
    (tool.owned); by 灵通 it is judged on its arguments."""
    found: dict[str, Any] = {}
    stage(dep.repo, "a.txt")

    async def body(client: Client) -> None:
        args = {"repo_path": str(dep.repo), "message": "verified commit"}
        result = await client.call_tool(
            "verify_assertion",
            {"member": member, "type": "action", "content": "提交", "tool_name": "git.git_commit",
             "tool_arguments": args},
        )  # fmt: skip
        found.update(verdict(result))

    with_client(dep, body)
    if member == "lingflow":
        assert "tool.owned" not in found.get("codes", [])
    else:
        assert found["decision"] == "rejected" and "tool.owned" in found["codes"]


def test_a_sha_git_log_returned_is_evidence_a_made_up_one_is_not(dep: Deployment) -> None:
    """After git.git_log, citing a SHA it listed is approved; a fabricated one is rejected."""
    real = head(dep.repo)
    fake = "0123456789abcdef0123456789abcdef01234567"
    decisions: dict[str, str] = {}

    async def body(client: Client) -> None:
        logged = await call(client, "git.git_log", repo_path=str(dep.repo), max_count=5)
        assert logged["error"] is False, logged
        for label, sha in (("real", real), ("fake", fake)):
            result = await client.call_tool(
                "verify_assertion",
                {"member": "lingflow", "type": "fact", "content": f"最新提交是 {sha[:12]}",
                 "evidence_ids": [sha]},
            )  # fmt: skip
            decisions[label] = verdict(result)["decision"]

    with_client(dep, body)
    assert decisions == {"real": "approved", "fake": "rejected"}


def test_the_git_server_is_installed_by_the_projects_own_files() -> None:
    """mcp-server-git is pinned in requirements.lock and a dev dependency in pyproject.toml."""
    root = Path(__file__).resolve().parents[1]
    assert "mcp-server-git==" in (root / "requirements.lock").read_text(encoding="utf-8")
    assert "mcp-server-git" in (root / "pyproject.toml").read_text(encoding="utf-8")
    done = subprocess.run(
        [str(root / ".venv/bin/python"), "-c", "import mcp_server_git"], capture_output=True
    )
    assert done.returncode == 0


def test_policy_check_reports_upstream_tools_no_policy_mentions(dep: Deployment) -> None:
    """``lingyi policy check`` lists git.git_reset (listed upstream, no policy: not served)
    and passes; git.git_commit, owned by 灵通, is not reported."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [str(root / ".venv/bin/lingyi"), "--config", str(dep.config_path), "policy", "check",
         "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout)["upstreams"]
    assert any(n.startswith("git.git_reset:") for n in notes)
    assert not any(n.startswith("git.git_commit") for n in notes)


def test_a_tool_owned_by_a_member_the_upstream_does_not_allow_is_not_served(
    tmp_path: Path,
) -> None:
    """The git upstream allows only 灵知, but 灵通's policy owns git.git_commit: not listed,
    and a call is judged for 灵通 and rejected by tool.owned saying why (its owner is not one
    of the upstream's members), logged, and never reaches the upstream."""
    dep = git_deployment(tmp_path / "deploy")
    text = dep.config_path.read_text(encoding="utf-8")
    dep.config_path.write_text(text.replace('members = ["lingflow"]\ntimeout_s = 20', 'members = ["lingzhi"]\ntimeout_s = 20'), encoding="utf-8")  # fmt: skip
    stage(dep.repo, "n.txt")
    before = head(dep.repo)
    seen: dict[str, Any] = {}
    app = GuardApp(dep.config())

    async def body(client: Client) -> None:
        seen["names"] = {t.name for t in (await client.list_tools()).tools}
        seen["call"] = await call(client, "git.git_commit", repo_path=str(dep.repo), message="nope")

    _with_app(app, body)
    assert "git.git_commit" not in seen["names"]
    verdict = seen["call"]["verdict"]
    assert seen["call"]["error"] is True and verdict["codes"] == ["tool.owned"]
    assert verdict["member"] == "lingflow" and "不在其上游允许的成员之列" in verdict["reason"]
    assert app.gateway is not None and app.gateway.connections["git"].calls == 0
    assert head(dep.repo) == before


def test_a_stdio_guard_with_upstreams_keeps_stdout_protocol_only(dep: Deployment) -> None:
    """``lingyi serve`` connects its upstreams at start-up: what it logs about them goes to
    stderr, and stdout (the MCP protocol) stays empty when no client speaks."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [str(root / ".venv/bin/lingyi"), "--verbose", "--config", str(dep.config_path), "serve"],
        input="", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout == ""
    assert "upstream.listed" in done.stderr
