"""What reaches an upstream is the path the guard checked, never the path the model wrote.

The official git MCP server (``mcp-server-git``, a real stdio upstream) resolves a relative
``repo_path`` against its own working directory, which is the guard's. The guard checks a
relative path against the repo roots; so it forwards the folder it checked (held open, or its
absolute real path), and a ``git.git_add`` + ``git.git_commit`` with ``repo_path = "council-app"``
commits in the repository under the roots even when the guard runs beside another
``council-app``. A path that does not resolve inside the roots is refused before the upstream
is called. The symlink-swap race on the same calls is pinned in :func:`test_swap_race`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from lingyi.server import GuardApp
from tests.gateway_kit import git_deployment
from tests.test_gateway import _with_app, call, head, outside_repo
from tests.test_server import Deployment, git


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return git_deployment(tmp_path / "deploy")


def _commit(client: Client, repo_path: str, name: str) -> Any:
    async def run() -> dict[str, Any]:
        added = await call(client, "git.git_add", repo_path=repo_path, files=[name])
        if added["error"]:
            return added
        return await call(client, "git.git_commit", repo_path=repo_path, message=f"add {name}")

    return run()


@pytest.mark.parametrize("written", ["council-app", "./council-app", "council-app/../council-app"])
def test_a_relative_repo_path_commits_in_the_repository_that_was_checked(
    dep: Deployment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str
) -> None:
    """The guard runs in a folder that holds another ``council-app`` repository (outside the
    roots), each with an untracked ``x.txt``: a relative ``repo_path`` is checked against the
    repo roots, and the commit lands there, not in the folder of the guard's working
    directory."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    other = outside_repo(cwd).rename(cwd / "council-app")
    (other / "x.txt").write_text("outside\n", encoding="utf-8")
    (dep.repo / "x.txt").write_text("inside\n", encoding="utf-8")
    before = (head(dep.repo), head(other))
    monkeypatch.chdir(cwd)  # the upstream starts in the guard's working directory
    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        found.update(await _commit(client, written, "x.txt"))

    _with_app(GuardApp(dep.config()), body)
    assert found["error"] is False and found["verdict"]["decision"] == "approved", found
    assert head(other) == before[1]  # nothing committed beside the guard
    assert head(dep.repo) != before[0]
    assert git(dep.repo, "show", "--format=%s", "--name-only", "HEAD").split() == [
        "add", "x.txt", "x.txt",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "written",
    ["../elsewhere", "/etc", "council-app/../../elsewhere", "missing-repo"],
)
def test_a_path_outside_the_roots_never_reaches_the_upstream(
    dep: Deployment, tmp_path: Path, written: str
) -> None:
    """Relative, absolute or ``..`` paths that leave the roots (or name no repository) are
    rejected by ``tool.path_allowed``; the upstream is never called."""
    outside_repo(dep.root)  # deploy/elsewhere: a real repository beside the roots
    app = GuardApp(dep.config())
    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        found.update(await call(client, "git.git_log", repo_path=written, max_count=3))

    _with_app(app, body)
    assert found["error"] is True and "tool.path_allowed" in found["verdict"]["codes"]
    assert app.gateway is not None and app.gateway.connections["git"].calls == 0


# --- the symlink-swap race ------------------------------------------------------------------

# git_log calls (pairs: a fifth). The suite runs 200; the 1,000 of docs/gateway.md: LINGYI_RACE_CALLS=1000
RACE_CALLS = int(os.environ.get("LINGYI_RACE_CALLS", "200"))
MARK = "outside-the-roots-marker"


def _swapper(folder: Path, outrepo: Path, stop: Any) -> None:
    """Swap ``folder`` for a link to the outside repository and back until stopped."""
    aside = folder.with_name(".aside")
    while not stop.is_set():
        time.sleep(0.05)
        try:
            os.rename(folder, aside)
            os.symlink(outrepo, folder)
            time.sleep(0.05)
        except OSError:
            pass
        if folder.is_symlink():
            os.unlink(folder)
        elif folder.is_dir() and aside.is_dir():  # a git process recreated the name: set aside
            os.rename(folder, folder.with_name(f".stray-{time.monotonic_ns()}"))
        if aside.is_dir():
            os.rename(aside, folder)


