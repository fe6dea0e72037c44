"""A verification that cannot be logged fails closed, and the next append recovers.

Full disks and size limits are made for real: a file-size limit (RLIMIT_FSIZE, set in the
child process: Linux and macOS, no privileges needed) and, where the test may mount one, a
small tmpfs. The short write that then succeeds cannot be produced on demand by a real
filesystem, so that one test makes ``os.write`` short and says so. Before this, a short write
left a torn record behind, the server answered "Error executing tool", and the CLI could end
in a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from lingyi.errors import LogError
from lingyi.log import KeyRing, LogOptions, VerificationLog, read_log, verify_chain, verify_log
from lingyi.log.reader import decode_line
from tests.test_server import Deployment, deploy, git, verdict, with_client

POSIX = pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
KEY = "c3" * 32
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
COMMIT = {"repo_path": "council-app", "message": "docs: notes", "paths": ["NOTES.md"]}


def seed(path: Path, n: int = 3, opts: LogOptions | None = None) -> bytes:
    """A log with ``n`` records; returns its bytes (to compare after a refused append)."""
    with VerificationLog(path, opts) as log:
        for i in range(n):
            log.append({"kind": "verification", "content": f"seed-{i}", "decision": "approved"})
    return path.read_bytes()


def limited(
    limit: int, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m lingyi ARGS`` with every file it writes limited to ``limit`` bytes."""
    code = (
        "import os, resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'lingyi', *sys.argv[1:]])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env or ENV,
        timeout=120,
    )


