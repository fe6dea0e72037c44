"""Task intents: a declared release must audit before it pushes, and end complete.

The shipped policy declares ``[intents.release]`` for 灵通 (requires generate_audit_report
and git_push; git_push only after the audit). Pinned through the real MCP server against a
real repository, through replay (the example transcripts, zh and en, are policy tests), in the
log, and in the policy loader's errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lingyi.cli import main
from lingyi.errors import PolicyError
from lingyi.log import read_log
from lingyi.policy import load_policies
from tests.conftest import ROOT, SHIPPED_POLICIES
from tests.judge_kit import policy_folder
from tests.test_server import Deployment, deploy, verdict, with_client

EXAMPLES = sorted((ROOT / "examples" / "tasks").glob("*.jsonl"))
PUSH = {"repo_path": "council-app", "remote": "origin", "branch": "main", "dry_run": True}


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return deploy(tmp_path / "deploy")


def test_a_release_pushes_only_after_its_audit_and_ends_complete(dep: Deployment) -> None:
    """begin_task release → git_push rejected (task.order) → audit → git_push runs →
    end_task complete; the same push with no task open is not held back."""
    seen: dict[str, Any] = {}

    async def release(client: Client) -> None:
        seen["begin"] = await client.call_tool(
            "begin_task", {"member": "lingflow", "intent": "release"}
        )
        seen["early"] = await client.call_tool("git_push", PUSH)
        seen["audit"] = await client.call_tool(
            "generate_audit_report", {"repo_path": "council-app", "version": "v0.16"}
        )
        seen["push"] = await client.call_tool("git_push", PUSH)
        seen["end"] = await client.call_tool("end_task", {"member": "lingflow"})

    async def no_task(client: Client) -> None:
        seen["free"] = await client.call_tool("git_push", PUSH)

    with_client(dep, release, no_task)
    assert not seen["begin"].is_error
    assert seen["begin"].structured_content["result"]["requires"] == [
        "generate_audit_report",
        "git_push",
    ]
    early = verdict(seen["early"])
    assert seen["early"].is_error and "task.order" in early["codes"]
    assert "generate_audit_report" in early["recommendation"]
    assert verdict(seen["audit"])["decision"] == "approved"
    assert verdict(seen["push"])["decision"] == "approved", verdict(seen["push"])["reason"]
    end = seen["end"].structured_content["result"]
    assert (end["complete"], end["missing"]) == (True, [])
    assert verdict(seen["free"])["decision"] == "approved"  # no intent declared: not ordered


def test_an_incomplete_task_is_reported_and_logged(dep: Deployment) -> None:
    """end_task before the required tools ran: a rejection naming what is missing, and a log
    record of type task that keeps it."""
    seen: list[Any] = []

    async def body(client: Client) -> None:
        await client.call_tool("begin_task", {"member": "灵通", "intent": "release"})
        seen.append(await client.call_tool("end_task", {"member": "灵通", "intent": "release"}))

    with_client(dep, body)
    assert seen[0].is_error
    assert seen[0].structured_content["result"]["missing"] == ["generate_audit_report", "git_push"]
    records = [line.record for line in read_log(dep.log) if line.record]
    ended = [r for r in records if r["type"] == "task" and r["outputs"]["task"] == "end"]
    assert ended and ended[-1]["outputs"]["complete"] is False


def test_an_undeclared_intent_is_refused_with_the_closest(dep: Deployment) -> None:
    """An intent one edit from a declared one: refused, the declared intent suggested."""
    seen: list[Any] = []

    async def body(client: Client) -> None:
        seen.append(
            await client.call_tool("begin_task", {"member": "lingflow", "intent": "relase"})
        )

    with_client(dep, body)
    found = verdict(seen[0])
    assert seen[0].is_error and found["argument_problems"][0]["closest"] == "release"


@pytest.mark.parametrize("transcript", EXAMPLES, ids=lambda p: p.name)
def test_the_release_examples_meet_their_expectations(
    transcript: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The release transcripts (zh, en) replay with every expectation met."""
    code = main(["--log", str(tmp_path / "log.jsonl"), "replay", "--check", str(transcript)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and any(r.get("task") == "end" and r.get("missing") for r in rows)


def test_an_intent_naming_a_tool_no_member_owns_is_a_policy_error(tmp_path: Path) -> None:
    """An intent that could never complete is refused at load, naming file and key."""
    extra = '[intents.deploy]\nrequires = ["kubectl_apply"]\n'
    folder = policy_folder(tmp_path, SHIPPED_POLICIES, {"lingyi.toml": extra})
    with pytest.raises(PolicyError) as caught:
        load_policies(folder)
    assert "intents.deploy.requires" in str(caught.value) and "kubectl_apply" in str(caught.value)


def _audit(session: str) -> dict[str, Any]:
    evidence = [{"id": "audit-v0.16", "title": "audit report v0.16"}]
    return {"event": "tool_result", "session": session, "member": "lingflow", "tool": "generate_audit_report", "evidence": evidence}  # fmt: skip


def _begin(session: str = "r", member: str = "lingflow", intent: str = "release") -> dict[str, Any]:
    return {"event": "begin_task", "id": "begin", "session": session, "member": member, "intent": intent}  # fmt: skip


PUSH_EVENT = {"event": "assertion", "id": "push", "session": "r", "member": "lingflow", "type": "action", "content": "push", "tool_call": {"name": "git_push", "arguments": PUSH}}  # fmt: skip

ORDER = [
    # (events before the push, is the push held back by task.order?)
    ([_begin()], True),  # no audit at all
    ([_begin(), _audit("other")], True),  # an audit of another session is not this one's
    ([_audit("r"), _begin()], True),  # an audit before the task began is not the release's
    ([_begin(), _begin(intent="Release")], True),  # a failed re-declaration leaves the task open
    ([_begin(member="lingzhi")], False),  # 灵知 declares no release: nothing is open
    ([_begin(), _audit("r")], False),  # audit, then push
    ([], False),  # no task: the push is not ordered
]


@pytest.mark.parametrize(("before", "held"), ORDER)
def test_only_an_audit_of_this_task_in_this_session_lets_the_push_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], before: list[dict[str, Any]], held: bool
) -> None:
    """The audit must really have run, in this session, after the task began."""
    transcript = tmp_path / "t.jsonl"
    lines = [json.dumps(e, ensure_ascii=False) for e in [*before, PUSH_EVENT]]
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")
    main(["--log", str(tmp_path / "l.jsonl"), "replay", str(transcript)])
    push = [json.loads(line) for line in capsys.readouterr().out.splitlines()][-1]
    failed = {c["code"] for c in push["checks"] if not c["passed"]}
    assert ("task.order" in failed) is held, push["reason"]
