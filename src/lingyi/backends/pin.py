"""Folders that cannot be swapped under a running operation.

A path string is looked up again at every use. Between the check that a repository lies inside
the roots and the commit, anyone who can write inside the roots could rename a folder and put a
symbolic link in its place, and the commit would follow the link out of the roots. A
:class:`PinnedDirs` walks from the root one name at a time without following links (each name
opened with ``O_NOFOLLOW`` relative to its parent's descriptor), keeps the last folders open, and
hands out paths through the open descriptors (``/proc/<pid>/fd/N`` on Linux): such a path names
the folder that was checked, whatever happens to its name afterwards, in this process and in
the processes it starts. Where the platform has no such paths (macOS, Windows) the paths are the
names, and :meth:`PinnedDirs.changed` (the identity of every folder, checked again) is the
defence: callers check it before each step that writes, and refuse the step when it moved.

A link anywhere below the root is refused, not followed: a link that points inside the roots
today can be swapped for one that points outside tomorrow. The root itself is the operator's
(from the config) and is taken as it resolves.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Descriptor-relative opens need both flags and dir_fd support (not on Windows).
CAN_HOLD = bool(_NOFOLLOW and getattr(os, "O_DIRECTORY", 0)) and os.open in os.supports_dir_fd

Problem = Literal["link", "not_folder", "missing", "changed"]
Identity = tuple[int, int]


class PinError(ValueError):
    """A name on the way is a link, not a folder, or missing; ``path`` is that name."""

    def __init__(self, path: Path, problem: Problem) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


def _kind(st: os.stat_result) -> Problem | None:
    # A Windows junction or other reparse point redirects like a link does.
    reparse: int = getattr(st, "st_reparse_tag", 0)
    if stat.S_ISLNK(st.st_mode) or reparse:
        return "link"
    return None if stat.S_ISDIR(st.st_mode) else "not_folder"


def _identity(path: Path) -> Identity:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise PinError(path, "missing") from None
    if problem := _kind(st):
        raise PinError(path, problem)
    return st.st_dev, st.st_ino


@dataclass
class PinnedDirs:
    """The folders from a root down to a target, as they were when walked."""

    names: tuple[Path, ...]  # the root, then each folder below it
    ids: tuple[Identity, ...]
    fds: tuple[int, ...]  # the last folders, held open (empty where they cannot be)
    held: tuple[str, ...]  # a path to each of the last folders

    @property
    def through_fds(self) -> bool:
        """True when ``held`` reach the open folders themselves, not their names."""
        return bool(self.fds) and all(h.startswith("/proc/") for h in self.held)

    def changed(self) -> Path | None:
        """The first name that no longer leads to the folder walked (swapped, moved, a link)."""
        for name, pinned in zip(self.names, self.ids, strict=True):
            try:
                if _identity(name) != pinned:
                    return name
            except PinError:
                return name
        return None

    def close(self) -> None:
        fds, self.fds = self.fds, ()
        for fd in fds:
            os.close(fd)


def names_below(path: str | Path, roots: Sequence[Path]) -> tuple[Path, list[str]] | None:
    """The real root and the names below it that ``path`` walks through, as written (no link
    followed; a relative path is under the first root); None when ``path`` reaches the roots
    only through a link."""
    raw = Path(path).expanduser()
    lexical = Path(os.path.normpath(raw if raw.is_absolute() else roots[0] / raw))
    for root in roots:
        base = root.resolve()
        for written in (Path(os.path.normpath(root)), base):
            if lexical.is_relative_to(written):
                return base, list(lexical.relative_to(written).parts)
    return None


def pin(root: Path, names: Sequence[str], keep: int = 2) -> PinnedDirs:
    """Walk ``names`` below ``root`` without following links; hold the last ``keep`` folders.

    ``held`` are paths through the open descriptors where the platform has them, else the
    names. Raises :class:`PinError` naming the first link, non-folder or missing name.
    """
    chain = [root]
    for name in names:
        chain.append(chain[-1] / name)
    keep = min(keep, len(chain))
    fds = _walk(root, names, keep) if CAN_HOLD else ()
    try:
        ids = tuple(_identity(p) for p in chain)
        if fds and tuple(_fd_identity(fd) for fd in fds) != ids[-keep:]:
            raise PinError(chain[-1], "changed")  # swapped while we walked
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    paths = tuple(p for fd in fds if (p := _fd_path(fd)))
    held = paths if fds and len(paths) == len(fds) else tuple(str(p) for p in chain[-keep:])
    return PinnedDirs(tuple(chain), ids, fds, held)


def _walk(root: Path, names: Sequence[str], keep: int) -> tuple[int, ...]:
    """Open each name relative to its parent's descriptor; keep the last ``keep`` open."""
    opened = [os.open(root, _DIR_FLAGS)]
    path = root
    try:
        for name in names:
            path = path / name
            opened.append(_open_child(opened[-1], name, path))
            if len(opened) > keep:
                os.close(opened.pop(0))
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    return tuple(opened)


def _open_child(parent: int, name: str, path: Path) -> int:
    try:
        return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise PinError(path, "missing") from None
        st = os.lstat(name, dir_fd=parent)
        raise PinError(path, _kind(st) or "not_folder") from exc


def _fd_identity(fd: int) -> Identity:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _fd_path(fd: int) -> str | None:
    """``/proc/<pid>/fd/<fd>``, which resolves to the open folder itself, for this process and
    the git processes it starts (they read their parent's descriptor table); None without it."""
    path = f"/proc/{os.getpid()}/fd/{fd}"
    try:
        return path if os.path.samestat(os.stat(path), os.fstat(fd)) else None
    except OSError:
        return None
