"""Every path a config names, checked before anything needs it (``lingyi policy check``).

A missing knowledge-base folder, repo root or CSV used to surface only when a tool reached it
(a traceback, or a call the guard approved and the backend then failed). Here each path is
checked for what it will be used as: a folder to read, a file to read inside the data roots,
a file to append to (or a folder it can be created in). Each problem names the config file,
the key and the path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lingyi.config import Config
from lingyi.paths import PathOutsideRoots, resolve_inside

Use = Literal["folder", "file", "append"]


@dataclass(frozen=True)
class NamedPath:
    """One path of the config: the key that names it, the path in effect, its use."""

    key: str
    path: Path
    use: Use


@dataclass(frozen=True)
class PathProblem:
    key: str
    path: Path
    message: str


def named_paths(config: Config) -> Iterator[NamedPath]:
    """Every path the config names, as the guard will use it."""
    yield NamedPath("paths.validators", config.validators_dir, "folder")
    yield NamedPath("paths.knowledge_base", config.kb_dir, "folder")
    yield NamedPath("paths.log", config.log_path, "append")
    yield NamedPath("paths.council", config.council_path, "append")
    for i, root in enumerate(config.repo_roots):
        yield NamedPath(f"paths.repo_roots[{i}]", root, "folder")
    for i, root in enumerate(config.data_roots):
        yield NamedPath(f"paths.data_roots[{i}]", root, "folder")
    yield from _log_files(config)


_LOG_FILES: tuple[tuple[str, Use], ...] = (("key_file", "file"), ("checkpoints", "append"))


def _log_files(config: Config) -> Iterator[NamedPath]:
    # The log's key file and checkpoints, where the config has those keys ([log] key_file,
    # [log] checkpoints): relative to the config file like every path in it.
    for key, use in _LOG_FILES:
        value = getattr(config.raw.log, key, None)
        if isinstance(value, str) and value:
            path = Path(value).expanduser()
            yield NamedPath(f"log.{key}", config.source.parent / path, use)


def path_problems(config: Config) -> list[PathProblem]:
    """What is wrong with each path the config names (empty: every one is usable)."""
    found = [p for named in named_paths(config) if (p := _problem(named))]
    return found + _data_source_problems(config)


def _problem(named: NamedPath) -> PathProblem | None:
    path, use = named.path, named.use
    if use == "folder" and not path.is_dir():
        what = "is not a folder" if path.exists() else "folder not found"
        return PathProblem(named.key, path, f"{what}: {path}")
    if use == "file" and not path.is_file():
        return PathProblem(named.key, path, f"file not found: {path}")
    if use == "append" and (why := _not_appendable(path)):
        return PathProblem(named.key, path, f"cannot be written: {path} ({why})")
    return None


def _not_appendable(path: Path) -> str | None:
    """Why ``path`` cannot be appended to, or created with its missing parent folders."""
    if path.exists():
        if not path.is_file():
            return "not a file"
        return None if os.access(path, os.W_OK) else "no permission to write it"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder"
    return (
        None if os.access(parent, os.W_OK | os.X_OK) else f"no permission to create it in {parent}"
    )


def _data_source_problems(config: Config) -> list[PathProblem]:
    """File data sources: inside the data roots (as the backend resolves them) and present."""
    found = []
    for name, entry in config.raw.data_sources.items():
        if entry.kind != "file" or not entry.path:
            continue
        key = f"data_sources.{name}.path"
        try:
            real = resolve_inside(entry.path, config.data_roots)
        except PathOutsideRoots as exc:
            found.append(PathProblem(key, Path(entry.path), str(exc)))
            continue
        if not real.is_file():
            found.append(PathProblem(key, real, f"file not found: {real}"))
    return found
