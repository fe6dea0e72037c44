"""Tests for the LingFlow git backend against real repositories made in tmp_path."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import git
import pytest

from lingyi.backends import git as gb
from lingyi.errors import BackendError


def run(cwd: Path, *args: str) -> str:
    """Run a git command in ``cwd`` and return its stdout (fails the test on error)."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@functools.cache
def _template() -> Path:
    """The repository every test starts from, made once (six git processes) and copied."""
    path = Path(tempfile.mkdtemp(prefix="lingyi-test-repo-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    run(path, "init", "-q", "-b", "main")
    run(path, "config", "user.name", "Tester")
    run(path, "config", "user.email", "tester@example.com")
    run(path, "config", "commit.gpgsign", "false")
    commit_file(path, "README.md", "hello\n", "initial")
    return path


def make_repo(path: Path) -> Path:
    """A non-bare repo on ``main`` with a local identity and one commit (README)."""
    shutil.copytree(_template(), path, symlinks=True, dirs_exist_ok=True)
    return path


def commit_file(repo: Path, name: str, text: str, message: str) -> str:
    """Write ``name`` and commit it with the git CLI; return the new sha."""
    target = repo / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    run(repo, "add", "--", name)
    run(repo, "commit", "-q", "-m", message)
    return run(repo, "rev-parse", "HEAD")


def head(repo: Path) -> str:
    return run(repo, "rev-parse", "HEAD")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The single allowed root, holding one repo at ``root/repo``."""
    r = tmp_path / "root"
    make_repo(r / "repo")
    return r


@pytest.fixture
def repo(root: Path) -> git.Repo:
    return gb.open_repo("repo", [root])


@pytest.fixture
def remote(repo: git.Repo, tmp_path: Path) -> Path:
    """A real bare repo registered as ``origin``."""
    bare = tmp_path / "remote.git"
    run(tmp_path, "init", "-q", "--bare", str(bare))
    run(Path(repo.working_tree_dir or ""), "remote", "add", "origin", str(bare))
    return bare


def wt(repo: git.Repo) -> Path:
    return Path(repo.working_tree_dir or "").resolve()


# ---------------------------------------------------------------- open_repo


def test_open_repo_accepts_relative_and_absolute_inside_root(root: Path) -> None:
    """A repo top inside the root opens by relative or absolute path."""
    assert wt(gb.open_repo("repo", [root])) == (root / "repo").resolve()
    assert wt(gb.open_repo(root / "repo", [root])) == (root / "repo").resolve()


def _setup_refusals(tmp_path: Path, root: Path) -> None:
    make_repo(tmp_path / "outside")
    (root / "link").symlink_to(tmp_path / "outside")
    (root / "plain").mkdir()
    (root / "repo" / "sub").mkdir()
    run(root, "init", "-q", "--bare", "bare.git")


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("../outside", "outside the allowed roots"),
        ("ABS_OUTSIDE", "outside the allowed roots"),
        ("link", "outside the allowed roots"),
        ("plain", "not a git repository"),
        ("missing", "no such directory"),
        ("repo/sub", "not the top"),
        ("bare.git", "bare"),
    ],
)
def test_open_repo_refuses(tmp_path: Path, root: Path, path: str, fragment: str) -> None:
    """Escapes (.., absolute, symlink out), non-repos, missing dirs, subdirs and bare repos."""
    _setup_refusals(tmp_path, root)
    target = str(tmp_path / "outside") if path == "ABS_OUTSIDE" else path
    with pytest.raises(BackendError, match=fragment) as info:
        gb.open_repo(target, [root])
    assert target in str(info.value)


# ---------------------------------------------------------------- state


def test_repo_state_reports_branch_dirty_untracked(repo: git.Repo) -> None:
    """State shows the branch, HEAD, tracked changes and untracked files."""
    (wt(repo) / "README.md").write_text("changed\n")
    (wt(repo) / "new.txt").write_text("x\n")
    state = gb.repo_state(repo)
    assert (state.branch, state.detached, state.dirty) == ("main", False, True)
    assert state.untracked == ["new.txt"]
    assert state.head_sha == head(wt(repo))
    assert not state.merging and not state.rebasing


def test_repo_state_unborn_branch(tmp_path: Path) -> None:
    """A fresh repo has a branch name but no HEAD sha."""
    (tmp_path / "r").mkdir()
    run(tmp_path / "r", "init", "-q", "-b", "main")
    state = gb.repo_state(gb.open_repo("r", [tmp_path]))
    assert (state.branch, state.head_sha, state.detached) == ("main", None, False)


# ---------------------------------------------------------------- commit


def test_without_an_author_the_repositorys_own_identity_commits(repo: git.Repo) -> None:
    """The backend names nobody itself: with no author, git's configured identity is used."""
    with repo.config_writer() as config:
        config.set_value("user", "name", "Repo Owner")
        config.set_value("user", "email", "owner@example.org")
    (wt(repo) / "a.txt").write_text("a\n")
    gb.commit(repo, "add a", paths=["a.txt"])
    assert run(wt(repo), "log", "-1", "--format=%an <%ae>") == "Repo Owner <owner@example.org>"


def test_commit_paths_lands_in_history(repo: git.Repo) -> None:
    """A commit of named paths moves the branch, records the author and lists the files."""
    before = head(wt(repo))
    (wt(repo) / "a.txt").write_text("a\n")
    (wt(repo) / "b.txt").write_text("b\n")
    author = git.Actor("灵通", "lingflow@lingyi.local")
    result = gb.commit(repo, "add a\n\nbody", paths=["a.txt"], author=author)
    assert head(wt(repo)) == result.sha
    assert run(wt(repo), "rev-parse", f"{result.sha}^") == before
    assert result.files == ["a.txt"] and result.branch == "main"
    assert (
        run(wt(repo), "log", "-1", "--format=%an <%ae>|%cn") == "灵通 <lingflow@lingyi.local>|灵通"
    )
    assert "b.txt" in gb.repo_state(repo).untracked
    assert run(wt(repo), "diff", "--cached", "--name-only") == ""
    assert run(wt(repo), "fsck", "--no-progress") == ""
    ev = result.to_evidence()
    assert (ev.id, ev.title, ev.snippet) == (result.sha, "add a", "main: 1 files")


def test_commit_already_staged_changes_with_dirty_tree(repo: git.Repo) -> None:
    """Staged changes commit even when other tracked files are dirty; those stay uncommitted."""
    (wt(repo) / "c.txt").write_text("c\n")
    run(wt(repo), "add", "c.txt")
    (wt(repo) / "README.md").write_text("unstaged edit\n")
    result = gb.commit(repo, "add c")
    assert result.files == ["c.txt"]
    assert gb.repo_state(repo).dirty


def test_commit_add_all_stages_deletions_and_respects_gitignore(repo: git.Repo) -> None:
    """add_all stages new files and deletions but not ignored files."""
    (wt(repo) / ".gitignore").write_text("secret.env\n")
    (wt(repo) / "secret.env").write_text("TOKEN=1\n")
    (wt(repo) / "README.md").unlink()
    result = gb.commit(repo, "tidy", add_all=True)
    assert sorted(result.files) == [".gitignore", "README.md"]
    assert "secret.env" not in run(wt(repo), "ls-files")


def test_commit_on_unborn_branch(tmp_path: Path) -> None:
    """The first commit of a repository creates the branch."""
    (tmp_path / "r").mkdir()
    run(tmp_path / "r", "init", "-q", "-b", "main")
    (tmp_path / "r" / "f.txt").write_text("f\n")
    result = gb.commit(gb.open_repo("r", [tmp_path]), "first", paths=["f.txt"])
    assert head(tmp_path / "r") == result.sha and result.files == ["f.txt"]


def test_commit_refuses_detached_head(repo: git.Repo) -> None:
    """No commit is made on a detached HEAD."""
    run(wt(repo), "checkout", "-q", "--detach")
    (wt(repo) / "a.txt").write_text("a\n")
    with pytest.raises(BackendError, match="detached"):
        gb.commit(repo, "x", paths=["a.txt"])


def _conflict(repo: Path) -> str:
    """Create diverging edits of README.md on main and ``other``; return the other sha."""
    run(repo, "checkout", "-q", "-b", "other")
    other = commit_file(repo, "README.md", "theirs\n", "theirs")
    run(repo, "checkout", "-q", "main")
    commit_file(repo, "README.md", "ours\n", "ours")
    return other


def test_commit_refuses_mid_merge(repo: git.Repo) -> None:
    """A real conflicted merge (MERGE_HEAD) blocks commits and leaves HEAD alone."""
    _conflict(wt(repo))
    subprocess.run(["git", "merge", "other"], cwd=wt(repo), capture_output=True)
    before = head(wt(repo))
    assert gb.repo_state(repo).merging
    with pytest.raises(BackendError, match="merge is in progress"):
        gb.commit(repo, "merge", add_all=True)
    assert head(wt(repo)) == before


def test_commit_refuses_mid_rebase(repo: git.Repo) -> None:
    """A conflicted rebase blocks commits."""
    _conflict(wt(repo))
    subprocess.run(["git", "rebase", "other"], cwd=wt(repo), capture_output=True)
    assert gb.repo_state(repo).rebasing
    with pytest.raises(BackendError, match="rebase is in progress"):
        gb.commit(repo, "x", add_all=True)


@pytest.mark.parametrize("message", ["", "   \n"])
def test_commit_refuses_empty_message(repo: git.Repo, message: str) -> None:
    """An empty or blank message is refused."""
    (wt(repo) / "a.txt").write_text("a\n")
    with pytest.raises(BackendError, match="message is empty"):
        gb.commit(repo, message, paths=["a.txt"])


def test_commit_refuses_nothing_staged(repo: git.Repo) -> None:
    """Nothing to commit (clean tree, or only untracked files not added) is refused."""
    (wt(repo) / "loose.txt").write_text("x\n")
    before = head(wt(repo))
    with pytest.raises(BackendError, match="nothing to commit"):
        gb.commit(repo, "empty")
    assert head(wt(repo)) == before


@pytest.mark.parametrize("path", ["../escape.txt", "ABS_OUTSIDE", "outlink", "outdir/x.txt"])
def test_commit_refuses_paths_leaving_repo(repo: git.Repo, tmp_path: Path, path: str) -> None:
    """Paths with .., absolute outside, or through symlinks pointing out are refused."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.txt").write_text("secret\n")
    (wt(repo) / "outlink").symlink_to(outside / "x.txt")
    (wt(repo) / "outdir").symlink_to(outside)
    target = str(outside / "x.txt") if path == "ABS_OUTSIDE" else path
    before = head(wt(repo))
    with pytest.raises(BackendError, match=r"outside|refused"):
        gb.commit(repo, "escape", paths=[target])
    assert head(wt(repo)) == before
    assert run(wt(repo), "diff", "--cached", "--name-only") == ""


def test_commit_refuses_git_dir_path(repo: git.Repo) -> None:
    """Paths inside .git are never staged."""
    with pytest.raises(BackendError, match=r"\.git"):
        gb.commit(repo, "x", paths=[".git/config"])


def test_commit_failing_hook_leaves_head_unchanged(repo: git.Repo) -> None:
    """A pre-commit hook failure aborts before the ref update: HEAD does not move."""
    hook = Path(repo.git_dir) / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    (wt(repo) / "a.txt").write_text("a\n")
    before = head(wt(repo))
    with pytest.raises(BackendError, match="before the branch was updated"):
        gb.commit(repo, "blocked", paths=["a.txt"])
    assert head(wt(repo)) == before


def test_commit_refuses_when_branch_moved_concurrently(
    repo: git.Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If another writer moves the branch mid-commit, the ref update fails; theirs survives."""
    original = git.IndexFile.commit

    def racing(self: git.IndexFile, *args: Any, **kwargs: Any) -> Any:
        made = original(self, *args, **kwargs)
        run(wt(repo), "commit", "-q", "--allow-empty", "-m", "concurrent")
        return made

    monkeypatch.setattr(git.IndexFile, "commit", racing)
    (wt(repo) / "a.txt").write_text("a\n")
    with pytest.raises(BackendError, match="update-ref"):
        gb.commit(repo, "mine", paths=["a.txt"])
    assert run(wt(repo), "log", "-1", "--format=%s") == "concurrent"


# ---------------------------------------------------------------- branch


@pytest.mark.parametrize("name", ["feature/x", "fix-1", "lingflow/v0.16-audit"])
def test_branch_creates_valid_names(repo: git.Repo, name: str) -> None:
    """Valid names are created at HEAD without switching branches."""
    result = gb.branch(repo, name)
    assert result.sha == head(wt(repo)) and result.name == name
    assert run(wt(repo), "rev-parse", f"refs/heads/{name}") == result.sha
    assert gb.repo_state(repo).branch == "main"


def test_branch_at_start_point(repo: git.Repo) -> None:
    """start_point picks the commit the branch points at."""
    first = head(wt(repo))
    commit_file(wt(repo), "a.txt", "a\n", "second")
    assert gb.branch(repo, "old", start_point=first).sha == first


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("bad..name", "invalid branch name"),
        ("-delete", "invalid branch name"),
        ("", "invalid branch name"),
        ("with space", "invalid branch name"),
        ("@{-1}", "invalid branch name"),
        ("main", "already exists"),
    ],
)
def test_branch_refuses(repo: git.Repo, name: str, fragment: str) -> None:
    """Invalid ref names and existing branches are refused."""
    with pytest.raises(BackendError, match=fragment):
        gb.branch(repo, name)


