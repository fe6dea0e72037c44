"""The MCP server driven by a real MCP client: in-process, and as a stdio subprocess.

Every guarded tool verifies, then executes only if approved (or runs the fallback
variant), records its evidence in the session ledger and has written the log record
before the result comes back. A rejection is an ``isError`` result with the verdict.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, LoggingMessageNotificationParams, ResourceTemplateReference

from lingyi.config import Config, load_config
from lingyi.demo import make_repo, write_config
from lingyi.errors import ConfigError
from lingyi.log import read_log, verify_chain
from lingyi.models import AssertionType
from lingyi.policy import Registries, input_schema, load_policies
from lingyi.server import GuardApp, build_server, recent_records, tool_problems
from lingyi.server.tools import own_tools
from tests.conftest import SHIPPED_POLICIES

TIMEOUT_S = 30.0


@dataclass
class Deployment:
    """A temporary deployment: a real repo (tags v0.15/v0.16, bare origin), shipped KB/data."""

    root: Path
    config_path: Path
    repo: Path
    log: Path

    def config(self) -> Config:
        return load_config(self.config_path)


@functools.cache
def _template() -> Path:
    """One real repository and bare origin per test run; each deployment gets a copy.

    Making the repository takes a dozen git processes; copying it takes a millisecond, and
    the suite makes dozens of deployments.
    """
    root = Path(tempfile.mkdtemp(prefix="lingyi-test-template-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    make_repo(root)
    return root


def deploy(root: Path, extra: str = "") -> Deployment:
    """Make the deployment under ``root``; ``extra`` is appended to its config file."""
    template = _template()
    shutil.copytree(template, root, symlinks=True, dirs_exist_ok=True)
    repo = root / "repos" / "council-app"
    git_config = repo / ".git" / "config"  # the copy's origin is its own bare repository
    git_config.write_text(git_config.read_text().replace(str(template), str(root)))
    log = root / "verification.jsonl"
    config = write_config(root, log)
    config.write_text(config.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return Deployment(root, config, repo, log)


def git(repo: Path, *args: str) -> str:
    ident = [
        "-c",
        "user.name=Tester",
        "-c",
        "user.email=t@example.com",
        "-c",
        "commit.gpgsign=false",
    ]
    done = subprocess.run(
        ["git", *ident, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


Session = Callable[[Client], Awaitable[None]]


def with_client(dep: Deployment, *bodies: Session, **client: Any) -> None:
    """Run each body in its own in-process client connection (its own ledger session)."""

    async def main() -> None:
        app = GuardApp(dep.config())
        try:
            server = build_server(app)
            for body in bodies:
                async with Client(server, **client) as client_:
                    with anyio.fail_after(TIMEOUT_S):
                        await body(client_)
        finally:
            app.close()

    anyio.run(main)


def verdict(result: CallToolResult) -> dict[str, Any]:
    data = result.structured_content or {}
    return dict(data.get("verdict", data))


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return deploy(tmp_path / "deploy")


# --- the tool list ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "read_only", "destructive"),
    [
        ("search_knowledge", True, False),
        ("git_commit", False, False),
        ("git_branch", False, False),
        ("git_push", False, True),
        ("generate_audit_report", True, False),
        ("access_data_source", True, False),
        ("analyze_data", True, False),
        ("verify_assertion", True, False),
        ("screen_council_message", True, False),
        ("post_council_message", False, False),
    ],
)
def test_tools_carry_truthful_annotations_and_output_schemas(
    dep: Deployment, tool: str, read_only: bool, destructive: bool
) -> None:
    """Each tool's readOnly/destructive hints come from the policy, with an output schema."""
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        seen.update({t.name: t for t in (await client.list_tools()).tools})

    with_client(dep, body)
    listed = seen[tool]
    assert listed.annotations.read_only_hint is read_only
    assert listed.annotations.destructive_hint is destructive
    assert listed.output_schema and "properties" in listed.output_schema
    assert "bench_search_knowledge" not in seen  # no unguarded twin: the baseline is its own


# --- the published schemas: one per tool, from the policy ----------------------------------


def listed_tools(dep: Deployment, **client: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def body(c: Client) -> None:
        seen.update({t.name: t for t in (await c.list_tools()).tools})

    with_client(dep, body, **client)
    return seen


def test_tools_list_publishes_each_policys_own_schema(dep: Deployment) -> None:
    """tools/list shows the policy's schema: the one tool.args_schema validates with."""
    policies = load_policies(dep.config().validators_dir)
    registries = Registries.of(policies, sorted(dep.config().raw.data_sources))
    listed = listed_tools(dep)
    for member in policies.members.values():
        for name, spec in member.tools.items():
            assert listed[name].input_schema == input_schema(spec, registries), name
            assert listed[name].title == spec.title and spec.title, name
            assert listed[name].annotations.open_world_hint is spec.open_world


SCHEMA_FACTS = [
    # (tool, argument, JSON Schema keyword, value the schema must carry)
    ("search_knowledge", "limit", "minimum", 1),
    ("search_knowledge", "limit", "maximum", 20),
    ("search_knowledge", "domains", "items", {"type": "string", "enum": list("儒释道医武心哲科气")}),
    ("search_knowledge", "query", "maxLength", 200),
    ("access_data_source", "source", "enum", ["council_activity", "dataset_v3_labels", "experiment_logs"]),
    ("generate_audit_report", "version", "pattern", r"^v\d+\.\d+(?:\.\d+)?$"),
    ("git_branch", "name", "pattern", r"^(?:[A-Za-z0-9._/\-]+)$"),
    ("verify_assertion", "type", "enum", ["fact", "action", "communication"]),
    ("verification_stats", "days", "maximum", 366),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "arg", "keyword", "value"), SCHEMA_FACTS)
