"""Human approval bound to the call (lingyi.approvals), driven by the real MCP client.

A tool whose policy says ``approval = "required"`` runs only after a person approved that
very call: through MCP elicitation when the client supports it (accept → it runs; decline or
cancel → rejected, not run), otherwise a ``pending`` result with an approval id that
``lingyi approve ID`` (a real subprocess, or the CLI in-process) or an approver's token
(``approve_call``) resolves. The approval is bound to the member, token, tool, argument
digest and policy version, expires, and is used once; every step is a record in the log's
chain, which ``lingyi log verify`` still verifies and ``lingyi stats`` counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from lingyi.approvals import needed, uncertain_codes
from lingyi.cli import main
from lingyi.config import ApprovalsSection, load_config
from lingyi.errors import ConfigError
from lingyi.log import read_log, verify_chain
from lingyi.models import CheckResult, Decision, Stage, VerificationResult
from lingyi.policy import ToolSpec
from lingyi.server import GuardApp, build_server
from tests.test_server import TIMEOUT_S, Deployment, _edit, deploy, git, own_policies

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape
Body = Callable[[Client], Awaitable[None]]


def approval_deployment(root: Path, lang: str = "zh", extra: str = "") -> Deployment:
    """A deployment where 灵通's git_commit needs a person's approval."""
    dep = deploy(root, extra)
    text = dep.config_path.read_text(encoding="utf-8")
    dep.config_path.write_text(text.replace('language = "zh"', f'language = "{lang}"', 1))
    folder = own_policies(dep)
    _edit(
        folder,
        "lingflow.toml",
        "[tools.git_commit]\n",
        '[tools.git_commit]\napproval = "required"\n',
    )
    return dep


def run(
    dep: Deployment, *bodies: Body, clock: Callable[[], datetime] | None = None, **client: Any
) -> None:
    """Each body in its own in-process client connection; ``clock``: the gate's time."""

    async def main_() -> None:
        app = GuardApp(dep.config())
        if clock is not None:
            app.approvals.book.clock = clock
        try:
            server = build_server(app)
            for body in bodies:
                async with Client(server, **client) as c:
                    with anyio.fail_after(TIMEOUT_S):
                        await body(c)
        finally:
            app.close()

    anyio.run(main_)


def stage(dep: Deployment, name: str = "n.txt") -> str:
    """Stage a new file; the HEAD before the commit."""
    (dep.repo / name).write_text(f"{name}\n", encoding="utf-8")
    git(dep.repo, "add", name)
    return git(dep.repo, "rev-parse", "HEAD")


def commit_args(dep: Deployment, message: str = "add n.txt") -> dict[str, Any]:
    return {"repo_path": str(dep.repo), "message": message}


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    data = dict(result.structured_content or {})
    return {**data.get("verdict", data), "is_error": result.is_error}


def approvals_in(dep: Deployment) -> list[dict[str, Any]]:
    return [r for line in read_log(dep.log) if (r := line.record) and r.get("kind") == "approval"]