def test_branch_refuses_unknown_start_point(repo: git.Repo) -> None:
    """A start point that names no commit is refused."""
    with pytest.raises(BackendError, match="does not name a commit"):
        gb.branch(repo, "x", start_point="nope")


# ---------------------------------------------------------------- push


def test_push_to_bare_remote(repo: git.Repo, remote: Path) -> None:
    """A push lands the sha on the remote branch and yields evidence naming it."""
    result = gb.push(repo, "origin", "main")
    assert run(remote, "rev-parse", "refs/heads/main") == result.sha == head(wt(repo))
    assert result.to_evidence().id == f"push:origin/main@{result.sha[:12]}"
    assert "new branch" in result.summary


def test_push_dry_run_leaves_remote_unchanged(repo: git.Repo, remote: Path) -> None:
    """A dry run reports but the remote still has no branch."""
    result = gb.push(repo, "origin", "main", dry_run=True)
    assert result.dry_run
    assert run(remote, "for-each-ref") == ""


@pytest.mark.parametrize(
    ("remote_name", "branch", "force", "fragment"),
    [
        ("nowhere", "main", False, "unknown remote"),
        ("origin", "ghost", False, "unknown local branch"),
        ("origin", "main", True, "protected"),
        ("origin", "master", True, "protected"),
    ],
)
def test_push_refuses(
    repo: git.Repo, remote: Path, remote_name: str, branch: str, force: bool, fragment: str
) -> None:
    """Unknown remotes/branches and force pushes to protected branches are refused."""
    run(wt(repo), "branch", "master")
    with pytest.raises(BackendError, match=fragment):
        gb.push(repo, remote_name, branch, force=force)
    assert run(remote, "for-each-ref") == ""