def test_tools_list_carries_enums_ranges_and_patterns(
    dep: Deployment, tool: str, arg: str, keyword: str, value: Any
) -> None:
    """A model learns the valid values from tools/list: enums, ranges, patterns, no extras."""
    schema = listed_tools(dep)[tool].input_schema
    assert schema["properties"][arg][keyword] == value
    assert schema["additionalProperties"] is False
    assert all(p.get("description") for p in schema["properties"].values())


@pytest.mark.parametrize(
    "tool", ["verify_assertion", "screen_council_message", "post_council_message"]
)
def test_the_guards_own_tools_enumerate_the_members(dep: Deployment, tool: str) -> None:
    """Member arguments list every id, display name and alias; member is required."""
    schema = listed_tools(dep)[tool].input_schema
    assert {"lingzhi", "灵知", "LingZhi", "lingyan"} <= set(schema["properties"]["member"]["enum"])
    assert "member" in schema["required"]


def test_the_guards_own_tool_file_agrees_with_the_models(dep: Deployment) -> None:
    """guard_tools.toml lists every plain assertion type (conclusions, answers and tasks have
    tools of their own), and verify_assertion every policy tool."""
    policies = load_policies(dep.config().validators_dir)
    verify = own_tools(policies)["verify_assertion"]
    structured = {AssertionType.CONCLUSION, AssertionType.ANSWER, AssertionType.TASK}
    assert verify.args["type"].values == [t.value for t in AssertionType if t not in structured]
    assert set(verify.args["tool_name"].values or []) == {
        t for m in policies.members.values() for t in m.tools
    }


# --- raw arguments: every call reaches the guard and the log ---------------------------------


RAW_CALLS = [
    # (language, arguments of search_knowledge, decision, what reason or recommendation says)
    ("en", {"query": "气功", "limit": 3}, "approved", "checks passed"),
    ("en", {"query": "气功", "domains": ["气"]}, "approved", "checks passed"),
    ("en", {"query": "qigong", "limit": "lots"}, "rejected", "limit: must be of type integer"),
    ("en", {"query": "qigong", "limit": 500}, "rejected", "limit must be between 1 and 20"),
    ("en", {"query": "qigong", "limit": None}, "rejected", "limit: must be of type integer"),
    ("en", {"query": "qigong", "colour": "red"}, "rejected", "valid arguments: query, domains, limit"),
    ("en", {"query": "qigong", "domains": ["魔"]}, "rejected", "each item of domains must be one of: 儒"),
    ("en", {"limit": 3}, "rejected", "query: required"),
    ("zh", {"query": "气功", "limit": 3}, "approved", "检查通过"),
    ("zh", {"query": "qigong", "limit": "lots"}, "rejected", "limit：类型必须是 integer"),
    ("zh", {"query": "qigong", "colour": "red"}, "rejected", "colour：未知参数"),
]  # fmt: skip


@pytest.mark.parametrize(("lang", "args", "decision", "says"), RAW_CALLS)
def test_raw_arguments_are_verified_logged_and_answered(
    tmp_path: Path, lang: str, args: dict[str, Any], decision: str, says: str
) -> None:
    """The SDK does not pre-validate or coerce: the guard sees, logs and judges the raw call."""
    dep = deploy(tmp_path / "deploy")
    text = dep.config_path.read_text(encoding="utf-8")
    dep.config_path.write_text(text.replace('language = "zh"', f'language = "{lang}"'))
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool("search_knowledge", args))

    with_client(dep, body)
    found = verdict(out[0])
    assert found["decision"] == decision and out[0].is_error is (decision == "rejected")
    assert says in f"{found['reason']} {found.get('recommendation')}"
    [record] = [line.record for line in read_log(dep.log) if line.record]
    assert record["id"] == found["verification_id"]
    assert record["tool_call"]["arguments"] == args  # exactly as sent: nothing coerced or dropped
    if decision == "rejected":
        assert "tool.args_schema" in found["codes"]


OWN_BAD = [
    # (tool, arguments, what the recommendation names)
    ("verify_assertion", {"member": "lingyi", "type": "opinion", "content": "x"}, "fact, action, communication"),
    ("verify_assertion", {"member": "lingyi", "type": "fact", "evidence_ids": "kb:1"}, "evidence_ids"),
    ("verify_assertion", {"type": "fact", "content": "x"}, "member"),
    ("screen_council_message", {"member": "lingyi"}, "content"),
    ("post_council_message", {"member": "lingyi", "content": "hi", "urgent": True}, "urgent"),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "names"), OWN_BAD)
def test_arguments_that_form_no_assertion_are_refused_in_our_words(
    dep: Deployment, tool: str, args: dict[str, Any], names: str
) -> None:
    """The guard's own tools refuse malformed calls with the valid values; nothing is logged."""
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool(tool, args))

    with_client(dep, body)
    found = verdict(out[0])
    assert (
        out[0].is_error
        and found["decision"] == "rejected"
        and found["codes"] == ["tool.args_schema"]
    )
    assert (
        found["verification_id"] is None and names in f"{found['reason']} {found['recommendation']}"
    )
    assert "pydantic" not in out[0].content[0].text  # type: ignore[union-attr]
    assert not dep.log.exists() or not dep.log.read_text()