def cli(*args: str) -> tuple[int, str]:
    """The CLI in-process (the runner); its exit code and what it printed."""
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def subprocess_lingyi(dep: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``lingyi`` command in another process (the state is shared through the log)."""
    cmd = [sys.executable, "-m", "lingyi", "--config", str(dep.config_path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# --- the elicitation path -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "action", "content", "decision", "runs", "words"),
    [
        ("zh", "accept", {"approve": True}, "approved", True, "是否批准"),
        ("en", "accept", {"approve": True}, "approved", True, "Approve this one call"),
        ("zh", "decline", None, "rejected", False, "已拒绝"),
        ("en", "decline", None, "rejected", False, "declined"),
        ("en", "cancel", None, "rejected", False, "cancelled"),
        ("en", "accept", {"approve": False}, "rejected", False, "declined"),
    ],
)
def test_elicitation_accept_runs_the_tool_and_decline_does_not(
    tmp_path: Path, lang: str, action: str, content: Any, decision: str, runs: bool, words: str
) -> None:
    """A client with an elicitation callback is asked (a redacted summary: member, tool,
    arguments); accept → the commit is really made; decline/cancel → rejected
    (approval.refused), the repository untouched, and a refused outcome in the log."""
    dep = approval_deployment(tmp_path / "d", lang)
    head = stage(dep)
    asked: list[str] = []

    async def answer(_ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        found.update(await call(client, "git_commit", commit_args(dep, f"add n.txt {SECRET}")))

    run(dep, body, elicitation_callback=answer)
    assert len(asked) == 1 and "git_commit" in asked[0] and SECRET not in asked[0]
    assert found["decision"] == decision
    assert (git(dep.repo, "rev-parse", "HEAD") != head) is runs
    events = [r["event"] for r in approvals_in(dep)]
    assert events == (["requested", "approved", "used"] if runs else ["requested", "refused"])
    outcomes = [
        r["status"]
        for line in read_log(dep.log)
        if (r := line.record) and r.get("kind") == "outcome"
    ]
    # The first attempt is held (input_required); the retry with the answer runs or not.
    assert outcomes == (["held"] if runs else ["held", "refused"])
    if not runs:
        assert found["codes"] == ["approval.refused"] and words in found["reason"]
    else:
        assert words in asked[0]
    assert SECRET not in dep.log.read_text(encoding="utf-8")


@pytest.mark.parametrize(("action", "runs"), [("accept", True), ("decline", False)])
def test_legacy_clients_are_asked_in_the_middle_of_the_call(
    tmp_path: Path, action: str, runs: bool
) -> None:
    """A client on the initialize handshake (protocol 2025-11-25) gets the question as a
    server-to-client elicitation/create request mid-call; the same outcomes."""
    dep = approval_deployment(tmp_path / "d", "en")
    head = stage(dep)
    asked: list[str] = []

    async def answer(_ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action=action, content={"approve": True} if runs else None)  # type: ignore[arg-type]

    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        found.update(await call(client, "git_commit", commit_args(dep)))

    run(dep, body, elicitation_callback=answer, mode="legacy")
    assert len(asked) == 1 and (found["decision"] == "approved") is runs
    assert (git(dep.repo, "rev-parse", "HEAD") != head) is runs
    verifications = [
        r for line in read_log(dep.log) if (r := line.record) and r.get("kind") == "verification"
    ]
    assert len(verifications) == 1  # asked within the call: one verification, not a retry


def test_a_tool_without_approval_is_never_asked(tmp_path: Path) -> None:
    """Must pass: git_branch needs no approval; the client's callback is never called."""
    dep = approval_deployment(tmp_path / "d", "en")
    asked: list[str] = []

    async def answer(_ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="decline")

    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        args = {"repo_path": str(dep.repo), "name": "feature/x"}
        found.update(await call(client, "git_branch", args))

    run(dep, body, elicitation_callback=answer)
    assert found["decision"] == "approved" and not asked and approvals_in(dep) == []


# --- the pending path ----------------------------------------------------------------------


@pytest.mark.parametrize(("lang", "words"), [("zh", "须经人工审批"), ("en", "waits for a person")])
def test_pending_then_lingyi_approve_then_the_same_call_runs(
    tmp_path: Path, lang: str, words: str
) -> None:
    """Without elicitation: pending (an id, `lingyi approve ID`, approval.pending), nothing
    committed; `lingyi approve ID` in another process; the same call then runs, once."""
    dep = approval_deployment(tmp_path / "d", lang)
    head = stage(dep)
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    third: dict[str, Any] = {}

    async def ask(client: Client) -> None:
        first.update(await call(client, "git_commit", commit_args(dep)))
        assert git(dep.repo, "rev-parse", "HEAD") == head  # nothing ran
        done = subprocess_lingyi(dep, "approve", first["approval"]["id"], "--reason", "ok")
        assert done.returncode == 0, done.stderr
        second.update(await call(client, "git_commit", commit_args(dep)))
        stage(dep, "m.txt")
        third.update(await call(client, "git_commit", commit_args(dep)))

    run(dep, ask)
    assert first["is_error"] and first["decision"] == "pending"
    assert first["codes"] == ["approval.pending"] and words in first["reason"]
    approval = first["approval"]
    assert (
        approval["status"] == "pending"
        and approval["command"] == f"lingyi approve {approval['id']}"
    )
    assert approval["id"] in first["recommendation"]
    assert second["decision"] == "approved" and not second["is_error"]
    assert git(dep.repo, "log", "-1", "--format=%s") == "add n.txt"
    # Used once: the same call again is a new request, not a second run.
    assert third["decision"] == "pending" and third["approval"]["id"] != approval["id"]
    events = [r["event"] for r in approvals_in(dep)]
    assert events == ["requested", "approved", "used", "requested"]


def test_the_same_waiting_call_gets_the_same_request(tmp_path: Path) -> None:
    """Asking twice before anyone decides does not pile up requests: one id, one record."""
    dep = approval_deployment(tmp_path / "d", "en")
    stage(dep)
    ids: list[str] = []

    async def body(client: Client) -> None:
        for _ in range(2):
            ids.append((await call(client, "git_commit", commit_args(dep)))["approval"]["id"])

    run(dep, body)
    assert ids[0] == ids[1] and len(approvals_in(dep)) == 1


@pytest.mark.parametrize(
    ("changed", "code"),
    [("message", "approval.args_changed"), ("none", None)],
)
def test_a_changed_argument_is_refused_under_the_old_approval(
    tmp_path: Path, changed: str, code: str | None
) -> None:
    """Approved for one message: the same call runs; another message does not run and
    needs a new request (approval.args_changed)."""
    dep = approval_deployment(tmp_path / "d", "en")
    head = stage(dep)
    out: dict[str, Any] = {}

    async def body(client: Client) -> None:
        pending = await call(client, "git_commit", commit_args(dep))
        assert cli("--config", str(dep.config_path), "approve", pending["approval"]["id"])[0] == 0
        message = "something else" if changed == "message" else "add n.txt"
        out.update(await call(client, "git_commit", commit_args(dep, message)))

    run(dep, body)
    if code is None:
        assert out["decision"] == "approved" and git(dep.repo, "rev-parse", "HEAD") != head
    else:
        assert out["decision"] == "pending" and code in out["codes"]
        assert git(dep.repo, "rev-parse", "HEAD") == head


def test_an_expired_approval_is_refused(tmp_path: Path) -> None:
    """Approved, then the gate's clock passes the expiry: the call does not run, an
    ``expired`` record is written and a new request made (approval.expired)."""
    dep = approval_deployment(tmp_path / "d", "en")
    head = stage(dep)
    now = [datetime.now(UTC)]
    out: dict[str, Any] = {}

    async def body(client: Client) -> None:
        pending = await call(client, "git_commit", commit_args(dep))
        assert cli("--config", str(dep.config_path), "approve", pending["approval"]["id"])[0] == 0
        now[0] += timedelta(seconds=ApprovalsSection().ttl_s + 1)
        out.update(await call(client, "git_commit", commit_args(dep)))

    run(dep, body, clock=lambda: now[0])
    assert out["decision"] == "pending" and "approval.expired" in out["codes"]
    assert git(dep.repo, "rev-parse", "HEAD") == head
    assert [r["event"] for r in approvals_in(dep)] == [
        "requested",
        "approved",
        "expired",
        "requested",
    ]


def test_lingyi_approve_refuses_an_expired_or_unknown_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a tiny ttl the request has expired by the time a person approves: exit 2,
    approval.expired, and an expired record; an unknown id: approval.unknown."""
    dep = approval_deployment(tmp_path / "d", "en", "\n[approvals]\nttl_s = 0.001\n")
    stage(dep)
    ids: list[str] = []

    async def body(client: Client) -> None:
        ids.append((await call(client, "git_commit", commit_args(dep)))["approval"]["id"])

    run(dep, body)
    code = main(["--config", str(dep.config_path), "approve", ids[0]])
    assert code == 2 and "approval.expired" in capsys.readouterr().err
    code = main(["--config", str(dep.config_path), "approve", "ap-" + "0" * 26])
    assert code == 2 and "approval.unknown" in capsys.readouterr().err
    assert [r["event"] for r in approvals_in(dep)] == ["requested", "expired"]


def test_a_refused_request_stands_for_the_same_call(tmp_path: Path) -> None:
    """`lingyi approve ID --refuse`: the same call is rejected (approval.refused) with the
    reason; a changed call gets a new request."""
    dep = approval_deployment(tmp_path / "d", "en")
    head = stage(dep)
    out: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        pending = await call(client, "git_commit", commit_args(dep))
        args = ["--config", str(dep.config_path), "approve", pending["approval"]["id"]]
        assert cli(*args, "--refuse", "--reason", "not today", "--by", "ops")[0] == 0
        out.append(await call(client, "git_commit", commit_args(dep)))
        out.append(await call(client, "git_commit", commit_args(dep, "another message")))

    run(dep, body)
    assert out[0]["decision"] == "rejected" and out[0]["codes"] == ["approval.refused"]
    assert "not today" in out[0]["reason"] and "ops" in out[0]["reason"]
    assert out[1]["decision"] == "pending"
    assert git(dep.repo, "rev-parse", "HEAD") == head


# --- lingyi approvals ----------------------------------------------------------------------


def test_lingyi_approvals_lists_pending_requests_redacted(tmp_path: Path) -> None:
    """`lingyi approvals --json`: the pending request with caller, tool, redacted arguments,
    age and expiry; `--all` also the decided ones; the text table shows the same."""
    dep = approval_deployment(tmp_path / "d", "en")
    stage(dep)

    async def body(client: Client) -> None:
        await call(client, "git_commit", commit_args(dep, f"with {SECRET}"))
        await call(client, "git_commit", commit_args(dep, "second"))

    run(dep, body)
    config = ["--config", str(dep.config_path)]
    code, text = cli(*config, "approvals", "--json")
    rows = [json.loads(line) for line in text.splitlines()]
    assert code == 0 and len(rows) == 2 and SECRET not in text
    assert rows[0]["member"] == "lingflow" and rows[0]["tool"] == "git_commit"
    assert rows[0]["status"] == "pending" and rows[0]["age_s"] >= 0 and rows[0]["expires"]
    assert cli(*config, "approve", rows[1]["id"])[0] == 0
    assert len(cli(*config, "approvals", "--json")[1].splitlines()) == 1
    statuses = [
        json.loads(x)["status"]
        for x in cli(*config, "approvals", "--json", "--all")[1].splitlines()
    ]
    assert statuses == ["pending", "approved"]
    code, table = cli(*config, "approvals")
    assert rows[0]["id"] in table and "git_commit" in table and SECRET not in table


# --- the approver's tool -------------------------------------------------------------------


def test_approve_call_is_refused_without_an_approvers_token(tmp_path: Path) -> None:
    """Over stdio (no token) approve_call is refused (approval.not_approver); nothing ran."""
    dep = approval_deployment(tmp_path / "d", "en")
    head = stage(dep)
    out: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        pending = await call(client, "git_commit", commit_args(dep))
        out.append(await call(client, "approve_call", {"id": pending["approval"]["id"]}))
        out.append(await call(client, "git_commit", commit_args(dep)))

    run(dep, body)
    assert out[0]["is_error"] and out[0]["code"] == "approval.not_approver"
    assert out[1]["decision"] == "pending" and git(dep.repo, "rev-parse", "HEAD") == head


APPROVER_TOKENS = """
[[server.tokens]]
name = "ops"
token = "tok-ops-0123456789abcdef0123456789"
members = ["lingresearch"]

[[server.tokens]]
name = "ops-flow"
token = "tok-ops-flow-0123456789abcdef0123456789"
members = ["lingflow"]

[approvals]
approvers = ["ops", "ops-flow"]
"""


def test_an_approvers_token_approves_over_http_but_never_its_own_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over Streamable HTTP: 灵通's token gets pending; a non-approver token (desktop) and
    an approver bound to 灵通 (its own request) are refused; the approver "ops" approves;
    灵通's same call then really commits."""
    from tests.test_server_http import TOKENS, client, with_server

    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", "tok-flow-0123456789abcdef0123456789")
    dep = approval_deployment(tmp_path / "d", "en", TOKENS + APPROVER_TOKENS)
    head = stage(dep)
    out: dict[str, Any] = {}

    async def body(url: str) -> None:
        async with client(url, "tok-flow-0123456789abcdef0123456789") as flow:
            pending = await call(flow, "git_commit", commit_args(dep))
            ident = {"id": pending["approval"]["id"]}
            for token in (
                "tok-desktop-0123456789abcdef0123456789",
                "tok-ops-flow-0123456789abcdef0123456789",
                "tok-ops-0123456789abcdef0123456789",
            ):
                async with client(url, token) as approver:
                    out[token] = await call(approver, "approve_call", ident)
            out["again"] = await call(flow, "git_commit", commit_args(dep))

    with_server(dep, body)
    assert out["tok-desktop-0123456789abcdef0123456789"]["code"] == "approval.not_approver"
    assert out["tok-ops-flow-0123456789abcdef0123456789"]["code"] == "approval.own_request"
    assert (
        out["tok-ops-0123456789abcdef0123456789"]["ok"]
        and out["tok-ops-0123456789abcdef0123456789"]["approval"]["status"] == "approved"
    )
    assert out["again"]["decision"] == "approved" and git(dep.repo, "rev-parse", "HEAD") != head
    approved = [r for r in approvals_in(dep) if r["event"] == "approved"]
    assert [r["by"] for r in approved] == ["token:ops"]
    assert all(r["principal"] == "flow" for r in approvals_in(dep))


def test_approvers_must_name_configured_tokens(tmp_path: Path) -> None:
    """A typo in [approvals] approvers is a config error naming the key and the tokens."""
    dep = approval_deployment(tmp_path / "d", "en", '\n[approvals]\napprovers = ["opz"]\n')
    with pytest.raises(ConfigError, match=r"approvals\.approvers.*opz"):
        load_config(dep.config_path)


@pytest.mark.parametrize(
    ("section", "wait"),
    [
        ("ttl_s = 60\nelicit_timeout_s = 120\n", None),  # the answer would outlive the request
        ("elicit_timeout_s = 1000\n", None),  # past the default ttl_s of 900
        ("ttl_s = 60\nelicit_timeout_s = 60\n", 60.0),
        ("ttl_s = 3600\nelicit_timeout_s = 600\n", 600.0),
        ("ttl_s = 30\n", 30.0),  # the default wait (300) shortened to the request's life
        ("ttl_s = 3600\n", 300.0),
    ],
)
def test_an_elicitation_may_not_wait_longer_than_its_request_lives(
    tmp_path: Path, section: str, wait: float | None
) -> None:
    """[approvals] elicit_timeout_s set above ttl_s is a config error naming both keys, and
    the default wait is shortened to ttl_s, so a person's late answer can never approve a
    request that expired while it was asked."""
    dep = approval_deployment(tmp_path / "d", "en", "\n[approvals]\n" + section)
    if wait is not None:
        assert load_config(dep.config_path).raw.approvals.elicit_timeout_s == wait
        return
    with pytest.raises(ConfigError, match=r"approvals.*elicit_timeout_s.*must not exceed ttl_s"):
        load_config(dep.config_path)


# --- which calls need a person -------------------------------------------------------------


def _result(*checks: CheckResult) -> VerificationResult:
    return VerificationResult(
        id="v-1",
        decision=Decision.APPROVED,
        reason="",
        checks=list(checks),
        policy_version="v",
        latency_ms=0.0,
    )


UNSURE = CheckResult(
    stage=Stage.FACT_VERIFICATION, code="evidence.subject_supported", passed=True, uncertain=True
)
JUDGE_DOWN = CheckResult(stage=Stage.JUDGE, code="judge.rubric", passed=True, degraded=True)
SURE = CheckResult(stage=Stage.BOUNDARY, code="boundary.medical", passed=True)
NEEDED = [
    # (tool spec, [approvals] destructive, checks, why)
    (ToolSpec(approval="required"), False, [SURE], "required"),
    (ToolSpec(), False, [SURE], None),
    (ToolSpec(destructive=True), True, [SURE], "destructive"),
    (ToolSpec(destructive=True), False, [SURE], None),
    (ToolSpec(approval="uncertain"), False, [UNSURE], "uncertain"),
    (ToolSpec(approval="uncertain"), False, [JUDGE_DOWN], "uncertain"),
    (ToolSpec(approval="uncertain"), False, [SURE], None),
    (None, True, [UNSURE], None),
]


@pytest.mark.parametrize(("spec", "destructive", "checks", "why"), NEEDED)
def test_which_calls_need_a_person(
    spec: ToolSpec | None, destructive: bool, checks: list[CheckResult], why: str | None
) -> None:
    """approval = "required" always; [approvals] destructive for destructive tools;
    "uncertain" only when a check or the judge could not decide; otherwise never."""
    settings = ApprovalsSection(destructive=destructive)
    assert needed(spec, _result(*checks), settings) == why


def test_uncertain_codes_name_the_undecided_checks() -> None:
    """The codes shown to the person: uncertain checks and a judge without a verdict."""
    assert uncertain_codes(_result(SURE, UNSURE, JUDGE_DOWN)) == [UNSURE.code, JUDGE_DOWN.code]


# --- the log: chain and stats --------------------------------------------------------------


def test_approval_records_keep_the_chain_and_are_counted_by_stats(tmp_path: Path) -> None:
    """After requests, an approval, a use and a refusal: `lingyi log verify` passes; stats
    (rollup and --full, JSON and text, per member) count each event."""
    dep = approval_deployment(tmp_path / "d", "en")
    stage(dep)
    config = ["--config", str(dep.config_path)]

    async def body(client: Client) -> None:
        pending = await call(client, "git_commit", commit_args(dep))
        cli(*config, "approve", pending["approval"]["id"])
        await call(client, "git_commit", commit_args(dep))
        other = await call(client, "git_commit", commit_args(dep, "other"))
        cli(*config, "approve", other["approval"]["id"], "--refuse", "--reason", "no")

    run(dep, body)
    assert verify_chain(dep.log).ok
    assert subprocess_lingyi(dep, "log", "verify").returncode == 0
    want = {"requested": 2, "approved": 1, "refused": 1, "expired": 0, "used": 1}
    for extra in ([], ["--full"]):
        code, text = cli(*config, "stats", "--json", *extra)
        assert code == 0 and json.loads(text)["approvals"] == want
        assert json.loads(text)["integrity"]["other_kinds"] == {}
    code, text = cli(*config, "stats", "--json", "--member", "lingzhi")
    assert json.loads(text)["approvals"]["requested"] == 0
    code, text = cli(*config, "stats")
    assert "Approvals: requested 2 · approved 1 · refused 1 · expired 0 · used 1" in text
    code, text = cli(*config, "log", "tail", "--kind", "approval", "--json")
    assert code == 0 and len(text.splitlines()) == 5
    code, text = cli(*config, "log", "tail", "--kind", "approval")
    assert code == 0 and "APPROVAL  refused" in text and "git_commit by " in text


# --- an upstream tool: the official git MCP server ----------------------------------------


GIT_RESET = """
[tools."git.git_reset"]
destructive = true
approval = "required"
args.repo_path = { type = "path", required = true, roots = "repos", git_repo = true }
"""


def test_an_upstream_git_reset_waits_for_a_person_and_never_reaches_the_upstream(
    tmp_path: Path,
) -> None:
    """git.git_reset (mcp-server-git over stdio) marked approval = "required": pending, and
    the staged change is still staged (the upstream was not called); after `lingyi approve`
    the same call reaches the upstream and unstages it."""
    from tests.gateway_kit import GIT_POLICIES, git_deployment

    dep = git_deployment(tmp_path / "d", policies=GIT_POLICIES + GIT_RESET)
    stage(dep)
    out: list[dict[str, Any]] = []
    staged: list[str] = []

    async def body(client: Client) -> None:
        args = {"repo_path": str(dep.repo)}
        out.append(await call(client, "git.git_reset", args))
        staged.append(git(dep.repo, "diff", "--cached", "--name-only"))
        assert cli("--config", str(dep.config_path), "approve", out[0]["approval"]["id"])[0] == 0
        out.append(await call(client, "git.git_reset", args))
        staged.append(git(dep.repo, "diff", "--cached", "--name-only"))

    run(dep, body)
    assert out[0]["decision"] == "pending" and out[0]["approval"]["tool"] == "git.git_reset"
    assert staged == ["n.txt", ""]
    assert out[1]["decision"] == "approved"


# --- the argument digest -------------------------------------------------------------------


WEAK = (
    "hunter2hunter2"  # a low-entropy secret: redacted in the log, easy to guess from a plain hash
)


def _plain_digest(args: dict[str, Any]) -> str:
    import hashlib

    text = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("keyed", "message", "prefix"),
    [
        (True, f"修复登录 密码是 {WEAK}", "hmac-sha256:"),
        (True, f"fix login password={WEAK}", "hmac-sha256:"),
        (False, f"修复登录 密码是 {WEAK}", "sha256:"),
        (False, f"fix login password={WEAK}", "sha256:"),
    ],
)
def test_the_argument_digest_is_keyed_when_the_log_is(
    tmp_path: Path, keyed: bool, message: str, prefix: str
) -> None:
    """With a log key the approval is bound to an HMAC of the arguments (named by the key
    id): a guess of the redacted secret hashed with sha256 matches nothing in the log. Without
    a key it stays the documented plain sha256. Either way the approved call runs, once."""
    key = tmp_path / "log.key"
    key.write_text("k" * 64 + "\n", encoding="utf-8")
    extra = f'\n[log]\nkey_file = "{key}"\n' if keyed else ""
    dep = approval_deployment(tmp_path / "d", "en", extra)
    head = stage(dep)
    out: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        pending = await call(client, "git_commit", commit_args(dep, message))
        assert cli("--config", str(dep.config_path), "approve", pending["approval"]["id"])[0] == 0
        out.append(await call(client, "git_commit", commit_args(dep, message)))

    run(dep, body)
    digests = {r["args_digest"] for r in approvals_in(dep)}
    (digest,) = digests
    guessed = _plain_digest(commit_args(dep, message))
    assert digest.startswith(prefix) and (guessed in dep.log.read_text(encoding="utf-8")) != keyed
    assert WEAK not in dep.log.read_text(encoding="utf-8")
    assert out[0]["decision"] == "approved" and git(dep.repo, "rev-parse", "HEAD") != head
    assert subprocess_lingyi(dep, "log", "verify").returncode == 0