def _diverge(repo: git.Repo, name: str) -> str:
    """Push ``name``, then rewrite it locally so the remote is no longer an ancestor."""
    run(wt(repo), "checkout", "-q", "-B", name)
    commit_file(wt(repo), "f.txt", "1\n", "one")
    gb.push(repo, "origin", name)
    run(wt(repo), "commit", "-q", "--amend", "-m", "one, rewritten")
    return head(wt(repo))


def test_push_non_fast_forward_maps_git_message(repo: git.Repo, remote: Path) -> None:
    """A rejected non-fast-forward push raises with git's reason; the remote is unchanged."""
    _diverge(repo, "feature")
    pushed = run(remote, "rev-parse", "refs/heads/feature")
    with pytest.raises(BackendError, match=r"rejected|non-fast-forward"):
        gb.push(repo, "origin", "feature")
    assert run(remote, "rev-parse", "refs/heads/feature") == pushed


def test_force_push_feature_branch_allowed(repo: git.Repo, remote: Path) -> None:
    """A force push to a non-protected branch replaces the remote sha."""
    rewritten = _diverge(repo, "feature")
    gb.push(repo, "origin", "feature", force=True)
    assert run(remote, "rev-parse", "refs/heads/feature") == rewritten


def test_protected_list_is_configurable(repo: git.Repo, remote: Path) -> None:
    """A custom protected list applies instead of the default."""
    _diverge(repo, "release")
    with pytest.raises(BackendError, match="protected"):
        gb.push(repo, "origin", "release", force=True, protected=("release",))