JUDGED_BY_THE_GUARD = [
    ({"member": "nobody", "type": "fact", "content": "hello"}, "member.known"),
    ({"member": "lingflow", "type": "action", "tool_name": "rm_rf", "tool_arguments": {}}, "tool.owned"),
    ({"member": "lingflow", "type": "action", "tool_name": "git_branch", "tool_arguments": {"name": 7}}, "tool.args_schema"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "code"), JUDGED_BY_THE_GUARD)
def test_members_and_tools_named_are_judged_and_logged_by_the_guard(
    dep: Deployment, args: dict[str, Any], code: str
) -> None:
    """An unknown member or tool in verify_assertion is a logged verdict, not a schema refusal."""
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool("verify_assertion", args))

    with_client(dep, body)
    found = verdict(out[0])
    assert out[0].is_error and code in found["codes"]
    [record] = [line.record for line in read_log(dep.log) if line.record]
    assert record["id"] == found["verification_id"]


# --- served tools and policy tools must match ------------------------------------------------


def own_policies(dep: Deployment) -> Path:
    """Give the deployment its own copy of the shipped policies (to edit in a test)."""
    folder = dep.root / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    text = dep.config_path.read_text(encoding="utf-8")
    dep.config_path.write_text(text.replace(str(SHIPPED_POLICIES), str(folder)), encoding="utf-8")
    return folder


def _edit(folder: Path, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


QUERY_METRICS = '[tools.query_metrics]\nargs.service = { type = "string", required = true }\n\n[tools.git_commit]'
MISMATCHES = [
    # (file, text, replacement, fragments the error names)
    ("lingflow.toml", "[tools.git_commit]", QUERY_METRICS, ["lingflow.toml: tools.query_metrics", "no implementation"]),
    ("lingresearch.toml", "[tools.access_data_source]", "[tools.access_data]", ["lingresearch.toml: tools.access_data", "access_data_source: served, but no member policy declares it"]),
    ("lingzhi.toml", "[tools.search_knowledge.args.limit]", '[tools.search_knowledge.args.colour]\ntype = "string"\n\n[tools.search_knowledge.args.limit]', ["tools.search_knowledge.args.colour", "reads no argument 'colour'"]),
    ("lingzhi.toml", "required = true\nmin_length = 1", "required = false\nmin_length = 1", ["args.query", "mark it required"]),
    ("lingyi.toml", "tools = {}", '[tools.verify_assertion]\ndescription = "mine"', ["lingyi.toml: tools.verify_assertion", "guard's own tools"]),
]  # fmt: skip


@pytest.mark.parametrize(("file", "old", "new", "fragments"), MISMATCHES)
def test_policy_tools_and_served_tools_must_match_at_start(
    dep: Deployment, file: str, old: str, new: str, fragments: list[str]
) -> None:
    """A policy tool nothing serves, or a served tool no policy owns, stops the server."""
    _edit(own_policies(dep), file, old, new)
    app = GuardApp(dep.config())
    try:
        with pytest.raises(ConfigError) as info:
            build_server(app)
    finally:
        app.close()
    for fragment in fragments:
        assert fragment in str(info.value)


def test_the_shipped_policies_match_the_served_tools(dep: Deployment) -> None:
    """The shipped policies and the implementations agree (query_traces is served again)."""
    assert tool_problems(load_policies(dep.config().validators_dir)) == []


def test_a_policy_reload_republishes_the_schema(dep: Deployment) -> None:
    """tools/list follows the policies: an edited range is published after the reload."""
    folder = own_policies(dep)
    maxima: list[int] = []

    async def limit_max(client: Client) -> None:
        tools = (await client.list_tools()).tools
        search = next(t for t in tools if t.name == "search_knowledge")
        maxima.append(search.input_schema["properties"]["limit"]["maximum"])

    async def body(client: Client) -> None:
        await limit_max(client)
        _edit(folder, "lingzhi.toml", "max = 20", "max = 10")
        await anyio.sleep(1.1)  # the policy store looks for changes once a second
        await limit_max(client)

    with_client(dep, body)
    assert maxima == [20, 10]


# --- the MCP logging capability ----------------------------------------------------------------


@pytest.mark.filterwarnings(
    "ignore:The logging capability is deprecated"
)  # 2025-11-25 clients use it
def test_verdicts_reach_the_clients_log_at_the_level_it_set(dep: Deployment) -> None:
    """logging/setLevel is served; each verdict is a log message, filtered by that level."""
    logs: list[tuple[str, str]] = []
    caps: list[Any] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.data["decision"]))

    async def body(client: Client) -> None:
        caps.append(client.server_capabilities.logging)
        await client.call_tool("search_knowledge", {"query": "气功"})  # info: below the default
        await client.call_tool("search_knowledge", {"query": "失眠吃什么药"})  # warning
        await client.set_logging_level("info")
        await client.call_tool("search_knowledge", {"query": "气功"})
        await client.set_logging_level("error")
        await client.call_tool("search_knowledge", {"query": "失眠吃什么药"})

    with_client(dep, body, mode="legacy", logging_callback=on_log)
    assert caps[0] is not None
    assert logs == [("warning", "rejected"), ("info", "approved")]


