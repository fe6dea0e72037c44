"""No approval by the one who asked (issue 24, item 6).

Over Streamable HTTP on loopback, with the real MCP client and a real repository: with
``[approvals] approvers`` set, the client whose token made a held ``git_commit`` is never
asked through elicitation (modern and legacy protocol alike), an answer it sends anyway
approves nothing (``approval.self_approval``, the reply naming who decides), and only an
approver's ``approve_call`` lets the same call commit. Without approvers the requesting
client is asked, as before: that is self-approval, and ``config show`` says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from lingyi.cli import main
from tests.test_approvals import (
    APPROVER_TOKENS,
    approval_deployment,
    approvals_in,
    commit_args,
    stage,
)
from tests.test_server import git
from tests.test_server_http import TOKENS, client, with_server

FLOW = "tok-flow-0123456789abcdef0123456789"
OPS = "tok-ops-0123456789abcdef0123456789"
KEY = "lingyi-approval"  # lingyi.approvals._elicit.KEY: the question's key in input_responses


async def call(mcp: Any, tool: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    result = await mcp.call_tool(tool, args, **extra)
    data = dict(result.structured_content or {})
    return {**data.get("verdict", data), "is_error": result.is_error}


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_requesting_client_is_never_asked_when_approvers_are_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lang: str, mode: str
) -> None:
    """灵通's client would accept at once; it is not asked: pending, nothing committed, the
    hint names lingyi approve and approve_call; then ops approves and the call commits."""
    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", FLOW)
    dep = approval_deployment(tmp_path / "d", lang, TOKENS + APPROVER_TOKENS)
    head = stage(dep)
    asked: list[str] = []
    out: dict[str, Any] = {}

    async def accept(_ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": True})

    async def body(url: str) -> None:
        async with client(url, FLOW, mode, elicitation_callback=accept) as flow:
            out["held"] = await call(flow, "git_commit", commit_args(dep))
            out["head"] = git(dep.repo, "rev-parse", "HEAD")
            async with client(url, OPS) as ops:
                ident = {"id": out["held"]["approval"]["id"]}
                out["ops"] = await call(ops, "approve_call", ident)
            out["again"] = await call(flow, "git_commit", commit_args(dep))

    with_server(dep, body)
    held = out["held"]
    assert asked == [] and held["decision"] == "pending" and out["head"] == head
    assert "lingyi approve" in held["recommendation"] and "approve_call" in held["recommendation"]
    assert out["ops"]["ok"] and out["again"]["decision"] == "approved"
    assert git(dep.repo, "rev-parse", "HEAD") != head
    approved = [r for r in approvals_in(dep) if r["event"] == "approved"]
    assert [r["by"] for r in approved] == ["token:ops"]


def test_an_answer_the_server_never_asked_for_is_refused_by_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The requesting client retries with an accepting answer for its own request id (as a
    2026-07-28 client answers a question): the server never asked, so the request state is
    refused (by the SDK) or the call stays pending (by the gate); nothing is committed and
    nothing approved."""
    from mcp.shared.exceptions import MCPError

    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", FLOW)
    dep = approval_deployment(tmp_path / "d", "en", TOKENS + APPROVER_TOKENS)
    head = stage(dep)
    out: dict[str, Any] = {}

    async def body(url: str) -> None:
        async with client(url, FLOW) as flow:
            held = await call(flow, "git_commit", commit_args(dep))
            answer = {KEY: ElicitResult(action="accept", content={"approve": True})}
            try:
                out["again"] = await call(
                    flow, "git_commit", commit_args(dep), input_responses=answer,
                    request_state=held["approval"]["id"],
                )  # fmt: skip
            except MCPError as exc:
                out["error"] = str(exc)

    with_server(dep, body)
    # The SDK may refuse the unknown request state itself; where it passes the answer on, the
    # gate approves nothing: the call stays pending, for an approver to decide.
    refused = "requestState" in out.get("error", "")
    assert refused or out["again"]["decision"] == "pending", out
    assert git(dep.repo, "rev-parse", "HEAD") == head
    assert not [r for r in approvals_in(dep) if r["event"] == "approved"]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_gate_approves_nothing_on_the_callers_own_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lang: str
) -> None:
    """Behind the SDK's check, the gate itself: a retry carrying the caller's accepting
    answer to its own request (the client stands in, as in tests/test_approvals.py) stays
    pending with approval.self_approval, says an approver decides, and runs nothing."""
    from lingyi.approvals import _gate
    from lingyi.approvals._elicit import Answer
    from lingyi.models import Assertion, AssertionType, Principal, ToolCall
    from lingyi.server import GuardApp
    from lingyi.server.app import Caller
    from tests.test_approvals import _RetryAsker

    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", FLOW)
    dep = approval_deployment(tmp_path / "d", lang, TOKENS + APPROVER_TOKENS)
    app = GuardApp(dep.config())
    try:
        owner = app.policies.tool_owner("git_commit")
        assert owner is not None
        call_ = ToolCall(name="git_commit", arguments=commit_args(dep))
        caller = Caller("s-flow", Principal(name="flow", members=("lingflow",)))
        assertion = Assertion(member=owner.id, type=AssertionType.ACTION, tool_call=call_)
        result = app.check(caller, assertion)
        monkeypatch.setattr(_gate, "asker", lambda: _RetryAsker(None))
        held = app.approvals.hold(caller, owner, call_, result)
        assert held is not None and held.verdict.approval is not None
        answer = (held.verdict.approval.id, Answer("accept"))
        monkeypatch.setattr(_gate, "asker", lambda: _RetryAsker(answer))
        again = app.approvals.hold(caller, owner, call_, result)
    finally:
        app.close()
    assert again is not None and again.verdict.decision == "pending"
    assert again.verdict.codes == ["approval.pending", "approval.self_approval"]
    assert "approvers" in again.verdict.reason and "lingyi approve" in (
        again.verdict.recommendation or ""
    )
    assert not [r for r in approvals_in(dep) if r["event"] == "approved"]


def test_config_show_says_when_a_held_call_is_self_approved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No approvers: config show says held calls are approved by whoever made them; with
    approvers it names them."""
    plain = approval_deployment(tmp_path / "a", "en")
    assert main(["--config", str(plain.config_path), "config", "show"]) == 0
    assert "self-approval" in capsys.readouterr().out
    named = approval_deployment(tmp_path / "b", "en", TOKENS + APPROVER_TOKENS)
    assert main(["--config", str(named.config_path), "config", "show"]) == 0
    assert "ops, ops-flow (never their own calls)" in capsys.readouterr().out
