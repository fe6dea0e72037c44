"""tool_validation: the state of a git repository before a git tool touches it.

- ``git.clean_state``: no commit, branch or push while a merge or rebase is in progress or
  HEAD is detached (the work would land somewhere nobody meant);
- ``git.protected_force``: a force push to a protected branch is never run; the safe
  alternative offered is the same push as a dry run without force;
- ``git.paths_inside``: the files a commit stages stay inside the repository;
- ``git.branch_exists``: the branch a push names exists (else the closest one that does).

These checks only read the repository. A path the roots refuse is left to
``tool.path_allowed`` (it always runs), so each problem is reported once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.errors import BackendError
from lingyi.models import Fallback, ToolCall
from lingyi.paths import PathOutsideRoots, resolve_inside
from lingyi.policy.closest import closest

if TYPE_CHECKING:  # GitPython loads with the git backend, when a git check first runs
    import git


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


def _unsafe_state(repo: git.Repo) -> str | None:
    """The message name of an unsafe state, in the order git itself reports them."""
    from lingyi.backends.git import repo_state

    state = repo_state(repo)
    unsafe = {"merging": state.merging, "rebasing": state.rebasing, "detached": state.detached}
    return next((name for name, present in unsafe.items() if present), None)


@register("git.clean_state", NoParams)
def clean_state(ctx: CheckContext, params: NoParams) -> Outcome:
    """No commit, branch or push mid-merge, mid-rebase or on a detached HEAD."""
    repo = _open(ctx)
    if repo is None:
        return ok(ctx.msg("no_repo"))
    with repo:
        state = _unsafe_state(repo)
    if state is None:
        return ok(ctx.msg("ok"))
    return fail(
        ctx.msg("fail", state=ctx.msg(state)),
        ctx.msg("hint", action=ctx.msg(f"{state}_hint")),
        state=state,
    )


@register("git.protected_force", ProtectedParams)
def protected_force(ctx: CheckContext, params: ProtectedParams) -> Outcome:
    """A force push to a protected branch falls back to a dry run without force."""
    call = ctx.assertion.tool_call
    assert call is not None  # tool checks run only with a tool call
    branch = call.arguments.get("branch")
    if call.arguments.get("force") is not True or branch not in params.protected:
        return ok(ctx.msg("ok"))
    safe = ToolCall(name=call.name, arguments={**call.arguments, "force": False, "dry_run": True})
    return fail(
        ctx.msg("fail", branch=branch),
        ctx.msg("hint"),
        Fallback(kind="dry_run", tool_call=safe, note=ctx.msg("dry_run")),
        branch=branch,
    )


class BranchParams(CheckParams):
    field: str = "branch"  # the argument that names an existing local branch


@register("git.branch_exists", BranchParams)
def branch_exists(ctx: CheckContext, params: BranchParams) -> Outcome:
    """The branch a call names exists in the repository; else the closest one that does."""
    call = ctx.assertion.tool_call
    branch = call.arguments.get(params.field) if call else None
    repo = _open(ctx) if isinstance(branch, str) else None
    if repo is None:  # no branch named, or no repository: tool.path_allowed says why
        return ok(ctx.msg("nothing"))
    with repo:
        names = [h.name for h in repo.heads]
    if branch in names:
        return ok(ctx.msg("ok", branch=branch))
    near = closest(branch, names)
    problem = {"field": params.field, "kind": "branch", "value": branch, "allowed": names}
    hint = ctx.msg("hint", field=params.field, branches=", ".join(names) or "-")
    hint += ctx.msg("closest", field=params.field, branch=near) if near else ""
    return fail(ctx.msg("fail", branch=branch), hint, problems=[problem | {"closest": near}])


@register("git.paths_inside", NoParams)
def paths_inside(ctx: CheckContext, params: NoParams) -> Outcome:
    """Files a commit stages resolve inside the repository (``..``, absolute, symlinks)."""
    call, folder = ctx.assertion.tool_call, _repo_dir(ctx)
    paths = call.arguments.get("paths") if call else None
    if folder is None or not isinstance(paths, list):
        return ok(ctx.msg("no_paths"))
    outside = [p for p in paths if not _inside(folder, str(p))]
    if not outside:
        return ok(ctx.msg("ok"))
    return fail(ctx.msg("fail", paths=", ".join(outside)), ctx.msg("hint"), outside=outside)


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