@pytest.mark.parametrize(
    ("level", "expected"),
    [(None, []), ("info", ["approved", "rejected"]), ("warning", ["rejected"])],
)
def test_modern_clients_opt_in_per_request(
    dep: Deployment, level: str | None, expected: list[str]
) -> None:
    """On 2026-07-28 connections only a request that opted in (and at its level) gets logs."""
    logs: list[str] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params.data["decision"])

    async def body(client: Client) -> None:
        await client.call_tool("search_knowledge", {"query": "气功"})
        await client.call_tool("search_knowledge", {"query": "失眠吃什么药"})

    with_client(dep, body, logging_callback=on_log, log_level=level)
    assert logs == expected


# --- decisions through the server ----------------------------------------------------------


DECISIONS = [
    # (tool, arguments, decision, a code that must have failed, or None)
    ("search_knowledge", {"query": "气功"}, "approved", None),
    ("search_knowledge", {"query": "庄子逍遥游"}, "approved", None),
    ("search_knowledge", {"query": "科学方法论与设备故障诊断"}, "approved", None),
    ("search_knowledge", {"query": "失眠吃什么药"}, "rejected", "boundary.medical"),
    ("search_knowledge", {"query": "how to treat a fever"}, "rejected", "boundary.medical"),
    ("search_knowledge", {"query": "qigong", "limit": 50}, "rejected", "tool.args_schema"),
    ("analyze_data", {"source": "experiment_logs", "group_by": "variant"}, "approved", None),
    ("access_data_source", {"source": "dataset_v3_labels"}, "approved", None),
    ("access_data_source", {"source": "customers_prod"}, "rejected", "tool.args_schema"),
    ("generate_audit_report", {"repo_path": "council-app", "version": "v0.16"}, "approved", None),
    ("generate_audit_report", {"repo_path": "council-app", "version": "16"}, "rejected", "tool.args_schema"),
    ("git_branch", {"repo_path": "council-app", "name": "feature/notes"}, "approved", None),
    ("git_branch", {"repo_path": "council-app", "name": "bad name!"}, "rejected", "tool.args_schema"),
    ("git_push", {"repo_path": "council-app", "remote": "origin", "branch": "main", "force": True}, "fallback", "git.protected_force"),
    ("git_push", {"repo_path": "council-app", "remote": "origin", "branch": "main", "dry_run": True}, "approved", None),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "decision", "code"), DECISIONS)
def test_guarded_tool_decisions(
    dep: Deployment, tool: str, args: dict[str, Any], decision: str, code: str | None
) -> None:
    """What must be blocked is blocked (isError + verdict); legitimate calls run (zh and en)."""
    results: list[CallToolResult] = []

    async def body(client: Client) -> None:
        results.append(await client.call_tool(tool, args))

    with_client(dep, body)
    result, found = results[0], verdict(results[0])
    assert found["decision"] == decision, found["reason"]
    assert result.is_error is (decision == "rejected")
    if code:
        assert code in found["codes"]
    if decision == "rejected":
        assert found["reason"] and found["recommendation"] and found["executed"] is None


def test_every_result_conforms_to_its_output_schema(dep: Deployment) -> None:
    """Approvals, rejections and backend refusals all match the declared output schema.

    Clients such as the MCP Inspector validate structured content even on isError.
    """
    calls = [
        ("search_knowledge", {"query": "气功"}, False),
        ("search_knowledge", {"query": "失眠吃什么药"}, True),
        ("git_commit", {"repo_path": str(dep.repo), "message": "nothing staged"}, True),
        (
            "verify_assertion",
            {"member": "lingyi", "type": "communication", "content": "灵通说v0.17已发布"},
            True,
        ),
        ("post_council_message", {"member": "lingyi", "content": "灵通说v0.17已发布"}, True),
    ]

    async def body(client: Client) -> None:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        for tool, args, is_error in calls:
            result = await client.call_tool(tool, args)
            assert result.is_error == is_error, (tool, result.content)
            jsonschema.validate(result.structured_content, schemas[tool])

    with_client(dep, body)


def test_rejected_commit_never_runs_and_approved_commit_is_real(dep: Deployment) -> None:
    """A rejected git_commit leaves HEAD alone; an approved one makes a real commit, authored
    by the member that owns the tool."""
    before = git(dep.repo, "rev-parse", "HEAD")
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        bad = {"repo_path": "council-app", "message": "x", "paths": ["NOTES.md"]}  # too short
        out.append(await client.call_tool("git_commit", bad))
        assert git(dep.repo, "rev-parse", "HEAD") == before
        good = {"repo_path": "council-app", "message": "docs: notes", "paths": ["NOTES.md"]}
        out.append(await client.call_tool("git_commit", good))

    with_client(dep, body)
    assert out[0].is_error and "tool.args_schema" in verdict(out[0])["codes"]
    sha = (out[1].structured_content or {})["result"]["sha"]
    assert git(dep.repo, "rev-parse", "HEAD") == sha != before
    # The author is the member that owns git_commit, as its policy names it: nothing hard-coded.
    assert git(dep.repo, "log", "-1", "--format=%an <%ae>") == "灵通 <lingflow@council.local>"


