"""Size limits: big arguments and content are stored cut, with their length and hash, and
readers of the tail cope with records of any size.

Before: a 2 MB argument was logged in full, and one record over 512 KB could leave
``lingyi://log/recent`` with no records. Real logs, the real MCP client in-process, over
stdio and over HTTP on loopback.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from lingyi.cli import main
from lingyi.log import (
    LogOptions,
    VerificationLog,
    canonical,
    limit_record,
    read_log,
    tail_records,
    verify_chain,
)
from lingyi.server import recent_records
from tests.test_server import deploy, serve_params, verdict, with_client
from tests.test_server_http import TOKENS, client, with_server

LIMIT = 1024
BIG = 2_000_000


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def record_with(**fields: Any) -> dict[str, Any]:
    return {"kind": "verification", "content": "short", "decision": "approved", **fields}


# (name, the record, the fields cut, what the cut field's hash is of)
CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("content", record_with(content="气" * BIG), ["content"]),
    ("a text argument", record_with(tool_call={"name": "t", "arguments": {"q": "x" * BIG}}),
     ["tool_call.arguments", "tool_call.arguments.q"]),
    ("a list argument", record_with(tool_call={"name": "t", "arguments": {"ids": list(range(10**5))}}),
     ["tool_call.arguments", "tool_call.arguments.ids"]),
    ("a nested argument", record_with(tool_call={"name": "t", "arguments": {"o": {"a": {"b": "y" * 5000}}}}),
     ["tool_call.arguments", "tool_call.arguments.o"]),
    ("many small arguments", record_with(tool_call={"name": "t", "arguments": {f"k{i}": i for i in range(2000)}}),
     ["tool_call.arguments"]),
    ("evidence ids", record_with(evidence_ids=[f"kb:{i}" for i in range(5000)]), ["evidence_ids"]),
    ("a check's reason", record_with(checks=[{"code": "c", "passed": False, "reason": "r" * 5000}]),
     ["checks[0].reason"]),
    ("a fallback's content", record_with(fallback={"content": "f" * 5000}), ["fallback.content"]),
    ("nothing over the limit", record_with(tool_call={"name": "t", "arguments": {"q": "x" * 500}}), []),
    ("exactly at the limit", record_with(content="z" * LIMIT), []),
]  # fmt: skip


@pytest.mark.parametrize(("record", "cut"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_values_over_the_limit_are_cut_with_their_length_and_hash(
    record: dict[str, Any], cut: list[str]
) -> None:
    """Each value over the limit is cut to it and listed with its full size and the sha256
    of its full text (or canonical JSON); the record keeps its shape; a value at or under
    the limit is untouched."""
    out = limit_record(record, LIMIT)
    found = out.get("truncated", [])
    assert sorted(t["field"] for t in found) == sorted(cut)
    for entry in found:
        original = _at(record, entry["field"])
        text = original if isinstance(original, str) else canonical(original)
        assert entry["sha256"] == sha(text) and entry["bytes"] == len(text.encode())
        stored = _at(out, entry["field"])
        stored = stored if isinstance(stored, str) else canonical(stored)
        assert len(stored.encode()) <= LIMIT + len("…".encode())
    assert isinstance(out.get("checks", []), list)
    if not cut:
        assert out == record
    if "tool_call" in record:
        assert isinstance(out["tool_call"]["arguments"], dict)
        assert out["tool_call"]["name"] == "t"


def _at(value: Any, path: str) -> Any:
    for part in path.replace("[", ".[").split("."):
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


def test_the_writer_stores_a_2mb_argument_cut_and_the_chain_holds(tmp_path: Path) -> None:
    """A 2 MB argument: the line stays small, the chain verifies, and a reviewer holding the
    original finds its hash in the record."""
    path = tmp_path / "log.jsonl"
    original = "参数" * (BIG // 2)
    with VerificationLog(path, LogOptions(max_field_bytes=16384)) as log:
        log.append(record_with(tool_call={"name": "t", "arguments": {"q": original}}))
        log.append(record_with())
    first = path.read_bytes().splitlines()[0]
    assert len(first) < 20_000 and verify_chain(path).ok
    record = json.loads(first)
    entry = next(t for t in record["truncated"] if t["field"] == "tool_call.arguments.q")
    assert entry["sha256"] == sha(original) and entry["bytes"] == len(original.encode())


def test_a_secret_is_redacted_before_the_cut_and_never_hashed(tmp_path: Path) -> None:
    """Redaction runs first: the stored head and the hash are of the redacted text."""
    path = tmp_path / "log.jsonl"
    secret = "sk-ant-api03-" + "q" * 40
    with VerificationLog(path, LogOptions(max_field_bytes=1024)) as log:
        log.append(record_with(content=f"key {secret} " + "x" * 5000))
    text = path.read_text(encoding="utf-8")
    assert secret not in text
    entry = json.loads(text)["truncated"][0]
    assert entry["sha256"] != sha(f"key {secret} " + "x" * 5000)


def test_no_limit_keeps_everything(tmp_path: Path) -> None:
    """max_field_bytes = 0: an operator who wants every byte gets it."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path, LogOptions(max_field_bytes=0)) as log:
        log.append(record_with(content="x" * 100_000))
    assert "truncated" not in json.loads(path.read_bytes()) and verify_chain(path).ok


