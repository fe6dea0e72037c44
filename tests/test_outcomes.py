"""Calls the guard approved that did not run: an ``outcome`` record in the log's chain.

A call whose execution failed (an upstream that crashed, hung past its timeout, answered
garbage or an error; a built-in backend's BackendError) leaves, after its "approved"
verification, an ``outcome`` record (``status = "failed"``, the verification id, the tool,
the redacted error), so that ``lingyi log query``/``tail`` show that the tool never did it,
``lingyi log verify`` still passes and ``lingyi stats`` counts failed executions per tool,
the rollup and ``--full`` alike. A call that ran and returned writes no outcome.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lingyi.log import read_log, verify_chain
from lingyi.models import Decision, VerificationResult
from lingyi.pipeline import Call, Caller
from lingyi.server import GuardApp
from tests.gateway_kit import FAKE_POLICIES, fake_upstream, git_deployment
from tests.test_approvals import SECRET, cli, subprocess_lingyi
from tests.test_server import Deployment, deploy, with_client

# tool → the words its outcome's error holds, or None: it ran, no outcome (must pass).
CALLS: list[tuple[str, dict[str, Any], str | None]] = [
    ("fake.crash", {}, "upstream 'fake' failed"),
    ("fake.fail", {}, "fake.fail failed upstream"),
    ("fake.hang", {}, "did not answer within 3s"),
    ("fake.garbage", {}, "did not answer within 3s"),
    ("fake.echo", {"text": "还在 still here"}, None),
]


def records(dep: Deployment, kind: str) -> list[dict[str, Any]]:
    return [r for line in read_log(dep.log) if (r := line.record) and r.get("kind") == kind]


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    """One deployment that made every call of CALLS once, in order."""
    root = tmp_path_factory.mktemp("outcomes") / "deploy"
    dep = git_deployment(root, fake_upstream(timeout_s=3), FAKE_POLICIES)

    async def body(client: Client) -> None:
        for tool, args, _ in CALLS:
            await client.call_tool(tool, args)

    with_client(dep, body)
    return dep


@pytest.mark.parametrize(("tool", "args", "says"), CALLS)
def test_a_failed_execution_follows_its_approval_in_the_log(
    failed: Deployment, tool: str, args: dict[str, Any], says: str | None
) -> None:
    """Each failed call: its verification says approved, and an outcome record after it
    (same verification id, tool, member, session) says failed and why. A call that ran
    (fake.echo) has no outcome."""
    verification = next(
        r for r in records(failed, "verification") if (r["tool_call"] or {}).get("name") == tool
    )
    assert verification["decision"] == "approved"
    outcomes = [r for r in records(failed, "outcome") if r["tool"] == tool]
    if says is None:
        assert outcomes == []
        return
    (outcome,) = outcomes
    assert outcome["verification_id"] == verification["id"]
    assert outcome["status"] == "failed" and says in outcome["error"]
    assert outcome["member"] == verification["member"] == "lingflow"
    assert outcome["session"] == verification["session"]
    assert outcome["seq"] > verification["seq"]


def test_outcomes_keep_the_chain_and_are_counted_per_tool_by_stats(failed: Deployment) -> None:
    """`lingyi log verify` passes (in process and as a command); stats count failed calls per
    tool, the rollup and --full alike, and --member filters them; no unknown kinds."""
    assert verify_chain(failed.log).ok
    assert subprocess_lingyi(failed, "log", "verify").returncode == 0
    config = ["--config", str(failed.config_path)]
    want = {
        tool: {"failed": 1, "held": 0, "refused": 0} for tool, _, says in CALLS if says is not None
    }
    for extra in ([], ["--full"], ["--member", "lingflow"], ["--member", "lingflow", "--full"]):
        code, text = cli(*config, "stats", "--json", *extra)
        figures = json.loads(text)
        assert code == 0 and figures["outcomes"] == want, extra
        assert figures["integrity"]["other_kinds"] == {}
        assert figures["by_tool"]["fake.crash"]["approved"] == 1  # the decision is unchanged
    code, text = cli(*config, "stats", "--json", "--member", "lingzhi")
    assert json.loads(text)["outcomes"] == {}
    code, text = cli(*config, "stats")
    assert "Calls approved that did not run, per tool" in text and "fake.garbage" in text


@pytest.mark.parametrize(
    ("args", "count", "shows"),
    [
        (["log", "tail", "--kind", "outcome"], 4, "OUTCOME   FAILED    lingflow · fake.crash"),
        (["log", "query", "--kind", "outcome", "--tool", "fake.h*"], 1, "fake.hang"),
        (["log", "query", "--kind", "outcome", "--text", "within 3s"], 2, "fake.garbage"),
        (["log", "query", "--kind", "outcome", "--member", "lingflow"], 4, "fake.fail"),
        (["log", "query", "--kind", "outcome", "--tool", "fake.echo"], 0, ""),
        (["log", "query", "--kind", "outcome", "--member", "lingzhi"], 0, ""),
    ],
)
def test_log_tail_and_query_show_outcomes(
    failed: Deployment, args: list[str], count: int, shows: str
) -> None:
    """A reviewer finds the failed calls with the usual filters (tool glob, text, member);
    filters that match none find none."""
    config = ["--config", str(failed.config_path)]
    code, text = cli(*config, *args, "--json")
    assert code == 0 and len(text.splitlines()) == count
    code, text = cli(*config, *args)
    assert shows in text


def test_a_built_in_backend_failure_is_an_outcome_too(tmp_path: Path) -> None:
    """git_commit with nothing staged: approved, the backend refuses, an outcome says so;
    a commit that is made (must pass) leaves no outcome."""
    dep = deploy(tmp_path / "deploy")
    (dep.repo / "n.txt").write_text("n\n", encoding="utf-8")

    async def body(client: Client) -> None:
        empty = {"repo_path": "council-app", "message": "empty commit", "paths": ["README.md"]}
        await client.call_tool("git_commit", empty)
        made = {"repo_path": "council-app", "message": "add n.txt", "paths": ["n.txt"]}
        assert not (await client.call_tool("git_commit", made)).is_error

    with_client(dep, body)
    (outcome,) = records(dep, "outcome")
    assert outcome["tool"] == "git_commit" and "nothing to commit" in outcome["error"]
    approved = [r["id"] for r in records(dep, "verification") if r["decision"] == "approved"]
    assert outcome["verification_id"] == approved[0] and len(approved) == 2


def _no_work(owner: Any, args: Any) -> Any:
    raise AssertionError("not run")


@pytest.mark.parametrize(
    "error",
    [
        f"上游拒绝了令牌 {SECRET}",
        f"upstream refused the token {SECRET}",
    ],
)
def test_an_outcomes_error_is_redacted(tmp_path: Path, error: str) -> None:
    """A backend error that quotes a secret (Chinese or English) is logged redacted; the rest
    of the error is kept."""
    dep = deploy(tmp_path / "deploy")
    app = GuardApp(dep.config())
    try:
        result = VerificationResult(id="v1", decision=Decision.APPROVED, reason="", checks=[])
        owner = app.policies.members["lingflow"]
        call = Call(Caller("s1"), "git.git_log", {}, _no_work, app.policies, owner, result=result)
        app.pipeline.audit(call, "failed", error=error)
    finally:
        app.close()
    (outcome,) = records(dep, "outcome")
    assert SECRET not in dep.log.read_text(encoding="utf-8")
    assert error.split()[0] in outcome["error"] and outcome["verification_id"] == "v1"
    assert verify_chain(dep.log).ok