def test_nothing_to_commit_is_a_backend_refusal(dep: Deployment) -> None:
    """An approved call the backend refuses (nothing to commit) is isError with its words."""
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        args = {"repo_path": "council-app", "message": "empty commit", "paths": ["README.md"]}
        out.append(await client.call_tool("git_commit", args))

    with_client(dep, body)
    found = verdict(out[0])
    assert out[0].is_error and found["decision"] == "approved"
    assert "nothing to commit" in found["error"]


def test_force_push_to_main_runs_the_dry_run_fallback(dep: Deployment) -> None:
    """A force push to main is not run; the dry run without force is, and the remote is unchanged."""
    remote = dep.root / "origin.git"
    git(dep.repo, "commit", "--allow-empty", "-q", "-m", "local only")
    before = git(remote, "rev-parse", "main")
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        args = {"repo_path": "council-app", "remote": "origin", "branch": "main", "force": True}
        out.append(await client.call_tool("git_push", args))

    with_client(dep, body)
    data = out[0].structured_content or {}
    assert data["verdict"]["executed"] == "fallback"
    assert data["result"]["dry_run"] is True
    assert data["verdict"]["fallback"]["tool_call"]["arguments"]["force"] is False
    assert git(remote, "rev-parse", "main") == before


def test_git_state_mid_merge_is_refused(dep: Deployment) -> None:
    """A commit while a merge is in progress is rejected by git.clean_state."""
    (dep.repo / ".git" / "MERGE_HEAD").write_text(git(dep.repo, "rev-parse", "HEAD") + "\n")
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        args = {"repo_path": "council-app", "message": "mid-merge commit", "add_all": True}
        out.append(await client.call_tool("git_commit", args))

    with_client(dep, body)
    assert out[0].is_error and "git.clean_state" in verdict(out[0])["codes"]


# --- nothing outside the roots ------------------------------------------------------------


def _escape_setup(dep: Deployment) -> None:
    outside = dep.root.parent / "outside"
    outside.mkdir(exist_ok=True)
    git(outside, "init", "-q", "-b", "main")
    (outside / "secret.txt").write_text("secret\n")
    (dep.root / "repos" / "link-out").symlink_to(outside)
    (dep.repo / "secret-link").symlink_to(outside / "secret.txt")


ESCAPES = [
    ("git_commit", {"repo_path": "../outside", "message": "dot-dot commit"}, "tool.path_allowed"),
    ("git_commit", {"repo_path": "/etc", "message": "absolute commit"}, "tool.path_allowed"),
    ("git_commit", {"repo_path": "link-out", "message": "symlink commit"}, "tool.path_allowed"),
    ("git_commit", {"repo_path": "council-app", "message": "escape commit", "paths": ["../../outside/secret.txt"]}, "git.paths_inside"),
    ("git_commit", {"repo_path": "council-app", "message": "escape commit", "paths": ["/etc/passwd"]}, "git.paths_inside"),
    ("git_commit", {"repo_path": "council-app", "message": "escape commit", "paths": ["secret-link"]}, "git.paths_inside"),
    ("git_branch", {"repo_path": "../../outside", "name": "x"}, "tool.path_allowed"),
    ("git_push", {"repo_path": "link-out", "remote": "origin", "branch": "main"}, "tool.path_allowed"),
    ("generate_audit_report", {"repo_path": "/tmp", "version": "v0.16"}, "tool.path_allowed"),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "code"), ESCAPES)
def test_paths_outside_the_roots_are_rejected(
    dep: Deployment, tool: str, args: dict[str, Any], code: str
) -> None:
    """``..``, absolute paths and symlinks pointing out are each a rejection with the reason."""
    _escape_setup(dep)
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool(tool, args))

    with_client(dep, body)
    found = verdict(out[0])
    assert out[0].is_error and found["decision"] == "rejected" and code in found["codes"]
    offending = args["paths"][0] if "paths" in args else args["repo_path"]
    assert offending in found["reason"] and found["recommendation"]
    assert git(dep.root.parent / "outside", "status", "--porcelain") == "?? secret.txt"


@pytest.mark.parametrize("path", ["../secret.csv", "/etc/passwd", "link.csv"])
def test_data_sources_outside_the_data_roots_are_refused(tmp_path: Path, path: str) -> None:
    """A registered source whose file resolves outside the data roots is refused with the reason."""
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "secret.csv").write_text("a,b\n1,2\n")
    (data / "link.csv").symlink_to(tmp_path / "secret.csv")
    extra = f'\n[data_sources.leak]\npath = "{path}"\nformat = "csv"\n'
    dep = deploy(tmp_path / "deploy", extra)
    text = dep.config_path.read_text(encoding="utf-8")
    dep.config_path.write_text(text.replace("data_roots = [", f'data_roots = ["{data}", '))
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool("access_data_source", {"source": "leak"}))
        out.append(await client.call_tool("analyze_data", {"source": "leak"}))

    with_client(dep, body)
    for result in out:
        assert result.is_error and "outside the allowed roots" in verdict(result)["error"]


# --- evidence, sessions, identity ------------------------------------------------------------