# ---------------------------------------------------------------- audit report


@pytest.fixture
def tagged(repo: git.Repo) -> git.Repo:
    """History: v0.15 on the initial commit, two commits, v0.16 (annotated), one more."""
    path = wt(repo)
    run(path, "tag", "v0.15")
    commit_file(path, "src/a.py", "a = 1\nb = 2\n", "add a")
    commit_file(path, "README.md", "hello\nworld\n", "docs | readme")
    run(path, "tag", "-a", "v0.16", "-m", "release 0.16")
    commit_file(path, "later.txt", "x\n", "after the release")
    return repo


def test_audit_report_lists_exactly_the_range(tagged: git.Repo) -> None:
    """Commits and files are exactly those between v0.15 and v0.16, newest first."""
    report = gb.audit_report(tagged, "v0.16")
    assert report.previous == "v0.15"
    assert [c.subject for c in report.commits] == ["docs | readme", "add a"]
    files = {f.path: (f.insertions, f.deletions) for f in report.files}
    assert files == {"src/a.py": (2, 0), "README.md": (1, 0)}
    assert report.authors == ["Tester"]
    tag_sha = run(wt(tagged), "rev-parse", "v0.16^{commit}")
    assert report.id == f"audit:v0.16:{tag_sha[:12]}"
    assert "after the release" not in report.markdown
    assert "docs \\| readme" in report.markdown
    ev = report.to_evidence()
    assert ev.title == "audit report v0.16"
    assert ev.snippet == "2 commits, 2 files since v0.15"