# --- consuming an answer: check and use under one hold of the lock -------------------------


class _RetryAsker:
    """Stands in for a 2026-07-28 client's retry (mocked: two truly simultaneous retries of
    one call cannot be ordered through the real client): it carries ``answer`` for
    ``approval_id``, or (None) asks anew, which answers input_required."""

    def __init__(self, found: tuple[str, Any] | None) -> None:
        self.found = found

    def answered(self) -> tuple[str, Any] | None:
        return self.found

    def ask(self, message: str, label: str, timeout_s: float, approval_id: str) -> Any:
        from lingyi.approvals._elicit import Answer

        return Answer("input_required")


class _Interleave:
    """The book's lock, made to let the other thread take it once between this thread's
    first release and anything it does next: the interleaving that let two retries both
    use one answer. Bounded waits only (a fixed gate needs no second hold)."""

    def __init__(self, inner: Any) -> None:
        import threading

        self.inner, self.first = inner, threading.Event()
        self.other_held, self.lock = threading.Event(), threading.Lock()
        self.first_thread: int | None = None

    def __enter__(self) -> Any:
        return self.inner.__enter__()

    def close(self) -> None:
        self.inner.close()

    def __exit__(self, *exc: Any) -> None:
        import threading

        self.inner.__exit__(*exc)
        me = threading.get_ident()
        with self.lock:
            first = self.first_thread is None
            if first:
                self.first_thread = me
        if first:
            self.other_held.wait(timeout=TIMEOUT_S)  # let the other thread hold it once
        elif me != self.first_thread:
            self.other_held.set()