def test_evidence_is_recorded_per_client_session(dep: Deployment) -> None:
    """Evidence from one client's search supports its citations, never another client's."""
    fact = {"member": "lingzhi", "type": "fact", "content": "调息是气功的核心"}
    found: list[str] = []
    decisions: list[str] = []

    async def first(client: Client) -> None:
        hits = (await client.call_tool("search_knowledge", {"query": "气功"})).structured_content
        found.append(hits["result"]["hits"][0]["id"])  # type: ignore[index]
        cited = fact | {"evidence_ids": found}
        decisions.append(verdict(await client.call_tool("verify_assertion", cited))["decision"])

    async def second(client: Client) -> None:
        cited = fact | {"evidence_ids": found}
        result = verdict(await client.call_tool("verify_assertion", cited))
        decisions.append(result["decision"])
        assert "evidence.cited_ids_exist" in result["codes"]

    with_client(dep, first, second)
    assert decisions == ["approved", "rejected"]


def test_server_verifies_kb_facts_actively(dep: Deployment) -> None:
    """With no search in the session, the server searches the KB itself; what it found is citable."""
    out: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        for content, ids in [
            ("知识库中有关于量子计算的文章", []),
            ("知识库中有关于气功与呼吸的文章", []),
            ("调息是气功的核心", ["kb:qg-007"]),
        ]:
            args = {"member": "lingzhi", "type": "fact", "content": content, "evidence_ids": ids}
            out.append(verdict(await client.call_tool("verify_assertion", args)))

    with_client(dep, body)
    assert [v["decision"] for v in out] == ["rejected", "approved", "approved"]
    assert out[0]["codes"] == ["evidence.subject_supported"]


def test_commit_sha_becomes_citable_evidence(dep: Deployment) -> None:
    """A commit's SHA is recorded; citing it is approved, citing a made-up one is rejected."""
    decisions: list[str] = []

    async def body(client: Client) -> None:
        args = {"repo_path": "council-app", "message": "docs: notes", "paths": ["NOTES.md"]}
        sha = (await client.call_tool("git_commit", args)).structured_content["result"]["sha"]  # type: ignore[index]
        for cited in (sha, "f" * 40):
            claim = {"member": "lingflow", "type": "fact", "content": f"Committed the notes as {cited[:12]}", "evidence_ids": [cited]}  # fmt: skip
            decisions.append(verdict(await client.call_tool("verify_assertion", claim))["decision"])

    with_client(dep, body)
    assert decisions == ["approved", "rejected"]


@pytest.mark.parametrize(
    ("member", "content", "decision"),
    [
        ("lingyi", "灵通说v0.17已经发布了", "rejected"),
        ("lingyi", "LingZhi told me the knowledge base was rebuilt yesterday.", "rejected"),
        ("lingflow", "用户说下周一之前要看到报告", "approved"),
        ("nobody", "hello", "rejected"),
        ("lingresearch", "基于目前的趋势，B方案下周的准确率会超过0.9", "fallback"),
    ],
)
def test_verify_assertion_decisions(
    dep: Deployment, member: str, content: str, decision: str
) -> None:
    """Communications, unknown members and unlabelled forecasts, in Chinese and English."""
    out: list[CallToolResult] = []
    kind = "fact" if "趋势" in content else "communication"

    async def body(client: Client) -> None:
        args = {"member": member, "type": kind, "content": content}
        out.append(await client.call_tool("verify_assertion", args))

    with_client(dep, body)
    assert verdict(out[0])["decision"] == decision
    assert out[0].is_error is (decision == "rejected")


def test_council_post_screens_then_appends(dep: Deployment) -> None:
    """A post is screened: fabricated relays are refused, real posts land on the record."""
    out: list[CallToolResult] = []
    relay = {"member": "lingyi", "content": "灵研说数据集v3已经标注完了"}

    async def body(client: Client) -> None:
        out.append(await client.call_tool("post_council_message", relay))
        # A post is a fact like any other: 灵研 reads the data set before it reports on it.
        await client.call_tool("access_data_source", {"source": "dataset_v3_labels"})
        real = {"member": "灵研", "content": "Dataset v3 labelling is finished."}
        out.append(await client.call_tool("post_council_message", real))
        out.append(await client.call_tool("screen_council_message", relay))

    with_client(dep, body)
    assert [verdict(r)["decision"] for r in out] == ["rejected", "approved", "approved"]
    posted = [json.loads(line) for line in (dep.root / "council.jsonl").read_text().splitlines()]
    assert [p["from"] for p in posted] == ["lingresearch"]
    assert (out[1].structured_content or {})["result"]["id"] == posted[0]["id"]


def test_unknown_tool_is_a_clean_error(dep: Deployment) -> None:
    """An unknown tool is refused by the SDK as an error result; nothing is logged."""
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool("rm_rf", {"path": "/"}))

    with_client(dep, body)
    assert out[0].is_error and "rm_rf" in out[0].content[0].text  # type: ignore[union-attr]
    assert not dep.log.exists() or not dep.log.read_text()


# --- the log and the resources ---------------------------------------------------------------


def test_each_call_is_logged_before_its_result_returns(dep: Deployment) -> None:
    """When a result arrives, its verification record is already the last line of the log."""
    ids: list[tuple[str, str]] = []

    async def body(client: Client) -> None:
        for tool, args in (
            ("search_knowledge", {"query": "气功"}),
            ("search_knowledge", {"query": "失眠吃什么药"}),
        ):
            found = verdict(await client.call_tool(tool, args))
            last = list(read_log(dep.log))[-1].record
            ids.append((found["verification_id"], last["id"] if last else ""))  # fmt: skip

    with_client(dep, body)
    assert all(a == b for a, b in ids)
    assert verify_chain(dep.log).ok


