"""``lingyi verify --server``: a real ``lingyi serve --http`` subprocess on loopback, the real
``lingyi`` command as a second subprocess, the real MCP client between them.

What a user relies on: the same verdict, output, ``--json`` line and exit code as a local
verify; the evidence a session recorded earlier on the server backs a fact cited in that
session (and only there); a server that cannot be reached or refuses the token is exit 2 with
one line naming the URL and what to fix, never a silent local verification.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.test_server import Deployment, deploy

TOKEN = "tok-desktop-0123456789abcdef0123456789"  # [server] tokens are at least 32 characters
TOKEN_VAR = "LINGYI_TEST_CLI_TOKEN"
CONFIG = f"""
[server]
host = "127.0.0.1"

[[server.tokens]]
name = "desktop"
token = "{TOKEN}"
members = ["lingyi", "lingzhi"]

[cli]
token_env = "{TOKEN_VAR}"
"""
START_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    return {**env, "NO_COLOR": "1", **extra}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Deployment, str]]:
    """``lingyi serve --http`` of a deployment with one token, on a free loopback port."""
    dep = deploy(tmp_path_factory.mktemp("verify-server") / "deploy", CONFIG)
    port = _free_port()
    argv = [sys.executable, "-m", "lingyi", "--config", str(dep.config_path), "serve", "--http"]
    proc = subprocess.Popen(
        [*argv, "--port", str(port)], env=_env(), stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(port, proc)
        yield dep, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()


def _wait_for(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "server exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("lingyi serve --http did not listen in time")


def lingyi(
    dep: Deployment, *args: str, token: str | None = TOKEN
) -> subprocess.CompletedProcess[str]:
    """The real ``lingyi`` command with the deployment's config (its token in the variable
    ``[cli] token_env`` names, unless ``token`` is None)."""
    env = _env(**({TOKEN_VAR: token} if token is not None else {}))
    argv = [sys.executable, "-m", "lingyi", "--config", str(dep.config_path), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


BOUND = "auth.member_bound"  # the server checks the token's members; a local verify has none


def records(log: Path) -> list[dict[str, Any]]:
    """The log's records, read as the contract says it is: JSON lines."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def _comparable(line: dict[str, Any]) -> dict[str, Any]:
    """A --json line without what differs between a local and a server verify: the record's
    id, the token's check, and so the count of checks an approval's reason gives."""
    kept = {k: v for k, v in line.items() if k not in ("id", "record_id", "appeal")}
    kept["checks"] = [c for c in line["checks"] if c["code"] != BOUND]
    if line["decision"] == "approved":
        kept.pop("reason")
    return kept


CASES = [
    ("zh", "lingzhi", "fact", "庄子的逍遥游讲的是自由", "approved", 0),
    ("en", "lingzhi", "fact", "Zhuangzi wrote about free and easy wandering", "approved", 0),
    ("zh", "lingyi", "communication", "灵通说v0.16审计已经完成", "rejected", 1),
    ("en", "lingyi", "communication", "LingFlow told me the v0.16 audit is done", "rejected", 1),
    ("zh", "lingzhi", "fact", "失眠吃安眠药就好，每晚两片", "rejected", 1),
    ("en", "lingzhi", "fact", "Based on the trend, LingFlow will ship on Monday", "fallback", 0),
]


@pytest.mark.parametrize(
    ("lang", "member", "kind", "content", "decision", "code"), CASES, ids=[c[3][:24] for c in CASES]
)
def test_a_verify_through_the_server_answers_as_a_local_one(
    served: tuple[Deployment, str],
    lang: str,
    member: str,
    kind: str,
    content: str,
    decision: str,
    code: int,
) -> None:
    """Approved, rejected and fallback, in Chinese and English: --server gives the decision,
    the checks and the exit code a local verify gives, the same --json line, and the server
    logs the record whose id it prints."""
    dep, url = served
    flags = ["verify", "--member", member, "--type", kind, "--content", content, "--json"]
    remote = lingyi(dep, *flags, "--server", url)
    local = lingyi(dep, *flags, "--local")
    assert (remote.returncode, local.returncode) == (code, code), remote.stderr + local.stderr
    there, here = json.loads(remote.stdout), json.loads(local.stdout)
    assert there["decision"] == decision, lang
    assert _comparable(there) == _comparable(here)
    assert [c["passed"] for c in there["checks"] if c["code"] == BOUND] == [True]
    logged = {r["id"]: r for r in records(dep.log)}
    assert logged[there["record_id"]]["source"] == "server"
    assert logged[here["record_id"]]["source"] == "cli"


def test_the_human_output_is_the_same_through_the_server(served: tuple[Deployment, str]) -> None:
    """Without --json: the same lines (decision, reason, every check with its mark), only the
    record id differs."""
    dep, url = served
    flags = [
        "verify",
        "--member",
        "lingyi",
        "--type",
        "communication",
        "--content",
        "灵通说v0.16审计已经完成",
    ]
    remote, local = lingyi(dep, *flags, "--server", url), lingyi(dep, *flags, "--local")
    assert remote.returncode == local.returncode == 1
    shown = [line for line in remote.stdout.splitlines()[:-1] if BOUND not in line]
    assert shown == local.stdout.splitlines()[:-1]
    assert "communication.on_record" in remote.stdout