@pytest.mark.parametrize(
    ("lang", "action", "runs", "events"),
    [
        ("en", "accept", 1, ["requested", "approved", "used"]),
        ("zh", "accept", 1, ["requested", "approved", "used"]),
        ("en", "decline", 0, ["requested", "refused"]),
        ("zh", "decline", 0, ["requested", "refused"]),
    ],
)
def test_two_simultaneous_retries_with_one_answer_use_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lang: str, action: str, runs: int,
    events: list[str],
) -> None:  # fmt: skip
    """Two threads retry the same asked call with the same answer, the lock handed between
    them at the worst moment: the answer is recorded once (approved and used once, or
    refused once), at most one of them may run, and the other does not run on it."""
    import threading

    from lingyi.approvals import _gate
    from lingyi.approvals._elicit import Answer
    from lingyi.models import Assertion, AssertionType, ToolCall
    from lingyi.server.app import Caller

    dep = approval_deployment(tmp_path / "d", lang)
    app = GuardApp(dep.config())
    try:
        owner = app.policies.tool_owner("git_commit")
        assert owner is not None
        call_ = ToolCall(name="git_commit", arguments=commit_args(dep))
        caller = Caller("s-retry")
        assertion = Assertion(member=owner.id, type=AssertionType.ACTION, tool_call=call_)
        result = app.check(caller, assertion)
        gate = app.approvals
        monkeypatch.setattr(_gate, "asker", lambda: _RetryAsker(None))
        asked = gate.hold(caller, owner, call_, result)
        assert asked is not None and asked.verdict.approval is not None
        answer = (asked.verdict.approval.id, Answer(action))  # type: ignore[arg-type]
        monkeypatch.setattr(_gate, "asker", lambda: _RetryAsker(answer))
        gate.book.mutex = _Interleave(gate.book.mutex)  # type: ignore[assignment]
        replies: list[Any] = []
        start = threading.Barrier(2)

        def retry() -> None:
            start.wait(timeout=TIMEOUT_S)
            replies.append(gate.hold(caller, owner, call_, result))

        threads = [threading.Thread(target=retry) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=TIMEOUT_S)
    finally:
        app.close()
    mine = [r for r in approvals_in(dep) if r["approval_id"] == answer[0]]
    assert [r["event"] for r in mine] == events
    assert sum(r is None for r in replies) == runs and len(replies) == 2
    assert all(r.verdict.decision != "approved" for r in replies if r is not None)