def test_resources_show_policies_and_recent_log(dep: Deployment) -> None:
    """lingyi://policy/{member} and lingyi://log/recent read the live policy and log."""
    texts: dict[str, str] = {}

    async def body(client: Client) -> None:
        await client.call_tool("search_knowledge", {"query": "气功"})
        for uri in ("lingyi://policy/lingflow", "lingyi://policy/灵知", "lingyi://log/recent"):
            texts[uri] = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]

    with_client(dep, body)
    flow = json.loads(texts["lingyi://policy/lingflow"])
    assert "git_push" in flow["tools"] and "git.protected_force" in [
        c["check"] for c in flow["checks"]
    ]
    assert json.loads(texts["lingyi://policy/灵知"])["member"] == "lingzhi"
    assert json.loads(texts["lingyi://log/recent"])[-1]["tool_call"]["name"] == "search_knowledge"
    assert recent_records(dep.root / "missing.jsonl") == []


def test_member_names_complete_for_the_policy_resource(dep: Deployment) -> None:
    """completion/complete offers member ids, names and aliases for lingyi://policy/{member}."""
    got: list[list[str]] = []

    async def body(client: Client) -> None:
        ref = ResourceTemplateReference(type="ref/resource", uri="lingyi://policy/{member}")
        for prefix in ("ling", "灵", "LingY"):
            result = await client.complete(ref, {"name": "member", "value": prefix})
            got.append(result.completion.values)

    with_client(dep, body)
    assert {"lingzhi", "lingflow", "lingresearch", "lingyan", "lingyi"} <= set(got[0])
    # the names, and the mixed-script aliases of the policies (灵Flow, 灵Tong)
    assert {"灵依", "灵知", "灵通", "灵研"} <= set(got[1]) and all(v[0] == "灵" for v in got[1])
    assert set(got[2]) == {"LingYi", "LingYan", "lingyi", "lingyan"}  # prefixes match any case


def test_stats_tool_and_weekly_report(dep: Deployment) -> None:
    """verification_stats gives the figures (member by any name); the weekly report reads."""
    out: dict[str, Any] = {}

    async def body(client: Client) -> None:
        await client.call_tool("search_knowledge", {"query": "气功"})
        out["stats"] = await client.call_tool("verification_stats", {"days": 7, "member": "灵知"})
        out["bad"] = await client.call_tool("verification_stats", {"days": 0})
        out["report"] = (await client.read_resource("lingyi://report/weekly")).contents[0]

    with_client(dep, body)
    assert not out["stats"].is_error and out["stats"].structured_content
    assert out["bad"].is_error and "days" in out["bad"].structured_content["recommendation"]
    assert out["report"].text.strip()


def test_stats_tool_gives_the_weekly_reports_figures(dep: Deployment) -> None:
    """verification_stats with a week gives the figures the weekly report is made from: the
    week before and the changes, the open appeals, examples and policy versions (review)."""
    from lingyi.report import weekly_stats
    from lingyi.stats import last_full_week, resolve_zone

    out: dict[str, Any] = {}
    week = last_full_week(resolve_zone(None, dep.config()))

    async def body(client: Client) -> None:
        await client.call_tool("search_knowledge", {"query": "头痛应该开什么药"})
        out["week"] = await client.call_tool("verification_stats", {"week": week})
        out["days"] = await client.call_tool("verification_stats", {"days": 7})
        out["bad"] = await client.call_tool("verification_stats", {"week": "2025-W53"})
        out["report"] = (await client.read_resource("lingyi://report/weekly")).contents[0]

    with_client(dep, body)
    from lingyi.report import weekly_report_markdown

    def undated(text: str) -> str:  # the line that says when it was generated differs
        return "\n".join(x for x in text.splitlines() if "generated" not in x and "生成于" not in x)

    assert undated(out["report"].text) == undated(weekly_report_markdown(dep.config(), week))
    figures = out["week"].structured_content
    direct = weekly_stats(dep.config(), week)
    for got in (figures, direct):
        got.pop("generated_at"), got.pop("ledger", None)
    assert figures == direct and figures["window"]["label"] == week
    days = out["days"].structured_content
    assert {"previous", "change", "largest_changes"} <= set(days) and "review" not in days
    assert figures["review"]["policy_versions"] or not figures["totals"]["total"]
    assert (
        out["bad"].is_error and "2025 has no ISO week 53" in out["bad"].structured_content["error"]
    )


# --- stdio subprocess ------------------------------------------------------------------------


