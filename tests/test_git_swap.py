"""Paths that cannot be swapped: a git tool acts on the repository it checked, or on none.

The attack: someone who can write inside the repo roots swaps a name (the repository's folder,
or a link to it) for a link to a repository outside the roots, between the guard's check and
the commit. Before, a commit opened as ``roots/inrepo`` followed the swapped name and landed in
the outside repository: every time when the swap came right after the open, and 1 in 300 to 1
in 1,000 tries in the swap loop below (a race; the deterministic test is the one that always
caught it). Now no link is accepted below the root, the repository and its ``.git`` are held
open as they were checked, and each write checks the folders again.

Real repositories, real links, a real attacker process. Where a test makes this platform look
like another (no ``/proc``: macOS; no descriptor-relative opens: Windows), it says so.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lingyi.backends import git as gb
from lingyi.backends import pin
from lingyi.errors import BackendError


def run(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    run(path, "init", "-q", "-b", "main")
    run(path, "config", "user.name", "Tester")
    run(path, "config", "user.email", "tester@example.com")
    run(path, "config", "commit.gpgsign", "false")
    (path / "README.md").write_text("hello\n")
    run(path, "add", "README.md")
    run(path, "commit", "-q", "-m", "initial")
    return path


def count(repo: Path) -> int:
    return int(run(repo, "rev-list", "--count", "main"))


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """``root/inrepo`` inside the roots, ``out/outrepo`` outside, one commit each."""
    root = tmp_path / "root"
    return {
        "root": root,
        "inrepo": make_repo(root / "inrepo"),
        "outrepo": make_repo(tmp_path / "out" / "outrepo"),
    }


def _has_proc() -> bool:
    fd = os.open(".", os.O_RDONLY)
    try:
        return pin._fd_path(fd) is not None
    finally:
        os.close(fd)


@pytest.fixture(params=["held", "names", "lstat"])
def platform(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way folders are pinned: held through /proc (Linux), held without /proc paths
    (macOS: simulated by hiding /proc), or walked by lstat only (Windows: simulated)."""
    if request.param == "held" and not _has_proc():
        pytest.skip("no /proc/<pid>/fd on this platform")
    if request.param in ("names", "lstat"):
        monkeypatch.setattr(pin, "_fd_path", lambda fd: None)
    if request.param == "lstat":
        monkeypatch.setattr(pin, "CAN_HOLD", False)
    return str(request.param)


def _swap_for_link(folder: Path, target: Path) -> Path:
    """Move ``folder`` aside and put a link to ``target`` in its place; return where it went."""
    aside = folder.with_name(".aside")
    os.rename(folder, aside)
    os.symlink(target, folder)
    return aside


def _write(repo: Any, name: str) -> None:
    (Path(repo.working_tree_dir) / name).write_text(f"{name}\n")


def test_a_swap_after_the_open_never_lands_outside(tree: dict[str, Path], platform: str) -> None:
    """The repository's folder swapped for a link to an outside repo after it was opened: the
    commit is refused, naming the folder, and neither repository gets a commit."""
    repo = gb.open_repo("inrepo", [tree["root"]])
    with repo:
        aside = _swap_for_link(tree["inrepo"], tree["outrepo"])
        # Another tool writes the file by name: it lands in the outside work tree, where the
        # old backend then committed it (every time).
        (tree["inrepo"] / "a.txt").write_text("a\n", encoding="utf-8")
        with pytest.raises(BackendError, match="changed since the repository was opened"):
            gb.commit(repo, "after the swap", paths=["a.txt"])
    assert count(tree["outrepo"]) == 1 and count(aside) == 1


def test_the_held_repository_is_the_one_checked(tree: dict[str, Path]) -> None:
    """Held through /proc, GitPython and git itself still reach the checked folder after its
    name was swapped for a link out (the re-check is then a second, independent defence)."""
    if not _has_proc():
        pytest.skip("no /proc/<pid>/fd on this platform")
    repo = gb.open_repo("inrepo", [tree["root"]])
    with repo:
        aside = _swap_for_link(tree["inrepo"], tree["outrepo"])
        assert Path(repo.git_dir).resolve() == aside / ".git"
        assert Path(repo.git.rev_parse("--show-toplevel")) == aside
        assert repo.head.commit.hexsha == run(aside, "rev-parse", "HEAD")


def _link_setups(tree: dict[str, Path]) -> dict[str, str]:
    """Each way a link inside the roots could redirect a git tool; the repo_path to give."""
    root, inrepo, outrepo = tree["root"], tree["inrepo"], tree["outrepo"]
    (root / "link-in").symlink_to(inrepo)  # inside today, swappable tomorrow
    (root / "group").mkdir()
    (root / "group" / "sub").symlink_to(root / "inrepo")
    shutil.copytree(inrepo, root / "dotgit-link", symlinks=True)
    shutil.rmtree(root / "dotgit-link" / ".git")
    (root / "dotgit-link" / ".git").symlink_to(outrepo / ".git")
    (root / "gitfile").mkdir()
    (root / "gitfile" / ".git").write_text(f"gitdir: {outrepo / '.git'}\n")
    shutil.copytree(inrepo, root / "commondir", symlinks=True)
    (root / "commondir" / ".git" / "commondir").write_text(str(outrepo / ".git"))
    shutil.copytree(inrepo, root / "worktree", symlinks=True)
    run(root / "worktree", "config", "core.worktree", str(outrepo))
    return {
        "link-in": "is a symbolic link",
        "group/sub": "is a symbolic link",
        "group/sub/../inrepo": "through a symbolic link",
        "dotgit-link": "is a symbolic link",
        "gitfile": "its .git is a file",
        "commondir": "takes refs from another repository",
        "worktree": "core.worktree names another work tree",
    }


