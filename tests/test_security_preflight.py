"""A destructive call without the judge's pre-flight verdict is refused (issue 24, item 7).

Over Streamable HTTP on loopback with the real MCP client, a real repository with a bare
origin, and the loopback Messages API as the judge's model: twelve slow judged calls fill
``max_in_flight + max_waiting``, then a ``git_push`` that the judge alone would reject. The
judge is busy, so no verdict: the push is refused (``judge.unavailable``, naming what to do),
whatever ``[judge] on_error`` says, and the remote is unchanged. Once the judge is free, it
reviews the same push and rejects it itself.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import messages_api as api
from tests.judge_kit import FAKE_KEY, KEY_ENV, SUPPORTED
from tests.test_server import Deployment, deploy, git
from tests.test_server_http import client, with_server

SLOW = 12
PUSH = {"repo_path": "council-app", "remote": "origin", "branch": "main"}
HINTS = {"zh": "max_in_flight", "en": "max_in_flight"}


@pytest.fixture
def model() -> Iterator[tuple[api.FakeModel, str, threading.Event]]:
    """The judge's model: a push is always judged failed at once; anything else waits for
    the gate (a slow judge)."""
    gate = threading.Event()

    def answer(request: dict[str, Any]) -> api.Reply:
        if "git_push" in json.dumps(request, ensure_ascii=False):
            return api.tool_use(request, api.verdict(request, kind="failed"))
        gate.wait(20)
        return api.tool_use(request, api.verdict(request))

    with api.messages_api(api.FakeModel(answer)) as (state, url):
        yield state, url, gate
        gate.set()


def judged_deployment(root: Path, url: str, on_error: str, lang: str) -> Deployment:
    extra = (
        f'\n[judge]\nenabled = true\nbase_url = "{url}"\napi_key_env = "{KEY_ENV}"\n'
        f'on_error = "{on_error}"\nmax_in_flight = {SLOW}\nmax_waiting = 0\ntimeout_s = 30\n'
    )
    dep = deploy(root, extra)
    text = dep.config_path.read_text(encoding="utf-8")
    dep.config_path.write_text(text.replace('language = "zh"', f'language = "{lang}"', 1))
    return dep


async def call(mcp: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await mcp.call_tool(tool, args)
    data = dict(result.structured_content or {})
    return dict(data.get("verdict", data))


async def until(condition: Any, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        await anyio.sleep(0.02)


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("on_error", ["pass", "fail"])
def test_a_push_the_busy_judge_cannot_review_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: tuple[api.FakeModel, str, threading.Event],
    on_error: str,
    lang: str,
) -> None:
    """Busy judge: the push is rejected (judge.unavailable, the hint names max_in_flight),
    not sent to the model, the remote untouched; with the judge free, the judge rejects it."""
    state, url, gate = model
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    dep = judged_deployment(tmp_path / "d", url, on_error, lang)
    remote = dep.root / "origin.git"
    git(dep.repo, "commit", "--allow-empty", "-q", "-m", "local only")
    before = git(remote, "rev-parse", "main")
    out: dict[str, Any] = {}

    async def body(endpoint: str) -> None:
        async with client(endpoint, None) as mcp, anyio.create_task_group() as tg:
            for i in range(SLOW):
                fact = {"member": "lingyi", "type": "fact", "content": f"{SUPPORTED}（第{i}份）"}
                tg.start_soon(call, mcp, "verify_assertion", fact)
            await until(lambda: state.in_flight == SLOW)
            out["busy"] = await call(mcp, "git_push", PUSH)
            gate.set()
        async with client(endpoint, None) as mcp:
            out["free"] = await call(mcp, "git_push", PUSH)

    with_server(dep, body)
    busy, free = out["busy"], out["free"]
    assert busy["decision"] == "rejected" and "judge.unavailable" in busy["codes"], busy
    assert HINTS[lang] in (busy["recommendation"] or ""), busy
    assert git(remote, "rev-parse", "main") == before
    assert free["decision"] == "rejected" and "judge.preflight" in free["codes"], free
    assert git(remote, "rev-parse", "main") == before
    pushes = [r for r in state.requests if "git_push" in json.dumps(r, ensure_ascii=False)]
    assert len(pushes) == 1  # the busy push never reached the model