async def _search(url: str, session: str, query: str) -> list[str]:
    """A search_knowledge call of the desktop token's client in ``session``: the hit ids."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Lingyi-Session": session}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("search_knowledge", {"query": query})
    hits = (result.structured_content or {}).get("result", {}).get("hits", [])
    return [hit["id"] for hit in hits]


@pytest.mark.parametrize(
    ("session", "query", "content"),
    [
        ("zh", "气功", "知识库中有关于气功的文章"),
        ("en", "qigong", "The knowledge base has an article on qigong"),
    ],
)
def test_evidence_recorded_earlier_in_the_session_backs_a_fact(
    served: tuple[Deployment, str], session: str, query: str, content: str
) -> None:
    """A search run earlier in session S (another connection, the same token) records its
    hits; a fact citing one is approved with --session S, and rejected in a session that never
    searched (evidence.cited_ids_exist): the server's evidence, not the assertion's word."""
    dep, url = served
    found = anyio.run(_search, url, f"kb-{session}", query)
    assert found, "the shipped knowledge base has no hit for the query"
    flags = ["verify", "--member", "lingzhi", "--type", "fact", "--content", content]
    cited = [*flags, "--evidence-id", found[0], "--json", "--server", url]
    backed = lingyi(dep, *cited, "--session", f"kb-{session}")
    unbacked = lingyi(dep, *cited, "--session", f"never-searched-{session}")
    assert backed.returncode == 0, backed.stdout + backed.stderr
    assert json.loads(backed.stdout)["decision"] == "approved"
    assert unbacked.returncode == 1
    failed = {c["code"] for c in json.loads(unbacked.stdout)["checks"] if not c["passed"]}
    assert "evidence.cited_ids_exist" in failed


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("lingyi: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_an_unreachable_server_is_exit_2_naming_the_url(served: tuple[Deployment, str]) -> None:
    """No server at the URL: exit 2, one error line with the URL and the fix (start the
    server, or --local); nothing verified here (no record in the log), and --json says so."""
    dep, _ = served
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    before = len(records(dep.log))
    done = lingyi(
        dep, "verify", "--member", "lingzhi", "--content", "庄子", "--server", url, "--json"
    )
    assert done.returncode == 2
    line = _error_line(done)
    assert url in line and "cannot reach" in line and "--local" in line
    assert json.loads(done.stdout)["ok"] is False
    assert len(records(dep.log)) == before


@pytest.mark.parametrize("token", ["wrong-token", None], ids=["wrong", "unset"])
def test_a_refused_or_missing_token_is_exit_2_naming_the_variable(
    served: tuple[Deployment, str], token: str | None
) -> None:
    """A token the server does not know: exit 2, 'refused the token', the variable to set; a
    variable [cli] token_env names but the environment lacks: exit 2 before any request."""
    dep, url = served
    done = lingyi(
        dep, "verify", "--member", "lingzhi", "--content", "庄子", "--server", url, token=token
    )
    assert done.returncode == 2
    line = _error_line(done)
    assert TOKEN_VAR in line
    assert ("refused the token" in line and url in line) if token else "not set" in line


def test_context_is_refused_with_a_server(served: tuple[Deployment, str], tmp_path: Path) -> None:
    """--context fills a local ledger: with --server it is an error (exit 2), not ignored."""
    dep, url = served
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("", encoding="utf-8")
    done = lingyi(
        dep, "verify", "--member", "lingzhi", "--content", "庄子", "--server", url,
        "--context", str(transcript),
    )  # fmt: skip
    assert done.returncode == 2 and "--context" in _error_line(done)


PROBE = """
import json, sys
from lingyi.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "lingyi": sorted(m for m in sys.modules if m.startswith("lingyi"))}))
"""
# (Not lingyi.text: the config's [redact] section is validated by the redaction catalogue,
# which reads canonical text; about 35 ms of imports.)
ENGINE = ("lingyi.layer", "lingyi.checks", "lingyi.policy", "lingyi.guard", "lingyi.server",
          "lingyi.log", "lingyi.ledger", "lingyi.plan")  # fmt: skip


def test_verify_through_the_server_loads_none_of_the_engine(served: tuple[Deployment, str]) -> None:
    """The client side imports the MCP client and none of lingyi's engine (policies, checks,
    layer, plan, log, ledger, server): the server has them loaded."""
    dep, url = served
    argv = [sys.executable, "-c", PROBE, "--config", str(dep.config_path), "verify"]
    args = ["--member", "lingzhi", "--content", "庄子的逍遥游讲的是自由", "--server", url]
    done = subprocess.run(
        [*argv, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(**{TOKEN_VAR: TOKEN}),
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert [m for m in report["lingyi"] if m.startswith(ENGINE)] == []


@pytest.mark.parametrize(
    ("keys", "warned"),
    [
        ("[cli]\nwarm = false\n", ["[cli] warm"]),
        ("[cli]\nwarm = true\n[policies]\ncache = false\n", ["[cli] warm", "[policies] cache"]),
        ('[cli]\nserver = ""\n', []),
    ],
    ids=["warm", "warm and cache", "neither"],
)
def test_an_old_config_with_warm_still_loads_and_says_it_is_ignored(
    tmp_path: Path, keys: str, warned: list[str]
) -> None:
    """A config written for the warm process (``[cli] warm``, ``[policies] cache``) still
    loads: the verify runs as before (zh approved, en rejected), stdout is the result alone
    (its --json parses), and stderr has one warning per deprecated key naming the file."""
    dep = deploy(tmp_path / "deploy", keys)
    for content, code in (("庄子的逍遥游讲的是自由", 0), ("LingFlow told me the audit is done", 1)):
        member = "lingzhi" if code == 0 else "lingyi"
        done = lingyi(dep, "verify", "--member", member, "--type",
                      "fact" if code == 0 else "communication", "--content", content, "--json")  # fmt: skip
        assert done.returncode == code, done.stderr
        assert json.loads(done.stdout)["decision"] == ("approved" if code == 0 else "rejected")
        warnings = [line for line in done.stderr.splitlines() if "deprecated" in line]
        assert len(warnings) == len(warned)
        for line, key in zip(warnings, warned, strict=True):
            assert key in line and str(dep.config_path) in line and "ignored" in line