@pytest.mark.parametrize(
    ("lang", "elsewhere", "decision", "runs"),
    [
        ("en", ["--refuse", "--reason", "no"], "rejected", False),
        ("zh", [], "rejected", False),  # approved elsewhere: not used by this answer either
        ("en", None, "approved", True),
        ("zh", None, "approved", True),
    ],
)
def test_an_answer_to_a_request_decided_meanwhile_runs_nothing(
    tmp_path: Path, lang: str, elsewhere: list[str] | None, decision: str, runs: bool
) -> None:
    """While a legacy client's question is open, `lingyi approve ID` decides the request:
    the person's accept then finds it no longer pending (approval.decided) and nothing runs;
    with nobody deciding meanwhile (must pass) the accept runs the commit."""
    dep = approval_deployment(tmp_path / "d", lang)
    head = stage(dep)
    config = ["--config", str(dep.config_path)]

    async def answer(_ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        if elsewhere is not None:
            assert cli(*config, "approve", approvals_in(dep)[-1]["approval_id"], *elsewhere)[0] == 0
        return ElicitResult(action="accept", content={"approve": True})

    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        found.update(await call(client, "git_commit", commit_args(dep)))

    run(dep, body, elicitation_callback=answer, mode="legacy")
    assert found["decision"] == decision
    assert (git(dep.repo, "rev-parse", "HEAD") != head) is runs
    if not runs:
        assert found["codes"] == ["approval.decided"]
    assert [r["event"] for r in approvals_in(dep)].count("used") == (1 if runs else 0)


# --- held calls in the log and in stats ----------------------------------------------------


async def _held_twice_then_approved(dep: Deployment, client: Client) -> None:
    pending = await call(client, "git_commit", commit_args(dep))
    await call(client, "git_commit", commit_args(dep))  # while it waits: held again
    assert cli("--config", str(dep.config_path), "approve", pending["approval"]["id"])[0] == 0
    assert (await call(client, "git_commit", commit_args(dep)))["decision"] == "approved"


async def _refused_then_again(dep: Deployment, client: Client) -> None:
    pending = await call(client, "git_commit", commit_args(dep))
    args = ["--config", str(dep.config_path), "approve", pending["approval"]["id"], "--refuse"]
    assert cli(*args)[0] == 0
    await call(client, "git_commit", commit_args(dep))


async def _no_approval_needed(dep: Deployment, client: Client) -> None:
    await call(client, "git_branch", {"repo_path": str(dep.repo), "name": "feature/x"})


@pytest.mark.parametrize(
    ("lang", "scenario", "statuses", "approved"),
    [
        ("en", _held_twice_then_approved, ["held", "held"], 3),
        ("zh", _held_twice_then_approved, ["held", "held"], 3),
        ("en", _refused_then_again, ["held", "refused"], 2),
        ("zh", _refused_then_again, ["held", "refused"], 2),
        ("en", _no_approval_needed, [], 0),
    ],
)
def test_held_calls_are_outcomes_and_counted_apart_by_stats(
    tmp_path: Path, lang: str, scenario: Any, statuses: list[str], approved: int
) -> None:
    """Every call the gate did not let run is followed by an outcome (held while it waits,
    refused once refused) naming its approval and verification; the verification keeps
    decision approved (the contract), and stats count held and refused per tool apart from
    the decisions, the rollup and --full alike. A call that ran, or needed no approval, has
    no outcome."""
    dep = approval_deployment(tmp_path / "d", lang)
    stage(dep)

    async def body(client: Client) -> None:
        await scenario(dep, client)

    run(dep, body)
    outcomes = [
        r for line in read_log(dep.log) if (r := line.record) and r.get("kind") == "outcome"
    ]
    assert [o["status"] for o in outcomes] == statuses
    verifications = {
        r["id"]: r
        for line in read_log(dep.log)
        if (r := line.record) and r.get("kind") == "verification"
    }
    requested = {r["approval_id"] for r in approvals_in(dep)}
    for outcome in outcomes:
        assert verifications[outcome["verification_id"]]["decision"] == "approved"
        assert outcome["approval_id"] in requested and outcome["tool"] == "git_commit"
    config = ["--config", str(dep.config_path)]
    want = {"failed": 0, "held": statuses.count("held"), "refused": statuses.count("refused")}
    for extra in ([], ["--full"]):
        figures = json.loads(cli(*config, "stats", "--json", *extra)[1])
        assert figures["outcomes"] == ({"git_commit": want} if statuses else {})
        assert figures["by_tool"].get("git_commit", {}).get("approved", 0) == approved
    assert verify_chain(dep.log).ok
