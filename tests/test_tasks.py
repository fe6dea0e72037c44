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