def unlimited(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lingyi", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


# --- short writes ------------------------------------------------------------------------------


def test_short_writes_continue_until_the_record_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.write may write less than asked (a signal, a nearly full disk). Mocked here, because
    no real filesystem does it on demand: every write stores at most 7 bytes. Each record
    still arrives whole and the chain verifies."""
    real_write = os.write
    calls = []

    def short(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    path = tmp_path / "log.jsonl"
    monkeypatch.setattr(os, "write", short)
    seed(path, 3, LogOptions(keys=KeyRing.from_text(KEY, "t", "t"), checkpoints=tmp_path / "cp"))
    monkeypatch.undo()
    assert len(calls) > 100  # the writes really were short
    result = verify_log(path, KeyRing.from_text(KEY, "t", "t"), tmp_path / "cp")
    assert result.ok and result.chain.records == 4 and result.chain.unreadable_count == 0


# --- the command line under a file-size limit --------------------------------------------------


@POSIX
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_the_cli_exits_2_with_one_line_naming_the_log_and_writes_nothing(
    tmp_path: Path, as_json: bool
) -> None:
    """A record that would cross the limit: exit 2, one line naming the log, no traceback,
    the log byte for byte as it was; the next run with room appends and the chain holds."""
    log = tmp_path / "log.jsonl"
    before = seed(log)
    args = ["--log", str(log), "verify", "--member", "lingyi", "--content", "hello"]
    done = limited(len(before) + 64, *args, *(["--json"] if as_json else []))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"lingyi: error: cannot write the verification log {log}: "
    )
    assert "File too large" in lines[0] and log.read_bytes() == before
    if as_json:
        error = json.loads(done.stdout)
        assert error["ok"] is False and error["errors"][0]["kind"] == "log"
    else:
        assert done.stdout == ""
    again = unlimited(*args)
    assert again.returncode == 0, again.stderr
    report = verify_chain(log)
    assert report.ok and report.records == 4 and report.unreadable_count == 0


@POSIX
def test_an_appeal_that_cannot_be_logged_exits_2_and_records_nothing(tmp_path: Path) -> None:
    """Appeals go through the same writer: refused whole, one line, exit 2."""
    log = tmp_path / "log.jsonl"
    before = seed(log)
    target = json.loads(before.splitlines()[0])["id"]
    done = limited(len(before) + 64, "--log", str(log), "appeal", target, "--reason", "not so")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "cannot write the verification log" in done.stderr and log.read_bytes() == before


@POSIX
def test_replay_stops_at_the_first_record_it_cannot_log(tmp_path: Path) -> None:
    """Replay appends a record per assertion: when one cannot be written it stops with exit 2
    and one line naming the log, and no record is half written."""
    log = tmp_path / "log.jsonl"
    before = seed(log)
    done = limited(len(before) + 64, "--log", str(log), "replay", "examples/council-basics.jsonl")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("lingyi: error: cannot write the verification log")
    )
    assert log.read_bytes() == before


# --- the server: the tool does not run, the client reads why, the server goes on ---------------


def _log_on(dep: Deployment, log: Path, extra: str = "") -> Deployment:
    """The deployment with its log at ``log`` (and ``extra`` config appended)."""
    text = dep.config_path.read_text(encoding="utf-8").replace(
        f'log = "{dep.log}"', f'log = "{log}"'
    )
    dep.config_path.write_text(text + extra, encoding="utf-8")
    return Deployment(dep.root, dep.config_path, dep.repo, log)


def _refused(result: CallToolResult, log: Path) -> None:
    """An error result in the tool's shape: code log.unwritable, the log named, nothing ran."""
    found = verdict(result)
    assert result.is_error and found["codes"] == ["log.unwritable"]
    assert found["verification_id"] is None and str(log) in found["reason"]
    assert found["recommendation"] and found["error"]


@POSIX
def test_a_stdio_server_refuses_tools_it_cannot_log_and_keeps_serving(tmp_path: Path) -> None:
    """Over stdio, with the log at its size limit: git_commit does not run (HEAD unchanged),
    a verification and a council post come back as clean errors, resources still answer, and
    the log is as it was."""
    dep = deploy(tmp_path / "deploy")
    before = seed(dep.log, 12)
    head = git(dep.repo, "rev-parse", "HEAD")
    wrapper = (
        "import os, resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 64}, {len(before) + 64}))\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'lingyi', *sys.argv[1:]])\n"
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", wrapper, "--config", str(dep.config_path), "serve"],
        env=ENV,
    )
    out: dict[str, Any] = {}

    async def session() -> None:
        async with Client(params) as client:
            with anyio.fail_after(60):
                out["commit"] = await client.call_tool("git_commit", COMMIT)
                out["verify"] = await client.call_tool(
                    "verify_assertion",
                    {"member": "lingyi", "type": "fact", "content": "灵通说v0.16审计已经完成"},
                )
                out["post"] = await client.call_tool(
                    "post_council_message", {"member": "lingyi", "content": "今天开会"}
                )
                out["recent"] = await client.read_resource("lingyi://log/recent")

    anyio.run(session)
    for name in ("commit", "verify", "post"):
        _refused(out[name], dep.log)
    assert git(dep.repo, "rev-parse", "HEAD") == head and dep.log.read_bytes() == before
    assert len(json.loads(out["recent"].contents[0].text)) == 12
    assert not (dep.root / "council.jsonl").exists() or "今天开会" not in (
        dep.root / "council.jsonl"
    ).read_text(encoding="utf-8")


# --- a real full filesystem (a small tmpfs, where the test may mount one) ----------------------


@contextlib.contextmanager
def small_filesystem(where: Path, size: str = "256k") -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    if sys.platform != "linux" or shutil.which("mount") is None:
        pytest.skip("a small filesystem needs Linux mount")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


PAGE = 4096  # tmpfs allocates in pages: a file's last page has room until it is full


def to_page_end(log: VerificationLog, path: Path, room: int) -> None:
    """Append small records until the last page of ``path`` has less than ``room`` bytes
    left, so that the next real record needs a new page (and the full disk refuses it)."""
    while 0 < PAGE - path.stat().st_size % PAGE >= room or path.stat().st_size % PAGE == 0:
        log.append({"kind": "verification", "content": "pad", "decision": "approved"})


def fill(folder: Path) -> Path:
    """Fill the filesystem of ``folder`` to the last byte; returns the filler file."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (b"\0" * 4096, b"\0"):
            with contextlib.suppress(OSError):
                while os.write(fd, chunk):
                    pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_refuses_the_tool_and_the_next_call_after_space_is_freed_recovers(
    tmp_path: Path,
) -> None:
    """The log on a full filesystem: git_commit is refused with log.unwritable and HEAD stays;
    a second call too; once space is freed the next call commits, and the chain holds with
    no torn line (the failed writes were taken back)."""
    with small_filesystem(tmp_path / "fs") as fs:
        dep = _log_on(deploy(tmp_path / "deploy"), fs / "verification.jsonl")
        seed(dep.log, 2)
        with VerificationLog(dep.log) as writer:
            to_page_end(writer, dep.log, 400)  # a guard record is ~1.5 KB
        before = dep.log.read_bytes()
        filler = fill(fs)
        head = git(dep.repo, "rev-parse", "HEAD")
        out: list[CallToolResult] = []

        async def body(client: Client) -> None:
            out.append(await client.call_tool("git_commit", COMMIT))
            out.append(await client.call_tool("search_knowledge", {"query": "气功"}))
            assert git(dep.repo, "rev-parse", "HEAD") == head
            filler.unlink()  # the operator frees space
            out.append(await client.call_tool("git_commit", COMMIT))

        with_client(dep, body)
        _refused(out[0], dep.log)
        _refused(out[1], dep.log)
        assert not out[2].is_error and git(dep.repo, "rev-parse", "HEAD") != head
        assert dep.log.read_bytes().startswith(before)
        report = verify_chain(dep.log)
        records = len(before.splitlines()) + 1
        assert report.ok and report.records == records and report.unreadable_count == 0


def test_a_full_checkpoint_disk_takes_the_record_back(tmp_path: Path) -> None:
    """The checkpoint file on a full filesystem, the log on another: the append fails (its
    anchor could not be written), the log is as it was, and after space is freed the next
    append is checkpointed and everything verifies."""
    with small_filesystem(tmp_path / "fs") as fs:
        keys = KeyRing.from_text(KEY, "t", "t")
        opts = LogOptions(keys=keys, checkpoints=fs / "anchor.jsonl")
        log = tmp_path / "log.jsonl"
        seed(log, 2, opts)
        with VerificationLog(log, opts) as writer:
            while 0 < PAGE - (fs / "anchor.jsonl").stat().st_size % PAGE >= 200:
                writer.append({"kind": "verification", "content": "pad", "decision": "approved"})
        before = log.read_bytes()
        filler = fill(fs)
        with VerificationLog(log, opts) as writer:
            with pytest.raises(LogError, match="cannot write the log checkpoints") as caught:
                writer.append({"kind": "verification", "content": "x", "decision": "approved"})
            assert str(fs / "anchor.jsonl") in str(caught.value)
            assert log.read_bytes() == before
            filler.unlink()
            writer.append({"kind": "verification", "content": "y", "decision": "approved"})
        result = verify_log(log, keys, fs / "anchor.jsonl")
        seq = len(before.splitlines()) + 1
        assert result.ok and result.checkpoints is not None and result.checkpoints.last_seq == seq
        assert [r.record.get("content") for r in read_log(log) if r.record][-1] == "y"


def test_enospc_is_reported_with_its_errno(tmp_path: Path) -> None:
    """The error names the log and says what the system said (for the operator)."""
    with small_filesystem(tmp_path / "fs", "64k") as fs:
        log = fs / "log.jsonl"
        fill(fs)
        with VerificationLog(log) as writer, pytest.raises(LogError) as caught:
            writer.append({"content": "x" * 10_000})
        assert os.strerror(errno.ENOSPC) in str(caught.value) and str(log) in str(caught.value)
        assert log.read_bytes() == b""


# Lines json and orjson could read differently: each must decode exactly as json.loads does.
LINES_AS_JSON_READS_THEM = [
    b'{"kind":"verification","ts":"2026-11-24T10:00:00.000Z","decision":"approved"}\n',
    b'{"latency_ms":123456789012345678901234567890}\n',  # beyond 64 bits: an int, not a float
    b'{"seq":[ -12345678901234567890123]}\n',
    b'{"seq":18446744073709551615,"v":-9223372036854775808}\n',
    b'{"seq":-18446744073709551616,"v":[1,-1]}\n',  # beyond 64 bits below zero
    b'{"seq":-1844674407370955161,"v":1}\n',  # "-" and 19 digits: left to json, exact
    b'{"id":"00000000000000000000012345","v":1}\n',  # a 26-digit id: a string
    b'{"latency_ms":NaN,"x":Infinity,"y":-Infinity}\n',  # json reads these, orjson does not
    b'{"latency_ms":1e400,"x":1.7976931348623159e308,"y":2.5e-324}\n',
    b'{"a":"\\ud800","b":"\\uDFFF\\uD800"}\n',  # lone surrogates
    '{"member":"灵通","content":"\\u7075 气功"}\n'.encode(),
    b'\xef\xbb\xbf{"a":1}\n',  # a BOM
    b'{"a":"\xff"}\n',  # not UTF-8
    b'{"a":"\xed\xa0\x80"}\n',  # a surrogate in UTF-8
    b'{"a":1,"a":2}\n',  # duplicate keys: the last wins
    b'{"a":"x\x01y"}\n',  # a control character
    b'{"a":1}x\n',
    b"[1, 2]\n",
    b'{"kind":"verification","decision":"appr',  # torn
    b"not json at all\n",
    b"[" * 3000 + b"]" * 3000 + b"\n",  # nested beyond any parser's depth
]


@pytest.mark.parametrize("raw", LINES_AS_JSON_READS_THEM)
def test_a_line_decodes_exactly_as_json_reads_it(raw: bytes) -> None:
    """The fast parser gives json.loads's value, or json's error and message, for any line."""
    line = decode_line(7, raw)
    try:
        expected: Any = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        assert line.record is None and line.error is not None
        assert isinstance(exc, RecursionError) or str(exc) in line.error or "torn" in line.error
        return
    if isinstance(expected, dict):
        assert line.record is not None
        assert repr(line.record) == repr(expected)  # types too: an int stays an int
    else:
        assert line.record is None and line.error == "not a JSON object"


# A forged last line, and whether the writer can link to it (only a string UTF-8 can hold).
FORGED_TAILS = [
    ("hash of a lone surrogate", '"hash":"\\ud800"', False),
    ("key_id of a lone surrogate", '"key_id":"\\udfff","hash":"' + "a" * 64 + '"', True),
    ("hash of an emoji, escaped", '"hash":"\\ud83d\\ude00"', True),
    ("hash of Chinese text", '"hash":"哈希"', True),
]


@pytest.mark.parametrize(("name", "tail", "linked"), FORGED_TAILS, ids=[t[0] for t in FORGED_TAILS])
def test_a_forged_last_line_never_stops_the_writer(
    tmp_path: Path, name: str, tail: str, linked: bool
) -> None:
    """A line appended by someone else whose hash (or key id) is a string no record can
    carry: the next record is still written whole and hashed (it links past that line to
    the record before it), and the chain check reports the break. A forged line whose hash
    can be carried is linked to, as any other last line."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path) as log:
        first = log.append({"kind": "note", "text": "before"})
    forged = '{"v":1,"id":"FORGED","ts":"2026-12-01T00:00:00.000Z","kind":"note","seq":2,'
    with path.open("ab") as f:
        f.write((forged + tail + "}\n").encode())
    with VerificationLog(path) as log:
        after = log.append({"kind": "note", "text": "after, 之后"})
    kept = [line.record for line in read_log(path) if line.record is not None]
    assert [r["id"] for r in kept] == [first["id"], "FORGED", after["id"]]
    written = json.loads(path.read_bytes().splitlines()[-1])
    assert written["text"] == "after, 之后" and len(written["hash"]) == 64
    assert written["prev"] != first["hash"] if linked else written["prev"] == first["hash"]
    assert not verify_chain(path).ok
