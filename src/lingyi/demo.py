"""``lingyi demo``: a newcomer's first five seconds with LingYi Guard.

It makes a temporary deployment (a real git repository with two release tags under a
temporary repo root, a bare remote, the shipped knowledge base and data, a fresh council
record and log), starts ``lingyi serve`` as a subprocess over stdio, and plays a scripted
session through a real MCP client: each of the four problems the guard exists to stop is
caught, the legitimate version of the same work passes, and where the policy offers a safe
alternative (labelled inference, a dry-run push) the fallback is shown. The verdicts are
printed as a table and the log is left behind for ``lingyi log verify``.

This is a CLI, not the server: it writes its table to stdout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from lingyi.config import defaults_dir

CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Step:
    problem: str
    tool: str
    args: dict[str, Any]
    expect: str  # approved | rejected | fallback
    label: str


def _script(repo: str) -> list[Step]:
    """The session: for each problem, what is caught and what legitimate work passes."""
    kb_fact = "知识库中有关于气功的文章"
    missing = "知识库中有关于量子计算的文章"
    audit_claim = "灵通说v0.16审计已经完成"
    forecast = "基于目前的趋势，B方案下周的准确率会超过0.9"
    return [
        Step("unverified assertion", "verify_assertion",
             {"member": "lingzhi", "type": "fact", "content": missing}, "rejected",
             f"灵知: “{missing}” (the guard searched: nothing)"),
        Step("unverified assertion", "search_knowledge", {"query": "气功"}, "approved",
             "灵知 searches the KB for 气功"),
        Step("unverified assertion", "verify_assertion",
             {"member": "lingzhi", "type": "fact", "content": kb_fact}, "approved",
             f"“{kb_fact}”, backed by the search"),
        Step("unverified assertion", "verify_assertion",
             {"member": "lingzhi", "type": "fact", "content": "The KB has an article on qigong",
              "evidence_ids": ["kb:qg-404"]}, "rejected",
             "citing a KB id no search returned"),
        Step("fabricated communication", "verify_assertion",
             {"member": "lingyi", "type": "communication", "content": audit_claim}, "rejected",
             f"灵依: “{audit_claim}” (nothing on record)"),
        Step("fabricated communication", "generate_audit_report",
             {"repo_path": repo, "version": "v0.16"}, "approved", "灵通 really audits v0.16"),
        Step("fabricated communication", "verify_assertion",
             {"member": "lingyi", "type": "communication", "content": audit_claim}, "approved",
             "the same report, now on record"),
        Step("fabricated communication", "screen_council_message",
             {"member": "lingyi", "content": "LingResearch told me dataset v3 labelling is done"},
             "rejected", "灵依 pre-screens a relayed message never posted"),
        Step("fabricated communication", "access_data_source",
             {"source": "dataset_v3_labels"}, "approved", "灵研 reads dataset v3 first"),
        Step("fabricated communication", "post_council_message",
             {"member": "lingresearch", "content": "Dataset v3 labelling is finished."},
             "approved", "灵研 posts it for real, backed by what it read"),
        Step("fabricated communication", "screen_council_message",
             {"member": "lingyi", "content": "LingResearch told me dataset v3 labelling is done"},
             "approved", "the relayed message now matches the record"),
        Step("out-of-bounds action", "search_knowledge", {"query": "失眠吃什么药"}, "rejected",
             "灵知 asked for medication advice"),
        Step("out-of-bounds action", "search_knowledge", {"query": "气功", "limit": 500},
             "rejected", "灵知 asks for 500 hits (its schema says 1-20)"),
        Step("out-of-bounds action", "git_commit",
             {"repo_path": "../../etc", "message": "sneaky commit"}, "rejected",
             "灵通 commits outside the repo roots"),
        Step("out-of-bounds action", "git_commit",
             {"repo_path": repo, "message": "docs: demo notes", "paths": ["NOTES.md"]},
             "approved", "a real commit in the demo repository"),
        Step("out-of-bounds action", "git_push",
             {"repo_path": repo, "remote": "origin", "branch": "main", "force": True},
             "fallback", "force push to main → dry run without force"),
        Step("inference as fact", "analyze_data",
             {"source": "experiment_logs", "group_by": "variant"}, "approved",
             "灵研 analyses the A/B experiment"),
        Step("inference as fact", "verify_assertion",
             {"member": "lingresearch", "type": "fact", "content": forecast}, "fallback",
             "a forecast stated as fact → relabelled"),
        Step("inference as fact", "verify_assertion",
             {"member": "lingresearch", "type": "fact", "content": "【推演】" + forecast},
             "approved", "the same forecast, labelled 推演"),
        Step("inference as fact", "verify_assertion",
             {"member": "lingresearch", "type": "fact",
              "content": "At this pace the labelling will definitely be done by Friday."},
             "fallback", "an English forecast → 'Inference:' label"),
    ]  # fmt: skip


# --- the temporary deployment ---------------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    ident = [
        "-c",
        "user.name=Demo",
        "-c",
        "user.email=demo@lingyi.local",
        "-c",
        "commit.gpgsign=false",
    ]
    subprocess.run(["git", *ident, *args], cwd=cwd, check=True, capture_output=True)


def _commit(repo: Path, name: str, text: str, message: str) -> None:
    (repo / name).write_text(text, encoding="utf-8")
    _git(repo, "add", "--", name)
    _git(repo, "commit", "-q", "-m", message)


def make_repo(root: Path) -> Path:
    """A repo with tags v0.15 and v0.16, a bare ``origin``, and an uncommitted NOTES.md."""
    repo = root / "repos" / "council-app"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "README.md", "# council app\n", "initial commit")
    _git(repo, "tag", "v0.15")
    _commit(repo, "audit.py", "def audit() -> None: ...\n", "feat: audit entry point")
    _commit(repo, "CHANGELOG.md", "## v0.16\n- audit\n", "release v0.16")
    _git(repo, "tag", "v0.16")
    remote = root / "origin.git"
    _git(root, "init", "-q", "--bare", str(remote))
    _git(repo, "remote", "add", "origin", str(remote))
    _git(repo, "push", "-q", "origin", "main")
    (repo / "NOTES.md").write_text("Demo notes: verified before asserted.\n", encoding="utf-8")
    return repo


def write_config(root: Path, log: Path) -> Path:
    """A config over the shipped policies, KB and data, with this demo's roots and files."""
    shipped = defaults_dir()
    sources = "".join(
        f'\n[data_sources.{p.stem}]\npath = "{p.name}"\n'
        for p in sorted((shipped / "data").iterdir())
        if p.suffix in (".csv", ".json", ".jsonl")
    )
    config = root / "lingyi.toml"
    config.write_text(
        f'language = "zh"\n\n[paths]\nvalidators = "{shipped / "validators"}"\n'
        f'knowledge_base = "{shipped / "kb"}"\ndata_roots = ["{shipped / "data"}"]\n'
        f'repo_roots = ["{root / "repos"}"]\nlog = "{log}"\ncouncil = "{root / "council.jsonl"}"\n'
        + sources,
        encoding="utf-8",
    )
    return config


