"""The MCP server driven by a real MCP client: in-process, and as a stdio subprocess.

Every guarded tool verifies, then executes only if approved (or runs the fallback
variant), records its evidence in the session ledger and has written the log record
before the result comes back. A rejection is an ``isError`` result with the verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, ResourceTemplateReference

from lingyi.config import Config, load_config
from lingyi.demo import make_repo, write_config
from lingyi.server import GuardApp, build_server, recent_records
from lingyi.vlog import iter_log, verify_chain

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


def deploy(root: Path, extra: str = "") -> Deployment:
    """Make the deployment under ``root``; ``extra`` is appended to its config file."""
    root.mkdir(parents=True, exist_ok=True)
    repo = make_repo(root)
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


def with_client(dep: Deployment, *bodies: Session) -> None:
    """Run each body in its own in-process client connection (its own ledger session)."""

    async def main() -> None:
        app = GuardApp(dep.config())
        try:
            server = build_server(app)
            for body in bodies:
                async with Client(server) as client:
                    with anyio.fail_after(TIMEOUT_S):
                        await body(client)
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
    assert "bench_search_knowledge" not in seen  # the unguarded twin is benchmark-only


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
    """A rejected git_commit leaves HEAD alone; an approved one makes a real commit."""
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
            last = list(iter_log(dep.log))[-1].record
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
    assert set(got[1]) == {"灵依", "灵知", "灵通", "灵研"}
    assert set(got[2]) == {"LingYi", "LingYan", "lingyi", "lingyan"}  # prefixes match any case


def test_stats_tool_and_weekly_report_when_installed(dep: Deployment) -> None:
    """verification_stats and lingyi://report/weekly exist when their modules do."""
    stats = _installed("lingyi.stats", "stats_for")
    report = _installed("lingyi.report", "weekly_report_markdown")
    if not (stats or report):
        pytest.skip("neither lingyi.stats nor lingyi.report is installed yet")
    out: dict[str, Any] = {}

    async def body(client: Client) -> None:
        await client.call_tool("search_knowledge", {"query": "气功"})
        names = {t.name for t in (await client.list_tools()).tools}
        out["names"] = names
        if stats:
            out["stats"] = await client.call_tool("verification_stats", {"days": 7})
        if report:
            out["report"] = (await client.read_resource("lingyi://report/weekly")).contents[0]

    with_client(dep, body)
    if stats:
        assert "verification_stats" in out["names"] and not out["stats"].is_error
        assert out["stats"].structured_content
    if report:
        assert out["report"].text.strip()


def _installed(module: str, name: str) -> bool:
    import importlib

    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


# --- stdio subprocess ------------------------------------------------------------------------


def serve_params(dep: Deployment, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    args = ["-m", "lingyi", "--config", str(dep.config_path), "serve", *extra]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def test_stdio_subprocess_serves_guarded_tools(dep: Deployment) -> None:
    """`lingyi serve` over stdio: protocol on stdout, a guarded search and a rejection work."""
    out: list[CallToolResult] = []

    async def main() -> None:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(serve_params(dep)) as client:
                out.append(await client.call_tool("search_knowledge", {"query": "气功"}))
                out.append(
                    await client.call_tool("search_knowledge", {"query": "头痛应该开什么药"})
                )

    anyio.run(main)
    assert [verdict(r)["decision"] for r in out] == ["approved", "rejected"]
    assert verify_chain(dep.log).records == 2


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
    tools = [line.record["tool_call"]["name"] for line in iter_log(dep.log) if line.record]
    assert head_msg != "docs: notes" or "git_commit" in tools  # a commit is never unlogged


async def _call_ignoring_errors(client: Client, tool: str, args: dict[str, Any]) -> None:
    try:
        await client.call_tool(tool, args)
    except Exception:  # the server went away mid-call, as the test intends
        return