# --- readers of the tail ----------------------------------------------------------------------


def huge_log(path: Path, *, last: bool) -> None:
    """60 records and one of 3 MB written with no limit (as an older lingyi did), in the
    middle of the last 50 or as the very last line."""
    with VerificationLog(path, LogOptions(max_field_bytes=0)) as log:
        for i in range(60):
            if i == (59 if last else 40):
                log.append(record_with(content="巨" * 1_000_000))
            else:
                log.append(record_with(content=f"r-{i}"))


@pytest.mark.parametrize("last", [False, True], ids=["inside", "last"])
def test_tail_readers_cope_with_a_record_of_any_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], last: bool
) -> None:
    """tail_records, the recent resource's records, `lingyi log tail` and the writer's next
    append all get past a 3 MB record, wherever it is."""
    path = tmp_path / "log.jsonl"
    huge_log(path, last=last)
    assert len(tail_records(path, 50)) == 50
    recent = recent_records(path)
    assert len(recent) == 50 and len(json.dumps(recent).encode()) < 200_000
    big = next(r for r in recent if "truncated" in r)
    assert big["truncated"][0]["bytes"] == 3_000_000
    with VerificationLog(path) as log:
        log.append(record_with(content="after"))
    assert verify_chain(path).ok
    assert main(["--log", str(path), "log", "tail", "-n", "3", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


Reader = Callable[[Any], Any]


def _check_recent(text: str) -> None:
    records = json.loads(text)
    assert len(records) == 50 and any("truncated" in r for r in records)
    assert len(text.encode()) < 500_000


def test_the_recent_resource_returns_its_records_in_process_and_over_stdio(tmp_path: Path) -> None:
    """lingyi://log/recent with a 3 MB record among the last 50: all 50 come back, the big
    one shown cut, through a real client in-process and over stdio."""
    dep = deploy(tmp_path / "deploy")
    huge_log(dep.log, last=False)
    texts: list[str] = []

    async def body(client_: Client) -> None:
        texts.append((await client_.read_resource("lingyi://log/recent")).contents[0].text)

    with_client(dep, body)

    async def stdio() -> None:
        async with Client(serve_params(dep)) as client_:
            with anyio.fail_after(60):
                await body(client_)

    anyio.run(stdio)
    for text in texts:
        _check_recent(text)


def test_the_recent_resource_returns_its_records_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same over Streamable HTTP on loopback, with a token."""
    monkeypatch.setenv("LINGYI_TEST_FLOW_TOKEN", "tok-flow-0123456789abcdef0123456789")
    dep = deploy(tmp_path / "deploy", TOKENS)
    huge_log(dep.log, last=True)
    texts: list[str] = []

    async def body(url: str) -> None:
        async with client(url, "tok-desktop-0123456789abcdef0123456789") as mcp:
            texts.append((await mcp.read_resource("lingyi://log/recent")).contents[0].text)

    with_server(dep, body)
    _check_recent(texts[0])


def test_a_2mb_argument_over_mcp_is_verified_whole_and_logged_cut(tmp_path: Path) -> None:
    """A client sends a 2 MB query: the guard judges all of it (the schema's max_length
    rejects it, naming its length), and the log stores it cut with its length and hash."""
    dep = deploy(tmp_path / "deploy")
    query = "气功" * (BIG // 2)
    out: list[Any] = []

    async def body(client_: Client) -> None:
        out.append(await client_.call_tool("search_knowledge", {"query": query}))
        out.append(await client_.call_tool(
            "verify_assertion", {"member": "lingyi", "type": "fact", "content": "内容" * BIG}
        ))  # fmt: skip

    with_client(dep, body)
    assert out[0].is_error and "tool.args_schema" in verdict(out[0])["codes"]
    records = [line.record for line in read_log(dep.log) if line.record]
    assert dep.log.stat().st_size < 200_000 and verify_chain(dep.log).ok
    fields = {t["field"]: t for r in records for t in r.get("truncated", [])}
    assert fields["tool_call.arguments.query"]["sha256"] == sha(query)
    assert fields["content"]["bytes"] == len(("内容" * BIG).encode())