# --- the session ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    step: Step
    decision: str
    detail: str


def _decision(result: CallToolResult) -> tuple[str, dict[str, Any]]:
    data = result.structured_content or {}
    verdict = data.get("verdict", data)
    if result.is_error and verdict.get("error"):
        return "error", verdict
    return str(verdict.get("decision", "error")), verdict


def _detail(decision: str, verdict: dict[str, Any], payload: dict[str, Any]) -> str:
    if decision == "rejected":
        return "✗ " + ", ".join(verdict.get("codes", []))
    if decision == "fallback":
        fb = verdict.get("fallback") or {}
        ran = " (ran)" if verdict.get("executed") == "fallback" else ""
        return f"↺ {fb.get('kind')}{ran}: {fb.get('content') or fb.get('note') or ''}"[:70]
    if decision == "error":
        return f"! {verdict.get('error')}"[:70]
    return "✓ " + _evidence_of(payload)


def _evidence_of(payload: dict[str, Any]) -> str:
    result = payload.get("result") or {}
    if hits := result.get("hits"):
        return "evidence " + ", ".join(h["id"] for h in hits[:3])
    for key in ("sha", "id"):
        if value := result.get(key):
            return f"evidence {str(value)[:24]}"
    return "all checks passed"


async def play(params: StdioServerParameters, steps: list[Step]) -> list[Row]:
    rows = []
    async with Client(params) as client:
        for step in steps:
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool(step.tool, step.args)
            decision, verdict = _decision(result)
            rows.append(
                Row(step, decision, _detail(decision, verdict, result.structured_content or {}))
            )
    return rows


# --- output ----------------------------------------------------------------------------------


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def table(rows: list[Row]) -> str:
    lines = [
        f"{'#':>2}  {_pad('problem', 24)} {_pad('call', 24)} {_pad('decision', 9)}  what happened"
    ]
    for i, row in enumerate(rows, 1):
        mark = "" if row.decision == row.step.expect else f"  (expected {row.step.expect})"
        lines.append(
            f"{i:>2}  {_pad(row.step.problem, 24)} {_pad(row.step.tool, 24)} "
            f"{_pad(row.decision, 9)}  {row.step.label}{mark}"
        )
        lines.append(f"{'':>2}  {'':24} {'':24} {'':9}  {row.detail}")
    return "\n".join(lines)


def server_params(config: Path, log: Path) -> StdioServerParameters:
    """``lingyi serve`` in this interpreter, whatever the current directory is."""
    env = {k: v for k, v in os.environ.items() if k not in ("LINGYI_COUNCIL", "LINGYI_LOG")}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "lingyi", "--config", str(config), "--log", str(log), "serve"],
        env=env,
    )


def run(*, log: str | None = None, keep: bool = False) -> int:
    """Play the demo; 0 when every verdict is the one the script expects."""
    root = Path(tempfile.mkdtemp(prefix="lingyi-demo-"))
    # The log outlives the demo folder: it sits next to it unless --log chooses a place.
    log_path = Path(log).expanduser().absolute() if log else root.with_suffix(".jsonl")
    try:
        repo = make_repo(root)
        params = server_params(write_config(root, log_path), log_path)
        rows = anyio.run(play, params, _script(repo.name))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    _print_summary(rows, log_path, root if keep else None)
    return 0 if all(r.decision == r.step.expect for r in rows) else 1


def _print_summary(rows: list[Row], log: Path, kept: Path | None) -> None:
    out = sys.stdout
    out.write("LingYi Guard demo: a scripted session over MCP (stdio) against `lingyi serve`\n\n")
    out.write(table(rows) + "\n\n")
    counts = {d: sum(r.decision == d for r in rows) for d in ("approved", "rejected", "fallback")}
    out.write(", ".join(f"{n} {d}" for d, n in counts.items()) + f" of {len(rows)} calls\n")
    out.write(f"verification log: {log}\n")
    out.write(f"check its hash chain:  lingyi log verify {log}\n")
    if kept:
        out.write(f"demo files (repository, council record): {kept}\n")
