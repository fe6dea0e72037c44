"""git.clean_state, git.protected_force and git.paths_inside against real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from lingyi.checks._registry import Services
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, VerificationResult
from lingyi.policy import PolicySet


def git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(
        ["git", *ident, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    """A repo root holding ``app`` (on main, one commit; the branches the pushes name exist,
    as git.branch_exists wants) and an outside file."""
    repo = tmp_path / "repos" / "app"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "initial")
    for branch in ("feature", "master", "release"):
        git(repo, "branch", branch)
    (tmp_path / "outside.txt").write_text("secret\n")
    (repo / "out-link").symlink_to(tmp_path / "outside.txt")
    return tmp_path / "repos"


def run(
    policies: PolicySet, roots: Path, tool: str, lang: str = "en", **args: Any
) -> VerificationResult:
    layer = ConstraintLayer(
        policies, MemoryCouncil(), services=Services(repo_roots=[roots]), language=lang
    )
    call = {"name": tool, "arguments": {"repo_path": "app", **args}}
    return layer.verify(
        Assertion.model_validate({"member": "灵通", "type": "action", "tool_call": call}), Ledger()
    )


def failed(result: VerificationResult) -> list[str]:
    return [c.code for c in result.checks if not c.passed]


@pytest.mark.parametrize(
    ("state", "tool", "args"),
    [
        ("merge", "git_commit", {"message": "mid merge", "add_all": True}),
        ("rebase", "git_commit", {"message": "mid rebase", "add_all": True}),
        ("detached", "git_commit", {"message": "detached", "add_all": True}),
        ("merge", "git_branch", {"name": "topic"}),
        ("detached", "git_push", {"remote": "origin", "branch": "main"}),
    ],
)
def test_unsafe_repository_states_are_rejected(
    policies: PolicySet, roots: Path, state: str, tool: str, args: dict[str, Any]
) -> None:
    """Commit, branch and push refuse mid-merge, mid-rebase and detached HEAD."""
    repo = roots / "app"
    if state == "merge":
        (repo / ".git" / "MERGE_HEAD").write_text(git(repo, "rev-parse", "HEAD") + "\n")
    elif state == "rebase":
        (repo / ".git" / "rebase-merge").mkdir()
    else:
        git(repo, "checkout", "-q", "--detach")
    result = run(policies, roots, tool, **args)
    assert result.decision == "rejected" and "git.clean_state" in failed(result)
    assert result.recommendation


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("git_commit", {"message": "docs: a change", "add_all": True}),
        ("git_commit", {"message": "docs: a change", "paths": ["a.txt", "sub/../a.txt"]}),
        ("git_branch", {"name": "feature/x"}),
        ("git_push", {"remote": "origin", "branch": "feature", "force": True}),
        ("git_push", {"remote": "origin", "branch": "main", "dry_run": True}),
    ],
)
def test_legitimate_git_work_passes(
    policies: PolicySet, roots: Path, tool: str, args: dict[str, Any]
) -> None:
    """A clean repo on a branch, paths inside it, force only to an unprotected branch: approved."""
    result = run(policies, roots, tool, **args)
    assert result.decision == "approved", result.reason


@pytest.mark.parametrize("branch", ["main", "master", "release"])
def test_force_push_to_protected_branch_falls_back_to_dry_run(
    policies: PolicySet, roots: Path, branch: str
) -> None:
    """The fallback is the same push, as a dry run, without force."""
    result = run(policies, roots, "git_push", remote="origin", branch=branch, force=True)
    assert result.decision == "fallback" and failed(result) == ["git.protected_force"]
    assert result.fallback and result.fallback.kind == "dry_run" and result.fallback.tool_call
    assert result.fallback.tool_call.arguments == {
        "repo_path": "app", "remote": "origin", "branch": branch, "force": False, "dry_run": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    "path", ["../outside.txt", "../../outside.txt", "/etc/passwd", "out-link", ".git/config"]
)
def test_commit_paths_must_stay_inside_the_repository(
    policies: PolicySet, roots: Path, path: str
) -> None:
    """``..``, absolute paths, symlinks pointing out and .git are rejected, naming the path."""
    result = run(policies, roots, "git_commit", message="escape", paths=[path])
    assert result.decision == "rejected" and "git.paths_inside" in failed(result)
    assert path in result.reason


def test_git_checks_leave_refused_paths_to_path_allowed(policies: PolicySet, roots: Path) -> None:
    """A repo path outside the roots is one failure (tool.path_allowed), not three."""
    layer = ConstraintLayer(
        policies, MemoryCouncil(), services=Services(repo_roots=[roots]), language="zh"
    )
    call = {"name": "git_commit", "arguments": {"repo_path": "../..", "message": "越界提交"}}
    result = layer.verify(
        Assertion.model_validate({"member": "lingflow", "type": "action", "tool_call": call}),
        Ledger(),
    )
    assert failed(result) == ["tool.path_allowed"]


PUSH_MAIN = {"remote": "origin", "branch": "main", "force": True}
COMMIT_OUT = {"message": "m", "paths": ["../outside.txt"]}
BRANCH = {"name": "topic"}
# (language, mid-merge?, tool, arguments, failed check, where the text is, part of the text)
WORDING = [
    ("zh", False, "git_push", PUSH_MAIN, "git.protected_force", "reason", "禁止强制推送受保护分支 main"),
    ("en", False, "git_push", PUSH_MAIN, "git.protected_force", "reason", "protected branch 'main'"),
    ("zh", False, "git_push", PUSH_MAIN, "git.protected_force", "note", "只演练推送，不带 force"),
    ("en", False, "git_push", PUSH_MAIN, "git.protected_force", "note", "dry-run push without force"),
    ("zh", False, "git_commit", COMMIT_OUT, "git.paths_inside", "reason", "文件不在仓库内：../outside.txt"),
    ("en", False, "git_commit", COMMIT_OUT, "git.paths_inside", "reason", "outside the repository: ../outside.txt"),
    ("zh", True, "git_branch", BRANCH, "git.clean_state", "reason", "仓库正在合并中，拒绝操作"),
    ("en", True, "git_branch", BRANCH, "git.clean_state", "reason", "a merge is in progress; refusing"),
    ("zh", True, "git_branch", BRANCH, "git.clean_state", "recommendation", "先处理仓库状态：git merge --continue"),
    ("en", True, "git_branch", BRANCH, "git.clean_state", "recommendation", "settle the repository first: git merge"),
]  # fmt: skip


@pytest.mark.parametrize(("lang", "merging", "tool", "args", "code", "where", "text"), WORDING)
def test_git_check_texts_are_in_the_configured_language(
    policies: PolicySet,
    roots: Path,
    lang: str,
    merging: bool,
    tool: str,
    args: dict[str, Any],
    code: str,
    where: str,
    text: str,
) -> None:
    """Reasons, recommendations and the dry-run note come from the catalog of the language."""
    repo = roots / "app"
    if merging:
        (repo / ".git" / "MERGE_HEAD").write_text(git(repo, "rev-parse", "HEAD") + "\n")
    result = run(policies, roots, tool, lang, **args)
    check = next(c for c in result.checks if c.code == code)
    found = (
        (check.fallback.note if check.fallback else None)
        if where == "note"
        else getattr(check, where)
    )
    assert text in found


def test_an_unsafe_state_is_named_in_the_detail(policies: PolicySet, roots: Path) -> None:
    """A client reads which state blocked the work from the detail, not from the text."""
    git(roots / "app", "checkout", "-q", "--detach")
    result = run(policies, roots, "git_commit", message="m", add_all=True)
    check = next(c for c in result.checks if c.code == "git.clean_state")
    assert check.detail["state"] == "detached"