@contextmanager
def _swapping(folder: Path, outrepo: Path) -> Iterator[None]:
    stop = mp.get_context("spawn").Event()
    proc = mp.get_context("spawn").Process(target=_swapper, args=(folder, outrepo, stop))
    proc.start()
    try:
        yield
    finally:
        stop.set()
        proc.join(10)


async def _when_in_place(folder: Path) -> None:
    """As an attacker who swaps after the check: call only when the folder looks right."""
    while folder.is_symlink() or not folder.exists():
        await anyio.sleep(0.0005)


def _commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_swap_race(dep: Deployment, tmp_path: Path) -> None:
    """While ``repos/council-app`` is swapped for a link to an outside repository in a loop,
    ``git.git_add`` + ``git.git_commit`` pairs and ``git.git_log`` calls through the gateway
    either act on the repository inside the roots or are refused: the outside repository gets
    no commit and no log call ever lists its history."""
    outrepo = outside_repo(tmp_path)
    git(outrepo, "commit", "-q", "-m", MARK)
    folder, before = dep.repo, _commits(outrepo)
    outcomes: Counter[str] = Counter()

    async def body(client: Client) -> None:
        for i in range(RACE_CALLS):
            await _when_in_place(folder)
            logged = await client.call_tool("git.git_log", {"repo_path": str(folder)})
            text = " ".join(getattr(p, "text", "") for p in logged.content)
            outcomes["log outside" if MARK in text else f"log error={logged.is_error}"] += 1
            if i % 5 == 0:
                await _when_in_place(folder)
                with suppress(OSError):
                    (folder / f"f{i}.txt").write_text(f"{i}\n", encoding="utf-8")
                done = await _commit(client, str(folder), f"f{i}.txt")
                outcomes[f"pair error={done['error']}"] += 1

    async def main() -> None:
        from lingyi.server import build_server

        app = GuardApp(dep.config())
        try:
            async with Client(build_server(app)) as client:
                with anyio.fail_after(900):
                    await body(client)
        finally:
            app.close()

    with _swapping(folder, outrepo):
        anyio.run(main)
    outcomes["pair outside"] = _commits(outrepo) - before
    print(f"gateway swap race: {dict(outcomes)}")
    assert outcomes["log outside"] == 0 and outcomes["pair outside"] == 0, outcomes


ECHO_PATH = """
[tools."fake.echo"]
read_only = true
args.text = { type = "path", required = true, roots = "repos", must_exist = false, description = "a file" }
"""


@pytest.mark.parametrize(
    ("written", "outcome"),
    [
        ("council-app/notes.txt", "held"),  # a file: sent through its held folder
        ("council-app/new.txt", "held"),  # a name not there yet: the same
        ("linked/notes.txt", "refused"),  # through a link inside the roots
        ("council-app/link.txt", "refused"),  # the file itself is a link
    ],
)
def test_every_path_argument_is_forwarded_as_checked(
    tmp_path: Path, written: str, outcome: str
) -> None:
    """A policy may type any upstream argument as a path (here fake.echo's ``text``, which the
    upstream says back): the upstream receives the file through the folder held open, never the
    words; a link on the way, or a file that is a link, is refused before the call."""
    from tests.gateway_kit import FAKE_POLICIES, fake_upstream

    policies = FAKE_POLICIES.replace(
        '[tools."fake.echo"]\nread_only = true\nargs.text = { type = "string", required = true, max_length = 1000 }\n',
        ECHO_PATH,
    )
    dep = git_deployment(tmp_path / "deploy", fake_upstream(timeout_s=10), policies)
    (dep.repo / "notes.txt").write_text("n\n", encoding="utf-8")
    (dep.repo / "link.txt").symlink_to(dep.repo / "notes.txt")
    (dep.repo.parent / "linked").symlink_to(dep.repo)
    app = GuardApp(dep.config())
    found: dict[str, Any] = {}

    async def body(client: Client) -> None:
        result = await client.call_tool("fake.echo", {"text": written})
        found.update(error=result.is_error, data=result.structured_content or {})

    _with_app(app, body)
    if outcome == "held":
        sent = (found["data"].get("result") or {}).get("content", [""])[0]
        assert found["error"] is False and sent.startswith("/proc/"), found["data"]["verdict"][
            "reason"
        ]
        assert sent.endswith("/" + written.split("/")[-1])
    else:
        assert found["error"] is True and "symbolic link" in str(found["data"]), found