def serve_params(dep: Deployment, *extra: str) -> StdioServerParameters:
    """A fresh ``lingyi serve`` of ``dep``'s config, without the caller's lingyi variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    args = ["-m", "lingyi", "--config", str(dep.config_path), "serve", *extra]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def test_stdio_subprocess_serves_guarded_tools(dep: Deployment) -> None:
    """`lingyi serve` over stdio: protocol on stdout; a search, a rejection and an invalid
    argument each come back as a verdict and are in the log."""
    out: list[CallToolResult] = []

    async def main() -> None:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(serve_params(dep)) as client:
                out.append(await client.call_tool("search_knowledge", {"query": "气功"}))
                out.append(
                    await client.call_tool("search_knowledge", {"query": "头痛应该开什么药"})
                )
                out.append(
                    await client.call_tool("search_knowledge", {"query": "气功", "limit": 500})
                )

    anyio.run(main)
    assert [verdict(r)["decision"] for r in out] == ["approved", "rejected", "rejected"]
    assert verdict(out[2])["codes"] == ["tool.args_schema"]
    assert verify_chain(dep.log).records == 3


def _server_pid(config: Path) -> int:
    """The pid of this test's `lingyi serve` child (found by its unique config path)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if str(config).encode() in cmd and b"serve" in cmd and int(stat[1]) == os.getpid():
            return int(entry.name)
    raise AssertionError("server process not found")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_sigterm_mid_session_loses_no_record_and_no_commit_half_made(dep: Deployment) -> None:
    """SIGTERM during a commit: the server exits, the log chain verifies, the repo is whole."""
    done: list[int] = []

    async def main() -> None:
        async with Client(serve_params(dep)) as client:
            with anyio.fail_after(TIMEOUT_S):
                await client.call_tool("search_knowledge", {"query": "气功"})
                pid = _server_pid(dep.config_path)
                args = {"repo_path": "council-app", "message": "docs: notes", "paths": ["NOTES.md"]}
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_call_ignoring_errors, client, "git_commit", args)
                    await anyio.sleep(0.05)
                    os.kill(pid, signal.SIGTERM)
                    while not _gone(pid):
                        await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
                done.append(pid)

    anyio.run(main)
    assert done, "the server did not exit on SIGTERM"
    report = verify_chain(dep.log)
    assert report.ok and report.records >= 1 and not report.unreadable
    assert not (dep.repo / ".git" / "index.lock").exists()
    git(dep.repo, "fsck", "--no-progress")
    head_msg = git(dep.repo, "log", "-1", "--format=%s")
    tools = [line.record["tool_call"]["name"] for line in read_log(dep.log) if line.record]
    assert head_msg != "docs: notes" or "git_commit" in tools  # a commit is never unlogged


async def _call_ignoring_errors(client: Client, tool: str, args: dict[str, Any]) -> None:
    try:
        await client.call_tool(tool, args)
    except Exception:  # the server went away mid-call, as the test intends
        return


# --- a client that dies ---------------------------------------------------------------------

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}
CLIENT_LEAVES = [
    # (how the client leaves, the query of its one call) — zh and en
    ("dies", "气功"),  # its end of our stdout is closed before the call's result is written
    ("dies", "qigong breathing"),
    ("quits", "气功"),  # closes stdin after reading every answer: the ordinary end
    ("quits", "qigong breathing"),
]


def _rpc(server: subprocess.Popen[bytes], id_: int | None, method: str, params: Any) -> None:
    message = {"jsonrpc": "2.0", "method": method, "params": params}
    message.update({} if id_ is None else {"id": id_})
    assert server.stdin is not None
    server.stdin.write(json.dumps(message).encode() + b"\n")
    server.stdin.flush()


def _ping_until_gone(server: subprocess.Popen[bytes]) -> None:
    """Ping until the server exits: each line wakes the SDK's stdin reader (blocked in a
    thread), and once a response could not be written, the next wake-up ends the session.
    Bounded, so a server that never notices fails the test instead of hanging it."""
    import time

    deadline = time.monotonic() + TIMEOUT_S
    for n in itertools.count(3):
        if server.poll() is not None:
            return
        assert time.monotonic() < deadline, "serve kept running after its client died"
        with contextlib.suppress(BrokenPipeError):
            _rpc(server, n, "ping", {})
        time.sleep(0.05)


def _wait_for_records(log: Path, count: int) -> None:
    """Until the log holds ``count`` records (bounded: the test fails rather than hangs)."""
    import time

    deadline = time.monotonic() + TIMEOUT_S
    while not (log.exists() and sum(1 for line in read_log(log) if line.record) >= count):
        assert time.monotonic() < deadline, "the call was never logged"
        time.sleep(0.05)


@pytest.mark.parametrize(("leaves", "query"), CLIENT_LEAVES)
def test_a_client_that_dies_ends_serve_quietly(dep: Deployment, leaves: str, query: str) -> None:
    """A client gone mid-session (its read end of our stdout closed, then its stdin): serve
    logs one warning line on stderr and exits 0, no BrokenPipeError traceback, and the call
    it made is in the log. A client that quits normally: exit 0, no such line. Raw JSON-RPC
    over a pipe, because the SDK's client cannot close its read end and carry on writing."""
    params = serve_params(dep)
    server = subprocess.Popen(
        [params.command, *params.args], env=params.env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert server.stdout is not None and server.stdin is not None
    _rpc(server, 1, "initialize", INIT)
    assert json.loads(server.stdout.readline())["id"] == 1
    _rpc(server, None, "notifications/initialized", {})
    if leaves == "dies":
        server.stdout.close()
    _rpc(server, 2, "tools/call", {"name": "search_knowledge", "arguments": {"query": query}})
    if leaves == "quits":
        assert json.loads(server.stdout.readline())["id"] == 2
    _wait_for_records(dep.log, 1)
    if leaves == "dies":
        _ping_until_gone(server)
    with contextlib.suppress(BrokenPipeError):
        server.stdin.close()
    code = server.wait(TIMEOUT_S)
    err = server.stderr.read().decode() if server.stderr else ""
    assert code == 0 and "Traceback" not in err and "BrokenPipeError" not in err
    assert ("client closed the connection" in err) is (leaves == "dies"), err
    assert verify_chain(dep.log).records == 1