def test_audit_report_first_version_starts_at_root(tagged: git.Repo) -> None:
    """With no lower version tag, the range starts at the root commit."""
    report = gb.audit_report(tagged, "v0.15")
    assert report.previous is None
    assert [c.subject for c in report.commits] == ["initial"]
    assert [f.path for f in report.files] == ["README.md"]


def test_audit_report_same_commit_tags_refused(tagged: git.Repo) -> None:
    """Two version tags on the same commit have no changes between them."""
    run(wt(tagged), "tag", "v0.17", "v0.16")
    with pytest.raises(BackendError, match=r"no changes between v0\.16 and v0\.17"):
        gb.audit_report(tagged, "v0.17")


@pytest.mark.parametrize(
    ("version", "fragment"),
    [
        ("v0.18", "does not exist"),
        ("16", "must look like"),
        ("v0.16-rc1", "must look like"),
        ("0.16", "must look like"),
        ("v1", "must look like"),
    ],
)
def test_audit_report_refuses(tagged: git.Repo, version: str, fragment: str) -> None:
    """Missing tags and malformed versions are refused."""
    with pytest.raises(BackendError, match=fragment):
        gb.audit_report(tagged, version)


@pytest.mark.parametrize(
    ("version", "previous"),
    [("v0.10", "v0.9"), ("v0.11", "v0.10"), ("v1.0.1", "v1.0"), ("v0.9", "v0.2")],
)
def test_audit_report_previous_by_semantic_order(
    repo: git.Repo, version: str, previous: str
) -> None:
    """The previous tag is the numerically highest lower version (v0.9 < v0.10)."""
    path = wt(repo)
    for i, tag in enumerate(["v0.2", "v0.9", "v0.10", "v0.11", "v1.0", "v1.0.1"]):
        commit_file(path, f"f{i}.txt", f"{i}\n", f"work for {tag}")
        run(path, "tag", tag)
    run(path, "tag", "release-zzz")  # a non-version tag never counts
    report = gb.audit_report(repo, version)
    assert report.previous == previous
    assert [c.subject for c in report.commits] == [f"work for {version}"]
