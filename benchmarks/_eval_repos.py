"""The git repositories a set of transcripts names, made real for an evaluation run.

A transcript's git calls (``repo_path = "var/repos/checkout"``) meet real repositories only if
they exist. This makes every repository named under ``var/repos/`` (without ``..``) anywhere in
the transcripts, whatever the label of the event that names it: a commit on ``main``, tags
v0.1 … v0.20, an ``origin`` remote (a bare repository), every branch a git tool call names, and
the files a commit names (changed). Relative repo paths resolve against the repo root, so the
root holds ``var/repos/<name>`` itself.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

GIT = [
    "git",
    "-c",
    "user.name=eval",
    "-c",
    "user.email=eval@example.org",
    "-c",
    "init.defaultBranch=main",
]
SAFE_BRANCH = re.compile(r"[A-Za-z0-9._/\-]+")


def _calls(files: Iterable[Path]) -> Iterable[tuple[str | None, dict[str, Any]]]:
    """(tool, arguments) of every tool result and every assertion's tool call."""
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line) if line.strip() else {}
            call = event.get("tool_call") or {}
            yield event.get("tool"), event.get("arguments") or {}
            yield call.get("name"), call.get("arguments") or {}


def _named(files: Iterable[Path]) -> tuple[dict[str, set[str]], set[str]]:
    """Repository name → files its commits name; the branches git calls name."""
    repos: dict[str, set[str]] = {}
    branches: set[str] = set()
    for tool, args in _calls(files):
        path = str(args.get("repo_path", ""))
        if not path.startswith("var/repos/") or ".." in path:
            continue
        changed = repos.setdefault(path.split("/")[2], set())
        changed.update(str(p) for p in args.get("paths") or [] if ".." not in str(p))
        for key in ("branch", "name"):
            value = args.get(key)
            if tool in ("git_push", "git_branch") and isinstance(value, str):
                branches.add(value)
    return repos, branches


def make_repos(root: Path, files: Iterable[Path]) -> Path:
    """The repositories the transcripts name, under ``root``; returns the repo root to use."""
    repos, branches = _named(list(files))
    for name, changed in sorted(repos.items()):
        repo = root / "var" / "repos" / name
        repo.mkdir(parents=True)
        bare = root / "remotes" / f"{name}.git"
        _git(root, "init", "-q", "--bare", str(bare))
        _git(repo, "init", "-q")
        (repo / "README.md").write_text("eval\n", encoding="utf-8")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "init")
        for n in range(1, 21):
            _git(repo, "tag", f"v0.{n}")
        _git(repo, "remote", "add", "origin", str(bare))
        _git(repo, "push", "-q", "origin", "main")
        for branch in sorted(b for b in branches if b != "main" and SAFE_BRANCH.fullmatch(b)):
            _git(repo, "branch", branch)
        for file in changed:
            (repo / file).parent.mkdir(parents=True, exist_ok=True)
            (repo / file).write_text("changed\n", encoding="utf-8")
    return root


def _git(cwd: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)
