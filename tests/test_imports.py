"""What each command loads: the CLI's own commands never load the MCP server stack.

``lingyi verify``, ``replay`` and the review commands (``stats``, ``report``, ``log``) start in
a fresh interpreter whose modules are inspected after the command ran: the MCP SDK, Starlette,
uvicorn and the HTTP clients (needed by ``serve`` and by an HTTP data source or trace backend
only) must not be among them. This pins behaviour (what is imported), not timing; start-up
times are in ``benchmarks/bench_start.py`` and BENCHMARKS.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.gateway_kit import git_deployment
from tests.test_server import MISMATCHES, _edit, deploy, own_policies

# Top-level packages of the server stack and the HTTP clients.
SERVER_STACK = ("mcp", "mcp_types", "starlette", "sse_starlette", "uvicorn", "httpx", "httpx2")
# Loaded only by what needs them: the git backend, the judge, telemetry ([telemetry] enabled;
# "google" is its protobuf). (markdown-it is not here: every check reads a text's Markdown
# structure, lingyi.checks._structure.)
ON_DEMAND = ("git", "anthropic", "opentelemetry", "google")
# What the stdio server does not need to answer its first request: GitPython (the first git
# call), jsonschema (the first tool call checked), HTTP clients of lingyi's own (a trace
# backend, when configured), the judge, filelock (the first record
# appended: the log's start-up check reads its tail without the lock). (uvicorn, Starlette and the
# OpenTelemetry API are not here: the SDK's own server modules import them, for a bare server
# just the same; our telemetry's SDK and exporter are "google" — protobuf — and beyond.)
NOT_AT_START = ("git", "jsonschema", "httpx", "anthropic", "google", "filelock")
# lingyi's own server modules a stdio serve of the shipped config does not need before it
# answers: the gateway (only with [[upstreams]] configured, which the shipped config has none
# of). The others (approvals, telemetry, listchanged, notifications, resources, sessions,
# auth, transports) load: declared capabilities, handlers registered before initialize, or
# the path of every call (BENCHMARKS.md, "Part S3"). Nor the answer checks' Markdown reader
# (the first answer checked), nor the knowledge base's indexing of files (opened on the
# first search).
OWN_NOT_AT_START = (
    "lingyi.gateway",
    "lingyi.answers.markdown",
    "lingyi.backends.kb.indexer",
    "lingyi.backends.kb.watch",
)
# Not loaded by verify, replay and log unless something is logged (nothing is, here): structlog
# and the asyncio its package imports (lingyi._logging loads it with the first event).
LOGGING = ("structlog", "asyncio")
# Not loaded by a verify of flags (no --context, --json or --answer): the replay modules, and
# the knowledge base's term patterns stay uncompiled unless the KB is searched (checked apart).
NOT_ON_VERIFY = ("lingyi.replay", "lingyi.cli.replay", "lingyi.cli.serve", "lingyi.server")
TRANSCRIPT = ROOT / "examples" / "eval" / "eval-boundary.jsonl"  # no git tool: no GitPython

PROBE = """
import json, sys
from lingyi.cli import main
code = main(sys.argv[1:])
top = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"code": code, "loaded": top, "lingyi": sorted(m for m in sys.modules if m.startswith("lingyi."))}))
"""


def loaded_by(*args: str) -> tuple[int, set[str]]:
    """Run ``lingyi ARGS`` in a fresh interpreter: its exit code and top-level modules (and
    lingyi's own modules, by their full names)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    last = done.stdout.strip().splitlines()[-1]
    report = json.loads(last)
    return report["code"], set(report["loaded"]) | set(report["lingyi"])


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A deployment whose log holds a few records, for the review commands to read."""
    dep = deploy(tmp_path_factory.mktemp("imports") / "deploy")
    code, _ = loaded_by("--config", str(dep.config_path), "replay", str(TRANSCRIPT))
    assert code == 0
    return str(dep.config_path)


COMMANDS = [
    ["verify", "--member", "lingzhi", "--type", "fact", "--content", "庄子的逍遥游讲的是自由"],
    ["verify", "--member", "lingzhi", "--content", "The KB has an article on qigong"],
    ["verify", "--member", "lingzhi", "--tool", "search_knowledge", "--args", '{"query":"气功"}'],
    ["verify", "--member", "lingzhi", "--tool", "search_knowledge", "--args", '{"query":"失眠吃什么药"}'],
    ["replay", str(TRANSCRIPT)],
    ["stats", "--days", "7", "--json"],
    ["report", "--out", "{tmp}"],
    ["log", "verify"],
    ["log", "tail", "-n", "3"],
    ["log", "query", "--decision", "rejected"],
]  # fmt: skip


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_cli_commands_do_not_load_the_server_stack(
    config: str, args: list[str], tmp_path: Path
) -> None:
    """verify (facts and tool calls, approved and rejected, zh and en), replay, stats, report
    and log run without importing the MCP SDK, Starlette, uvicorn, httpx, GitPython (no git
    tool is involved), the judge's client or OpenTelemetry
    (telemetry is off); verify, replay and log run without structlog and asyncio (nothing is
    logged); verify without the replay modules."""
    out = str(tmp_path / "reports")
    code, loaded = loaded_by("--config", config, *(a.replace("{tmp}", out) for a in args))
    assert code in (0, 1), args  # approved or rejected: the command itself ran
    assert sorted(loaded & {*SERVER_STACK, *ON_DEMAND}) == []
    if args[0] in ("verify", "replay", "log"):
        assert sorted(loaded & set(LOGGING)) == []
    if args[0] == "verify":
        assert sorted(loaded & set(NOT_ON_VERIFY)) == []


def test_serve_loads_the_server_stack_only_when_asked(config: str) -> None:
    """The other side: the probe does see the stack when a command needs it (``lingyi serve
    --help`` imports nothing of it; importing the server package does)."""
    code, loaded = loaded_by("--config", config, "serve", "--help")
    assert code == 0
    assert "mcp" not in loaded
    probe = "import sys, lingyi.server; print('mcp' in sys.modules and 'starlette' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "True"


def test_the_stdio_server_starts_without_what_its_first_request_does_not_need(
    config: str,
) -> None:
    """``lingyi serve`` builds the whole server (policies, tools, resources) and serves stdio
    until its input closes, without importing GitPython, jsonschema, httpx, the judge's client,
    markdown-it or filelock (its log holds records): each loads when the call that needs it
    comes; nor lingyi's gateway (no upstream is configured), the answers' Markdown reader or
    the knowledge base's file indexing."""
    report, stderr = served(config)
    assert report["code"] == 0, stderr
    assert {"mcp", "lingyi"} <= set(report["loaded"])  # the server really was built
    assert sorted(set(report["loaded"]) & set(NOT_AT_START)) == []
    assert _own(report, OWN_NOT_AT_START) == []


def served(config: str) -> tuple[dict[str, Any], str]:
    """``lingyi serve`` over stdio with nothing on its input: the probe's report, stderr."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--config", config, "serve"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _own(report: dict[str, Any], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in report["lingyi"] if m.startswith(prefixes))


def test_the_gateway_loads_when_an_upstream_is_configured(tmp_path: Path) -> None:
    """The other side: with the git upstream configured, serve loads the gateway at start
    (it connects to and lists its upstreams before answering, as before)."""
    dep = git_deployment(tmp_path / "deploy")
    report, stderr = served(str(dep.config_path))
    assert report["code"] == 0, stderr
    assert "lingyi.gateway.gateway" in _own(report, OWN_NOT_AT_START)


@pytest.mark.parametrize(
    ("file", "old", "new", "fragments"), MISMATCHES[:2], ids=["unserved", "undeclared"]
)
def test_a_policy_the_tools_do_not_match_still_refuses_to_start(
    tmp_path: Path, file: str, old: str, new: str, fragments: list[str]
) -> None:
    """What is loaded later changes no refusal: a policy tool nothing serves, or a served
    tool no policy declares, still stops ``lingyi serve`` before it answers, with the
    mismatch named on stderr (and without the gateway loaded)."""
    dep = deploy(tmp_path / "deploy")
    _edit(own_policies(dep), file, old, new)
    report, stderr = served(str(dep.config_path))
    assert report["code"] != 0
    assert all(fragment in stderr for fragment in fragments), stderr
    assert _own(report, OWN_NOT_AT_START) == []


def test_every_command_is_listed_and_runs_lazily() -> None:
    """The lazy command table lists every command in help, each reachable by its name."""
    from lingyi.cli._app import COMMANDS as TABLE
    from lingyi.cli._app import cli

    listed = subprocess.run(
        [sys.executable, "-m", "lingyi", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    for name in TABLE:
        assert f"  {name} " in listed
    import click

    ctx = click.Context(cli)
    assert all(cli.get_command(ctx, name) is not None for name in TABLE)


RECORDS_PROBE = """
import json, sys
from lingyi.cli import main
code = main(sys.argv[1:])
from lingyi.log import records
names = ("VerificationRecord", "AppealRecord", "OutcomeRecord", "CheckEntry", "JudgeTrace")
built = {n: getattr(records, n).__pydantic_complete__ for n in names}
print(json.dumps({"code": code, "built": built}))
"""


@pytest.mark.parametrize(
    ("args", "built"),
    [
        (["verify", "--member", "lingzhi", "--content", "庄子的逍遥游讲的是自由"], False),
        (["verify", "--member", "lingzhi", "--content", "The KB has an article on qigong"], False),
        (["log", "tail", "-n", "3", "--json"], False),
        (["log", "query", "--decision", "rejected", "--json"], False),
    ],
    ids=["verify zh", "verify en", "log tail", "log query"],
)
def test_commands_that_validate_no_record_build_no_record_model(
    config: str, args: list[str], built: bool
) -> None:
    """The log record models are built on first use (``defer_build``): a verify writes its
    record as a dict and the log readers keep dicts, so none of them is built."""
    done = subprocess.run(
        [sys.executable, "-c", RECORDS_PROBE, "--config", config, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, 1), done.stderr
    assert set(report["built"].values()) == {built}


def test_a_record_model_is_built_and_validates_on_first_use() -> None:
    """The other side: validating a record builds its model then, and it still rejects a
    misspelt field (``extra = forbid``) and accepts a record of the first schema."""
    code = (
        "import json\nfrom pydantic import ValidationError\n"
        "from lingyi.log.records import VerificationRecord, parse_record\n"
        "before = VerificationRecord.__pydantic_complete__\n"
        "rec = parse_record({'source': 'cli', 'session': 's', 'member': 'lingzhi',"
        " 'type': 'fact', 'content': '庄子', 'decision': 'approved', 'reason': 'ok',"
        " 'checks': [], 'latency_ms': 1.0, 'policy_version': 'v1'})\n"
        "try:\n    VerificationRecord.model_validate({'kind': 'verification', 'membr': 'x'})\n"
        "    forbidden = False\nexcept ValidationError:\n    forbidden = True\n"
        "print(json.dumps([before, VerificationRecord.__pydantic_complete__, rec.member,"
        " forbidden]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert json.loads(done.stdout.strip()) == [False, True, "lingzhi", True], done.stderr
