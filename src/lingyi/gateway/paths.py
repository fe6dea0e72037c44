"""Path arguments as an upstream receives them: the folder the guard checked, not the words.

``tool.path_allowed`` judges a path against the roots (a relative one under the first root);
an upstream would judge the same words against its own working directory, and look the name
up again when it acts, after anyone who can write inside the roots may have swapped a folder
for a link. So every ``path`` argument of an upstream call is resolved inside its roots
again, walked from the root without following links (:mod:`lingyi.backends.pin`), and
forwarded as the held folder: ``/proc/<guard>/fd/N`` for a stdio upstream on Linux (the
upstream, our child, opens the very folder checked), else the absolute real path. A path that
leaves the roots, or passes a link inside them, is refused before anything is sent.

An upstream may still turn the held path back into a name (``git`` makes its work tree
absolute) and meet a swap there. So the folders are checked again after the call: the same
folder under every name, and no entry renamed or created in the folders above it (their
change time); when either moved, the result is withheld and the call fails saying so, even
when the swap was undone before the call ended.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from lingyi._logging import get_logger
from lingyi.backends.pin import PinError, PinnedDirs, names_below, pin
from lingyi.config import Config
from lingyi.errors import BackendError
from lingyi.paths import PathOutsideRoots, resolve_inside
from lingyi.policy import ArgSpec, ToolSpec

log = get_logger()

_NO_LINKS = "the gateway refuses symbolic links inside the roots (one can be swapped mid-call)"


class PathRefused(BackendError):
    """A path argument that cannot be forwarded as the folder that was checked."""


@contextmanager
def forwarded(
    spec: ToolSpec, arguments: dict[str, Any], config: Config, *, hold: bool
) -> Iterator[dict[str, Any]]:
    """The arguments to send, each path replaced by its held folder (``hold``) or real path;
    the folders stay held until the block ends, and are checked again when it does."""
    with ExitStack() as stack:
        sent: dict[str, Any] = dict(arguments)
        pins: list[tuple[str, PinnedDirs, tuple[int, ...]]] = []
        for name, arg in spec.args.items():
            value = arguments.get(name)
            if arg.type == "path" and isinstance(value, str):
                held, real, pinned = _held(value, arg, config)
                stack.callback(pinned.close)
                pins.append((value, pinned, _stamps(pinned)))
                sent[name] = held if hold and pinned.through_fds else str(real)
        yield sent
        _after(pins)


def _roots(arg: ArgSpec, config: Config) -> Sequence[Path]:
    return config.repo_roots if arg.roots == "repos" else config.data_roots


def _real(value: str, arg: ArgSpec, config: Config) -> Path:
    try:
        return resolve_inside(value, _roots(arg, config))
    except PathOutsideRoots as exc:
        raise PathRefused(f"path refused: {exc}") from exc


def _held(value: str, arg: ArgSpec, config: Config) -> tuple[str, Path, PinnedDirs]:
    """A path to the checked folder (or to a file, or a name not yet there, through its
    checked folder), and the pins."""
    real = _real(value, arg, config)
    found = names_below(value, _roots(arg, config))
    if found is None:
        raise PathRefused(f"{value}: reaches {real} only through a symbolic link; {_NO_LINKS}")
    root, names = found
    folder = real.is_dir()
    below = [*names, ".git"] if arg.git_repo else names if folder else names[:-1]
    try:
        pinned = pin(root, below, keep=2 if arg.git_repo else 1)
    except PinError as exc:
        raise PathRefused(f"{value}: {exc.path} is {_problem(exc)}; {_NO_LINKS}") from exc
    held = pinned.held[0] if folder else os.path.join(pinned.held[0], names[-1])
    moved = real.exists() and not os.path.samestat(os.stat(held), os.stat(real))
    if moved or (not folder and os.path.islink(held)):
        pinned.close()  # ``..`` after a link, or a file that is a link
        raise PathRefused(f"{value}: passes through a symbolic link ({real}); {_NO_LINKS}")
    return held, real, pinned


def _problem(exc: PinError) -> str:
    return {
        "link": "a symbolic link",
        "not_folder": "not a folder",
        "missing": "missing",
        "changed": "swapped while it was opened",
    }[exc.problem]


def _stamps(pinned: PinnedDirs) -> tuple[int, ...]:
    """The change times of the folders that hold the names walked, down to the held ones: a
    rename or a new link in any of them moves its time, even when it is undone."""
    return tuple(os.stat(p).st_ctime_ns for p in pinned.names[:-1])


def _after(pins: list[tuple[str, PinnedDirs, tuple[int, ...]]]) -> None:
    """Refuse the result when a folder on the way changed while the upstream ran."""
    for value, pinned, stamps in pins:
        moved = pinned.changed()
        if moved is None and _stamps(pinned) == stamps:
            continue
        log.warning("upstream.path_swapped", path=value, folder=str(moved or "a parent"))
        raise PathRefused(
            f"{value}: a folder on the way to it changed while the upstream ran (renamed, or "
            "swapped for a link); its result is withheld: check the repository, then retry"
        )
