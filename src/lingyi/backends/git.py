"""Git backend: the real operations behind the guarded git tools.

No guard logic and no member names live here: the constraint layer decides whether an operation may run.
This module is still the last line before the repository, so it refuses unsafe states
on its own (detached HEAD, mid-merge or mid-rebase, paths escaping the repo, force pushes
to protected branches) and raises ``BackendError`` with a message naming what was wrong.

Commits are written as objects first and the branch ref is moved last, with a
compare-and-swap (``git update-ref <ref> <new> <old>``), so a failure or a concurrent
writer never leaves a half-made commit on the branch.

A repository is opened once, by its walked path, and held: no symbolic link may lie between
the root and it (nor be its ``.git``), its folder and ``.git`` are kept open and everything acts
through them (:class:`PinnedRepo`), and every write checks the folders again, so a name inside
the roots swapped for a link between the guard's check and the commit cannot send the commit
to a repository outside the roots.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import git
from git.db import GitCmdObjectDB
from git.exc import BadName, GitError, InvalidGitRepositoryError, NoSuchPathError

from lingyi._logging import get_logger
from lingyi.backends.git_results import (
    AuditCommit,
    AuditReport,
    BranchResult,
    CommitResult,
    FileChange,
    PushResult,
    RepoState,
)
from lingyi.backends.pin import PinError, PinnedDirs, names_below, pin
from lingyi.errors import BackendError
from lingyi.paths import PathOutsideRoots, resolve_inside

log = get_logger(__name__)

_VERSION_RE = re.compile(r"v(\d+)\.(\d+)(?:\.(\d+))?")
_NULL_SHA = "0" * 40
# A push talks to the network: never let it hang on a credential prompt or forever.
_PUSH_ENV = {"GIT_TERMINAL_PROMPT": "0"}
_PUSH_TIMEOUT_S = 120.0


# ---------------------------------------------------------------- results
# (in lingyi.backends.git_results, so that the server's tool types need no GitPython)

# ---------------------------------------------------------------- helpers


P = ParamSpec("P")
T = TypeVar("T")


def _refusing(op: Callable[P, T]) -> Callable[P, T]:
    """Git failing where it should not (a folder gone, a ref unreadable mid-swap) is the
    operation's refusal with git's words, never an unexpected error of the tool."""

    @functools.wraps(op)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return op(*args, **kwargs)
        except BackendError:
            raise
        except (GitError, OSError, ValueError, LookupError) as exc:  # GitPython reading junk
            raise BackendError(f"git {op.__name__} failed: {type(exc).__name__}: {exc}") from exc

    return run


def _git(repo: git.Repo, cmd: str, *args: str, **kwargs: Any) -> str:
    """Run ``git <cmd> <args>``; a non-zero exit becomes ``BackendError`` with git's words."""
    status, out, err = getattr(repo.git, cmd)(
        *args, with_extended_output=True, with_exceptions=False, **kwargs
    )
    if status != 0:
        message = (str(err).strip() or str(out).strip()) or f"exit code {status}"
        raise BackendError(f"git {cmd.replace('_', '-')} failed: {message}")
    return str(out)


def _root(repo: git.Repo) -> Path:
    if repo.working_tree_dir is None:
        raise BackendError(f"{repo.git_dir} is a bare repository")
    return Path(repo.working_tree_dir).resolve()


def _head_sha(repo: git.Repo) -> str | None:
    # An unborn branch (no commit yet) has a symbolic HEAD that resolves to nothing.
    return repo.head.commit.hexsha if repo.head.is_valid() else None


def _message(c: git.Commit) -> str:
    text = c.message
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else text


def _subject(c: git.Commit) -> str:
    return _message(c).split("\n", 1)[0]


def _resolve_commit(repo: git.Repo, rev: str) -> git.Commit:
    try:
        return repo.commit(rev)
    except (BadName, ValueError, IndexError) as exc:
        raise BackendError(f"{rev!r} does not name a commit in {_root(repo)}") from exc


# ---------------------------------------------------------------- open / state