def test_links_and_redirections_inside_the_roots_are_refused(tree: dict[str, Path]) -> None:
    """A link below the root (even one pointing inside), a linked .git, a gitdir file, a
    commondir file and core.worktree are each refused with the name and the reason."""
    for path, fragment in _link_setups(tree).items():
        with pytest.raises(BackendError, match=fragment) as info:
            gb.open_repo(path, [tree["root"]])
        assert path in str(info.value), path
    assert count(tree["outrepo"]) == 1


def test_the_plain_repository_still_opens_and_commits(tree: dict[str, Path], platform: str) -> None:
    """With no swap, commits, branches and audits work on every pinning platform, and the
    repository's descriptors are released when it is closed."""
    with gb.open_repo("inrepo", [tree["root"]]) as repo:
        _write(repo, "b.txt")
        done = gb.commit(repo, "legit", paths=["b.txt"])
        gb.branch(repo, "feature")
        pins = repo.pins
    assert done.files == ["b.txt"] and count(tree["inrepo"]) == 2
    assert run(tree["inrepo"], "rev-parse", "feature") == done.sha
    assert pins is not None and pins.fds == ()


# --- the swap loop --------------------------------------------------------------------------


def _attacker(root: Path, outrepo: Path, stop: Any, dir_s: float, link_s: float) -> None:
    """Swap ``root/inrepo`` for a link to the outside repository and back until stopped.

    Where folders are not held, a git process that meets the name missing may create
    ``inrepo/.git/refs/…`` in the gap (inside the roots, nothing outside); the attacker moves
    such a stray folder aside and goes on, as a real one would."""
    folder, aside = root / "inrepo", root / ".aside"
    while not stop.is_set():
        time.sleep(dir_s)
        try:
            os.rename(folder, aside)
            os.symlink(outrepo, folder)
            time.sleep(link_s)
        except OSError:
            pass
        _restore(folder, aside)


def _restore(folder: Path, aside: Path) -> None:
    if folder.is_symlink():
        os.unlink(folder)
    elif folder.is_dir() and aside.is_dir():
        os.rename(folder, folder.with_name(f".stray-{time.monotonic_ns()}"))
    if aside.is_dir():
        os.rename(aside, folder)


@contextmanager
def _swapping(tree: dict[str, Path]) -> Iterator[None]:
    """An attacker process swapping for as long as the block runs; stopped and joined after,
    so that the repositories are counted at rest."""
    stop = mp.get_context("spawn").Event()
    proc = mp.get_context("spawn").Process(
        target=_attacker, args=(tree["root"], tree["outrepo"], stop, 0.01, 0.05)
    )
    proc.start()
    try:
        yield
    finally:
        stop.set()
        proc.join(10)


def _try_commit(root: Path, i: int) -> str:
    """One commit as the git tool makes it: wait for the folder to look right (as an attacker
    who times the swap after the check would), open, write, commit; say how it ended."""
    while (root / "inrepo").is_symlink() or not (root / "inrepo").exists():
        time.sleep(0.0005)
    try:
        with gb.open_repo("inrepo", [root]) as repo:
            # Written by name, as another tool would: after a swap it lands in the outside
            # work tree (the test's own write), ready to be committed there.
            (root / "inrepo" / f"f{i}.txt").write_text(f"{i}\n", encoding="utf-8")
            gb.commit(repo, f"commit {i}", paths=[f"f{i}.txt"])
    except BackendError as exc:
        return "written, folder changed" if "was written" in str(exc) else "refused"
    except OSError:
        return "refused"
    return "done"


TRIES = 120


# Where folders are not held, GitPython's cat-file reader may meet the swapped repository and
# complain from a destructor; the refusal is ours, the noise is GitPython's.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_symlink_swap_loop_lands_nothing_outside_the_roots(
    tree: dict[str, Path], platform: str
) -> None:
    """An attacker process swaps the repository's folder for a link out and back while
    commits run: every commit either lands in the repository inside the roots or is refused;
    the outside repository never gets one."""
    with _swapping(tree):
        outcomes = Counter(_try_commit(tree["root"], i) for i in range(TRIES))
    assert count(tree["outrepo"]) == 1, outcomes
    made = count(tree["inrepo"]) - 1
    if platform == "held":  # the repository held is the one checked: every commit accounted
        assert made == outcomes["done"] and outcomes["written, folder changed"] == 0, outcomes
    else:  # a step after the branch moved may still fail on a swapped name: refused, inside
        assert made >= outcomes["done"] + outcomes["written, folder changed"], outcomes
    print(f"swap loop ({platform}): {TRIES} tries, {dict(outcomes)}, 0 outside")
