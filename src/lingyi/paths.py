"""Keep every path a tool touches inside the configured roots.

A path given by a model is untrusted: it may be relative, absolute, contain ``..`` or
pass through a symlink that points elsewhere. We resolve it fully (following symlinks)
and accept it only if the real location is inside one of the real roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class PathOutsideRoots(ValueError):
    """The path resolves outside every configured root."""


def resolve_inside(path: str | Path, roots: Sequence[Path]) -> Path:
    """Return the real path of ``path`` if it lies inside one of ``roots``.

    A relative path is taken relative to the first root. Raises ``PathOutsideRoots``
    when no root contains it (after ``..`` and symlinks are resolved).
    """
    if not roots:
        raise PathOutsideRoots("no roots are configured for this kind of path")
    raw = Path(path).expanduser()
    candidate = raw if raw.is_absolute() else roots[0] / raw
    real = candidate.resolve()
    for root in roots:
        if real == root.resolve() or real.is_relative_to(root.resolve()):
            return real
    shown = ", ".join(str(r) for r in roots)
    raise PathOutsideRoots(f"{path} resolves to {real}, outside the allowed roots ({shown})")