def _why_not_repo(real: Path) -> str:
    try:
        git.Repo(real, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        return "not a git repository"
    return "not the top of a git work tree"


def _why_no_dotgit(real: Path) -> str:
    """Why a folder with no ``.git`` folder is not a work tree (read only, to word the refusal)."""
    try:
        repo = git.Repo(real)
    except (InvalidGitRepositoryError, NoSuchPathError):
        return _why_not_repo(real)
    with repo:
        return "is a bare repository, not a work tree" if repo.bare else _why_not_repo(real)


class PinnedRepo(git.Repo):
    """A work tree reached through its held folders (:mod:`lingyi.backends.pin`).

    GitPython and every git process it starts act on the folder and the ``.git`` that
    :func:`open_repo` checked (on Linux through ``/proc/<pid>/fd``), so a name inside the
    roots swapped for a link afterwards cannot send a commit elsewhere; where the platform
    cannot hold folders, each writing step checks the folders again (:func:`_still_pinned`).
    """

    pins: PinnedDirs | None = None

    def close(self) -> None:
        super().close()
        if self.pins is not None:
            self.pins.close()


def _names_below(path: str | Path, real: Path, roots: Sequence[Path]) -> tuple[Path, list[str]]:
    """The root and the names below it that ``path`` walks through; refused when ``path``
    reaches the roots only through a link."""
    if (found := names_below(path, roots)) is None:
        raise BackendError(
            f"{path}: reaches the roots through a symbolic link ({real}); {_NO_LINKS}"
        )
    return found


_NO_LINKS = (
    "the git tools refuse symbolic links inside the repository roots, because a link can be "
    "swapped between the check and the commit"
)


def _pin_refusal(path: str | Path, real: Path, exc: PinError) -> BackendError:
    if exc.problem == "link":
        return BackendError(f"{path}: {exc.path} is a symbolic link; {_NO_LINKS}")
    if exc.problem == "changed":
        return BackendError(f"{path}: a folder was swapped while it was opened ({exc.path})")
    if exc.path.name != ".git" and exc.problem == "missing":
        # The real path exists (checked first): only a link on the way leads to it.
        return BackendError(f"{path}: reaches {real} only through a symbolic link; {_NO_LINKS}")
    if exc.path.name != ".git":
        return BackendError(f"{path}: {exc.path} is not a folder ({real})")
    if exc.problem == "missing":
        return BackendError(f"{path}: {_why_no_dotgit(real)} ({real})")
    return BackendError(
        f"{path}: its .git is a file (a linked worktree or a submodule); the git tools act only "
        f"on a repository whose .git is a folder ({real})"
    )


def _pin(path: str | Path, real: Path, roots: Sequence[Path]) -> PinnedDirs:
    """Hold the repository folder and its ``.git``, walked from the root without links."""
    root, names = _names_below(path, real, roots)
    try:
        pins = pin(root, [*names, ".git"], keep=2)
    except PinError as exc:
        raise _pin_refusal(path, real, exc) from exc
    if not os.path.samestat(os.stat(pins.held[0]), os.stat(real)):
        pins.close()  # ``..`` after a link: the names written lead elsewhere than the path
        raise BackendError(f"{path}: passes through a symbolic link ({real}); {_NO_LINKS}")
    return pins


def _use_held(repo: PinnedRepo, path: str | Path, real: Path) -> None:
    """From here on, act through the held ``.git``: index, refs and objects in this process,
    and ``GIT_DIR``/``GIT_WORK_TREE`` for the git processes it starts."""
    assert repo.pins is not None
    work, git_dir = repo.pins.held
    if repo.bare or repo.working_tree_dir is None:
        raise BackendError(f"{path}: is a bare repository, not a work tree ({real})")
    if os.path.normpath(repo.working_tree_dir) != os.path.normpath(work):
        raise BackendError(f"{path}: not the top of a git work tree ({real})")
    repo.git_dir = git_dir
    repo.git.update_environment(GIT_DIR=git_dir, GIT_WORK_TREE=work)
    repo.odb = GitCmdObjectDB(os.path.join(git_dir, "objects"), repo.git)
    _refuse_redirects(repo, path, real)


def _refuse_redirects(repo: git.Repo, path: str | Path, real: Path) -> None:
    """A ``.git`` that sends git elsewhere: refs and objects from another repository
    (``commondir``), or another work tree (``core.worktree``)."""
    if os.path.exists(os.path.join(repo.git_dir, "commondir")):
        raise BackendError(f"{path}: its .git takes refs from another repository ({real})")
    with repo.config_reader("repository") as config:
        if config.has_option("core", "worktree"):
            raise BackendError(f"{path}: its core.worktree names another work tree ({real})")


@_refusing  # where folders are not held, a swap mid-open makes GitPython raise its own errors
def open_repo(path: str | Path, roots: Sequence[Path]) -> PinnedRepo:
    """Open the git work tree at ``path``, which must lie inside ``roots`` and be its top.

    No symbolic link may lie between the root and the repository (or be its ``.git``); the
    repository is held open as it was checked, and checked again before each write.
    """
    try:
        real = resolve_inside(path, roots)
    except PathOutsideRoots as exc:
        raise BackendError(f"repository path refused: {exc}") from exc
    if not real.is_dir():
        raise BackendError(f"{path}: no such directory ({real})")
    pins = _pin(path, real, roots)
    try:
        repo = PinnedRepo(pins.held[0])
        repo.pins = pins
        _use_held(repo, path, real)
        _still_pinned(repo, "opening it")
    except BaseException:
        pins.close()
        raise
    return repo


def _still_pinned(repo: git.Repo, step: str) -> None:
    """Refuse ``step`` when a folder of the repository is no longer the one opened."""
    pins = getattr(repo, "pins", None)
    if isinstance(pins, PinnedDirs) and (moved := pins.changed()) is not None:
        raise BackendError(
            f"{moved} changed since the repository was opened (a folder inside the roots was "
            f"swapped or moved); {step} refused"
        )


@_refusing
def repo_state(repo: git.Repo) -> RepoState:
    """Snapshot branch, HEAD and in-progress operations of ``repo``."""
    git_dir = Path(repo.git_dir)
    detached = repo.head.is_detached
    return RepoState(
        path=str(_root(repo)),
        branch=None if detached else repo.head.reference.name,
        detached=detached,
        dirty=repo.is_dirty(index=True, working_tree=True, untracked_files=False),
        untracked=list(repo.untracked_files),
        merging=(git_dir / "MERGE_HEAD").exists(),
        rebasing=(git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists(),
        head_sha=_head_sha(repo),
    )


def _refuse_unsafe_state(state: RepoState) -> str:
    """Return the current branch, or refuse states where a commit would go astray."""
    # In-progress operations first: a rebase also detaches HEAD, and is the real reason.
    if state.merging:
        raise BackendError(f"{state.path}: a merge is in progress; finish or abort it first")
    if state.rebasing:
        raise BackendError(f"{state.path}: a rebase is in progress; finish or abort it first")
    if state.detached or state.branch is None:
        raise BackendError(f"{state.path}: HEAD is detached; check out a branch first")
    return state.branch


# ---------------------------------------------------------------- commit


def _relative_inside(root: Path, path: str) -> str:
    """Return ``path`` relative to ``root``, refusing anything that leaves the repo."""
    candidate = root / path  # an absolute ``path`` replaces ``root`` here
    lexical = Path(os.path.normpath(candidate))
    if not lexical.is_relative_to(root):
        raise BackendError(f"path {path!r} is outside the repository {root}")
    try:
        # Catches a symlink (file or directory) inside the repo that points out of it.
        resolve_inside(candidate, [root])
    except PathOutsideRoots as exc:
        raise BackendError(f"path {path!r} refused: {exc}") from exc
    rel = lexical.relative_to(root)
    if rel.parts and rel.parts[0] == ".git":
        raise BackendError(f"path {path!r} is inside the .git directory")
    return rel.as_posix()


def _stage(repo: git.Repo, paths: Sequence[str] | None, add_all: bool) -> None:
    # `git add` (not IndexFile.add) so .gitignore is honoured and deletions are staged.
    if add_all:
        _git(repo, "add", "--all")
    if paths:
        rel = [_relative_inside(_root(repo), p) for p in paths]
        _git(repo, "add", "--", *rel)


def _has_staged(repo: git.Repo, index: git.IndexFile, head_sha: str | None) -> bool:
    if head_sha is None:
        return bool(index.entries)
    return bool(index.write_tree().binsha != repo.head.commit.tree.binsha)


def _changed_files(repo: git.Repo, sha: str) -> list[str]:
    out = _git(repo, "diff_tree", "--no-commit-id", "--name-only", "-r", "--root", "-z", sha)
    return [name for name in out.split("\0") if name]


def _write_commit(
    repo: git.Repo, index: git.IndexFile, message: str, head_sha: str | None, actor: git.Actor
) -> git.Commit:
    """Write the commit object only; HEAD is not touched here."""
    parents = [repo.commit(head_sha)] if head_sha else []
    try:
        return index.commit(
            message, parent_commits=parents, head=False, author=actor, committer=actor
        )
    except GitError as exc:
        raise BackendError(f"commit failed before the branch was updated: {exc}") from exc


def _landed(repo: git.Repo, what: str) -> None:
    """After a write, a folder that changed while it ran: held folders mean the write went
    to the repository checked (logged); otherwise it may have followed the swapped name."""
    pins = getattr(repo, "pins", None)
    moved = pins.changed() if isinstance(pins, PinnedDirs) else None
    if moved is None or pins is None:
        return
    if pins.through_fds:
        log.warning("git.swapped_during_write", what=what, folder=str(moved), kept=pins.held[0])
        return
    raise BackendError(
        f"{what} was written, but {moved} changed while it was written (a folder inside the "
        "roots was swapped); check where it went"
    )


def _move_branch(repo: git.Repo, branch: str, new: str, old: str | None, subject: str) -> None:
    # Compare-and-swap: refuses if another writer moved the branch since we read it.
    reflog = f"commit{'' if old else ' (initial)'}: {subject}"
    _git(repo, "update_ref", "-m", reflog, f"refs/heads/{branch}", new, old or _NULL_SHA)


@_refusing
def commit(
    repo: git.Repo,
    message: str,
    *,
    paths: Sequence[str] | None = None,
    add_all: bool = False,
    author: git.Actor | None = None,
) -> CommitResult:
    """Stage ``paths`` (or everything with ``add_all``) and commit on the current branch.

    ``author`` (also the committer) is who the caller says does the work, e.g. the member that
    owns the tool; None is the identity git itself is configured with for this repository.
    """
    if not message.strip():
        raise BackendError("commit message is empty")
    state = repo_state(repo)
    branch = _refuse_unsafe_state(state)
    _still_pinned(repo, "staging")
    _stage(repo, paths, add_all)
    index = repo.index  # a fresh read: `git add` above changed the file on disk
    if not _has_staged(repo, index, state.head_sha):
        raise BackendError(f"{state.path}: nothing to commit on {branch}")
    actor = author or git.Actor.committer(repo.config_reader())
    _still_pinned(repo, "the commit")
    new = _write_commit(repo, index, message, state.head_sha, actor)
    _still_pinned(repo, "moving the branch")
    _move_branch(repo, branch, new.hexsha, state.head_sha, _subject(new))
    _landed(repo, f"commit {new.hexsha} on {branch}")
    files = _changed_files(repo, new.hexsha)
    log.info("git.commit", repo=state.path, branch=branch, sha=new.hexsha, files=len(files))
    return CommitResult(
        # The message as stored: a commit-msg hook may have rewritten it.
        sha=new.hexsha,
        short_sha=new.hexsha[:12],
        branch=branch,
        message=_message(new),
        files=files,
    )


# ---------------------------------------------------------------- branch


def _check_branch_name(repo: git.Repo, name: str) -> None:
    if not name or name.startswith("-"):
        raise BackendError(f"invalid branch name {name!r}")
    status, out, _ = repo.git.check_ref_format(
        "--branch", name, with_extended_output=True, with_exceptions=False
    )
    # `--branch` expands `@{-1}` and the like; only a name that is itself valid passes.
    if status != 0 or str(out).strip() != name:
        raise BackendError(f"invalid branch name {name!r} (git check-ref-format --branch)")


@_refusing
def branch(repo: git.Repo, name: str, *, start_point: str | None = None) -> BranchResult:
    """Create branch ``name`` at ``start_point`` (default HEAD) without checking it out."""
    _check_branch_name(repo, name)
    if name in {h.name for h in repo.heads}:
        raise BackendError(f"branch {name!r} already exists")
    if start_point is None and _head_sha(repo) is None:
        raise BackendError("HEAD has no commit yet; nothing to branch from")
    target = _resolve_commit(repo, start_point or "HEAD")
    _still_pinned(repo, "creating the branch")
    head = repo.create_head(name, target.hexsha, logmsg=f"branch: Created from {target.hexsha}")
    _landed(repo, f"branch {name}")
    log.info("git.branch", repo=str(_root(repo)), name=name, sha=target.hexsha)
    return BranchResult(name=head.name, sha=target.hexsha)


# ---------------------------------------------------------------- push


def _push_summary(out: str) -> tuple[bool, str]:
    """Parse ``git push --porcelain``: (any ref rejected, human summary of ref lines)."""
    lines = [line.split("\t") for line in out.splitlines() if "\t" in line]
    rejected = any(parts[0].strip() == "!" for parts in lines)
    text = "; ".join(f"{parts[1]} {parts[2]}".strip() for parts in lines if len(parts) >= 3)
    return rejected, text


def _refuse_push(
    repo: git.Repo, remote: str, branch: str, force: bool, protected: Sequence[str]
) -> None:
    if remote not in {r.name for r in repo.remotes}:
        raise BackendError(f"unknown remote {remote!r}")
    if branch not in {h.name for h in repo.heads}:
        raise BackendError(f"unknown local branch {branch!r}")
    if force and branch in set(protected):
        raise BackendError(f"force push to protected branch {branch!r} is refused")


@_refusing
def push(
    repo: git.Repo,
    remote: str,
    branch: str,
    *,
    force: bool = False,
    protected: Sequence[str] = ("main", "master"),
    dry_run: bool = False,
) -> PushResult:
    """Push local ``branch`` to the same name on configured ``remote``."""
    _refuse_push(repo, remote, branch, force, protected)
    _still_pinned(repo, "the push")
    sha = repo.heads[branch].commit.hexsha
    flags = ["--porcelain"] + (["--force"] if force else []) + (["--dry-run"] if dry_run else [])
    refspec = f"refs/heads/{branch}:refs/heads/{branch}"
    status, out, err = repo.git.push(
        *flags,
        "--",
        remote,
        refspec,
        with_extended_output=True,
        with_exceptions=False,
        env=_PUSH_ENV,
        kill_after_timeout=_PUSH_TIMEOUT_S,
    )
    rejected, summary = _push_summary(str(out))
    if status != 0 or rejected:
        detail = "; ".join(x for x in (summary, str(err).strip()) if x)
        raise BackendError(f"push of {branch} to {remote} failed: {detail}")
    log.info("git.push", remote=remote, branch=branch, sha=sha, force=force, dry_run=dry_run)
    return PushResult(remote=remote, branch=branch, sha=sha, dry_run=dry_run, summary=summary)


# ---------------------------------------------------------------- audit report


def _version_key(name: str) -> tuple[int, int, int] | None:
    m = _VERSION_RE.fullmatch(name)
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def _tag_commits(repo: git.Repo) -> dict[str, git.Commit]:
    """Version tags that point (possibly through an annotated tag) at a commit."""
    found: dict[str, git.Commit] = {}
    for tag in repo.tags:
        if _version_key(tag.name) is None:
            continue
        try:
            found[tag.name] = tag.commit
        except ValueError:  # a tag on a tree or blob has no history to report
            continue
    return found


def _previous_version(version: str, tags: Sequence[str]) -> str | None:
    # Numeric compare: v0.9 < v0.10, which string order gets wrong.
    key = _version_key(version)
    lower = [t for t in tags if (k := _version_key(t)) is not None and key is not None and k < key]
    return max(lower, key=lambda t: _version_key(t) or (0, 0, 0)) if lower else None


def _file_changes(repo: git.Repo, base: str | None, sha: str) -> list[FileChange]:
    # Net change over the range; from the empty tree when there is no earlier version.
    start = base or _git(repo, "hash_object", "-t", "tree", "--stdin").strip()
    out = _git(repo, "diff_tree", "-r", "--numstat", "-z", "--no-renames", start, sha)
    changes = []
    for record in filter(None, out.split("\0")):
        added, deleted, path = record.split("\t", 2)
        binary = added == "-"
        changes.append(
            FileChange(
                path=path,
                insertions=0 if binary else int(added),
                deletions=0 if binary else int(deleted),
                binary=binary,
            )
        )
    return changes


def _audit_commits(repo: git.Repo, base: str | None, sha: str) -> list[AuditCommit]:
    rev = f"{base}..{sha}" if base else sha
    return [
        AuditCommit(
            sha=c.hexsha,
            author=str(c.author.name),
            date=c.authored_datetime.isoformat(),
            subject=_subject(c),
        )
        for c in repo.iter_commits(rev)
    ]


def _authors(commits: Sequence[AuditCommit]) -> list[str]:
    counts: dict[str, int] = {}
    for c in commits:
        counts[c.author] = counts.get(c.author, 0) + 1
    return sorted(counts, key=lambda a: (-counts[a], a))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(report: AuditReport, tag_sha: str) -> str:
    since = f"{report.previous}..{report.version}" if report.previous else f"root..{report.version}"
    plus = sum(f.insertions for f in report.files)
    minus = sum(f.deletions for f in report.files)
    lines = [
        f"# Audit report {report.version}",
        "",
        f"- range: `{since}` (tag commit `{tag_sha[:12]}`)",
        f"- {len(report.commits)} commits, {len(report.files)} files (+{plus} / -{minus})",
        f"- authors: {', '.join(report.authors)}",
        "",
        "## Commits",
        "",
        "| sha | date | author | subject |",
        "|---|---|---|---|",
        *(
            f"| `{c.sha[:12]}` | {c.date} | {_cell(c.author)} | {_cell(c.subject)} |"
            for c in report.commits
        ),
        "",
        "## Files",
        "",
        "| file | + | - |",
        "|---|---|---|",
        *(
            f"| `{_cell(f.path)}` | {'bin' if f.binary else f.insertions} | {f.deletions} |"
            for f in report.files
        ),
    ]
    return "\n".join(lines) + "\n"


@_refusing
def audit_report(repo: git.Repo, version: str) -> AuditReport:
    """Report the real history between the previous version tag and ``version``."""
    if _version_key(version) is None:
        raise BackendError(f"version {version!r} must look like v1.2 or v1.2.3")
    _still_pinned(repo, "the audit report")
    tags = _tag_commits(repo)
    if version not in tags:
        raise BackendError(f"tag {version!r} does not exist (or does not point at a commit)")
    sha = tags[version].hexsha
    previous = _previous_version(version, list(tags))
    base = tags[previous].hexsha if previous else None
    commits = _audit_commits(repo, base, sha)
    if not commits:
        raise BackendError(f"no changes between {previous} and {version}")
    report = AuditReport(
        id=f"audit:{version}:{sha[:12]}",
        version=version,
        previous=previous,
        commits=commits,
        files=_file_changes(repo, base, sha),
        authors=_authors(commits),
        markdown="",
    )
    report.markdown = _markdown(report, sha)
    log.info("git.audit_report", version=version, previous=previous, commits=len(commits))
    return report
