"""The README's walk-through, followed as written: from `lingyi init` to a working server.

The steps are read from the README itself: each ``sh`` block line is run (``lingyi`` as this
interpreter's ``python -m lingyi``, ``cd`` changes the folder), each block whose info string
says ``file=PATH`` or ``append=PATH`` writes that file, and a trailing ``# → …`` comment is
the outcome the README promises. Then ``lingyi serve`` runs over stdio, from the
deployment's folder, and the real MCP client calls the user's own KB, data and member.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import ROOT

SECTION = "## From `lingyi init` to your own server"
BLOCK = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```$", re.S | re.M)
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Walk Through",
    "GIT_AUTHOR_EMAIL": "walk@example.org",
    "GIT_COMMITTER_NAME": "Walk Through",
    "GIT_COMMITTER_EMAIL": "walk@example.org",
}


@dataclass(frozen=True)
class Step:
    kind: str  # run | write | append
    text: str  # the command, or the file's content
    target: str = ""  # the file written
    expect: str = ""  # the promised outcome of a command


def walkthrough() -> list[Step]:
    """The README section's steps, in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps: list[Step] = []
    for language, info, body in BLOCK.findall(section):
        if language == "sh":
            steps += [_command(line) for line in body.splitlines() if line.strip()]
        elif match := re.search(r"\b(file|append)=(\S+)", info):
            kind = "write" if match.group(1) == "file" else "append"
            steps.append(Step(kind, body, target=match.group(2)))
    return steps


def _command(line: str) -> Step:
    command, _, expect = line.partition("# →")
    return Step("run", command.strip(), expect=expect.strip())


def environment() -> dict[str, str]:
    """This machine's environment without lingyi's own variables, plus a git identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    return {**env, **GIT_IDENTITY, "NO_COLOR": "1"}


def run(step: Step, cwd: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(step.text)
    if words[0] == "lingyi":
        words = [sys.executable, "-m", "lingyi", *words[1:]]
    return subprocess.run(
        words, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=120
    )


def check_outcome(step: Step, done: subprocess.CompletedProcess[str]) -> None:
    """The command did what the README says (a decision, a line of output) or simply worked."""
    shown = f"{step.text}\n{done.stdout}\n{done.stderr}"
    if step.expect in ("approved", "fallback", "rejected"):
        assert done.stdout.startswith(step.expect.upper()), shown
        assert done.returncode == (1 if step.expect == "rejected" else 0), shown
    else:
        assert done.returncode == 0, shown
        assert step.expect in done.stdout + done.stderr, shown


def follow(steps: list[Step], start: Path) -> Path:
    """Do every step; return the folder the walk ends in (the deployment)."""
    cwd = start
    for step in steps:
        if step.kind == "run" and step.text.startswith("cd "):
            cwd = cwd / step.text.removeprefix("cd ").strip()
        elif step.kind == "run":
            check_outcome(step, run(step, cwd))
        else:
            path = cwd / step.target
            path.parent.mkdir(parents=True, exist_ok=True)
            previous = path.read_text(encoding="utf-8") if step.kind == "append" else ""
            path.write_text(previous + ("\n" if previous else "") + step.text, encoding="utf-8")
    return cwd


async def serve_and_call(deployment: Path) -> dict[str, Any]:
    """`lingyi serve` from the deployment's folder, and the real MCP client calling it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lingyi", "serve"], cwd=deployment, env=environment()
    )
    calls = {
        "search_knowledge": {"query": "调息"},
        "analyze_data": {"source": "signups", "group_by": "region"},
        "verify_assertion": {
            "member": "scribe",
            "type": "fact",
            "content": "Sign-ups will definitely double next month",
        },
    }
    results = {}
    async with Client(params) as client:
        for tool, args in calls.items():
            with anyio.fail_after(60):
                result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result)
            results[tool] = json.dumps(result.structured_content, ensure_ascii=False)
    return results


def test_the_readme_walkthrough_works_as_written(tmp_path: Path) -> None:
    """init → own KB document, CSV, repository and member policy → policy check → verify →
    replay --check → serve over stdio: the client finds the user's document, analyses the
    user's CSV and verifies as the user's member; every call is in the log."""
    steps = walkthrough()
    assert [s.text for s in steps if s.kind == "run"][:2] == ["lingyi init guard", "cd guard"]
    assert {s.target for s in steps if s.kind != "run"} >= {
        "validators/scribe.toml",
        "kb/breathing.md",
    }
    deployment = follow(steps, tmp_path)
    results = anyio.run(serve_and_call, deployment)
    assert "kb:breathing-001" in results["search_knowledge"]
    assert '"north"' in results["analyze_data"] and '"south"' in results["analyze_data"]
    assert (
        '"fallback"' in results["verify_assertion"] and "Inference:" in results["verify_assertion"]
    )
    log = deployment / "var" / "verification.jsonl"
    done = run(Step("run", "lingyi log verify --json"), deployment)
    assert done.returncode == 0 and json.loads(done.stdout)["path"] == str(log.resolve())
    assert json.loads(done.stdout)["records"] >= 8  # the walk's verifications and the three calls
