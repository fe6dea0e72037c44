"""tool_validation: the state of a git repository before 灵通 (LingFlow) touches it.

- ``git.clean_state``: no commit, branch or push while a merge or rebase is in progress or
  HEAD is detached (the work would land somewhere nobody meant);
- ``git.protected_force``: a force push to a protected branch is never run; the safe
  alternative offered is the same push as a dry run without force;
- ``git.paths_inside``: the files a commit stages stay inside the repository.

These checks only read the repository. A path the roots refuse is left to
``tool.path_allowed`` (it always runs), so each problem is reported once.
"""

from __future__ import annotations

import os
from pathlib import Path

import git

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.errors import BackendError
from lingyi.models import Fallback, ToolCall
from lingyi.paths import PathOutsideRoots, resolve_inside


class NoParams(CheckParams):
    pass


class ProtectedParams(CheckParams):
    protected: list[str] = ["main", "master"]


def _repo_dir(ctx: CheckContext) -> Path | None:
    """The real repository folder named by ``repo_path``, or None when the roots refuse it."""
    call = ctx.assertion.tool_call
    value = call.arguments.get("repo_path") if call else None
    if not isinstance(value, str):
        return None
    try:
        return resolve_inside(value, ctx.services.repo_roots)
    except PathOutsideRoots:
        return None


def _open(ctx: CheckContext) -> git.Repo | None:
    from lingyi.backends.git import open_repo  # the backend owns how a repo is opened

    folder = _repo_dir(ctx)
    if folder is None:
        return None
    try:
        return open_repo(folder, ctx.services.repo_roots)
    except BackendError:
        return None


def _state_problem(ctx: CheckContext, repo: git.Repo) -> tuple[str, str] | None:
    """(reason, recommendation) for an unsafe state, in the order git itself reports them."""
    from lingyi.backends.git import repo_state

    state = repo_state(repo)
    if state.merging:
        return ctx.t("仓库正在合并中", "a merge is in progress"), "git merge --continue | --abort"
    if state.rebasing:
        return ctx.t("仓库正在变基中", "a rebase is in progress"), "git rebase --continue | --abort"
    if state.detached:
        return ctx.t("HEAD 处于游离状态", "HEAD is detached"), ctx.t(
            "请先检出一个分支（git switch <branch>）",
            "check out a branch first (git switch <branch>)",
        )
    return None


@register("git.clean_state", NoParams)
def clean_state(ctx: CheckContext, params: NoParams) -> Outcome:
    """No commit, branch or push mid-merge, mid-rebase or on a detached HEAD."""
    repo = _open(ctx)
    if repo is None:
        return ok(
            ctx.t("无可检查的仓库（路径另行检查）", "no repository to inspect (path checked apart)")
        )
    with repo:
        problem = _state_problem(ctx, repo)
    if problem is None:
        return ok(ctx.t("仓库状态正常", "repository is on a branch, nothing in progress"))
    reason, recommendation = problem
    return fail(
        ctx.t(f"{reason}，拒绝操作", f"{reason}; refusing to operate"),
        ctx.t(
            f"先处理仓库状态：{recommendation}", f"settle the repository first: {recommendation}"
        ),
    )


@register("git.protected_force", ProtectedParams)
def protected_force(ctx: CheckContext, params: ProtectedParams) -> Outcome:
    """A force push to a protected branch falls back to a dry run without force."""
    call = ctx.assertion.tool_call
    assert call is not None  # tool checks run only with a tool call
    branch = call.arguments.get("branch")
    if call.arguments.get("force") is not True or branch not in params.protected:
        return ok(ctx.t("不是对受保护分支的强制推送", "not a force push to a protected branch"))
    safe = ToolCall(name=call.name, arguments={**call.arguments, "force": False, "dry_run": True})
    return fail(
        ctx.t(f"禁止强制推送受保护分支 {branch}", f"force push to protected branch {branch!r}"),
        ctx.t(
            "改为不带 force 的 dry_run 推送；确需改写历史请走人工评审",
            "push with dry_run and without force; rewriting a protected branch needs a human review",
        ),
        Fallback(
            kind="dry_run",
            tool_call=safe,
            note=ctx.t("只演练推送，不带 force", "dry-run push without force"),
        ),
        branch=branch,
    )


@register("git.paths_inside", NoParams)
def paths_inside(ctx: CheckContext, params: NoParams) -> Outcome:
    """Files a commit stages resolve inside the repository (``..``, absolute, symlinks)."""
    call, folder = ctx.assertion.tool_call, _repo_dir(ctx)
    paths = call.arguments.get("paths") if call else None
    if folder is None or not isinstance(paths, list):
        return ok(ctx.t("无需检查文件路径", "no file paths to check"))
    outside = [p for p in paths if not _inside(folder, str(p))]
    if not outside:
        return ok(ctx.t("文件都在仓库内", "every file is inside the repository"))
    return fail(
        ctx.t(
            f"文件不在仓库内：{', '.join(outside)}", f"outside the repository: {', '.join(outside)}"
        ),
        ctx.t("只提交仓库内的相对路径", "commit paths relative to, and inside, the repository"),
        outside=outside,
    )


def _inside(folder: Path, path: str) -> bool:
    candidate = folder / path  # an absolute path replaces the folder here
    lexical = Path(os.path.normpath(candidate))
    if not lexical.is_relative_to(folder) or ".git" in lexical.relative_to(folder).parts[:1]:
        return False
    try:
        resolve_inside(candidate, [folder])  # follows symlinks that point out
    except PathOutsideRoots:
        return False
    return True
