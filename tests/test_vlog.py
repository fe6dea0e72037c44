"""The verification log: hash chain, tamper detection, torn lines, concurrent writers,
reading backwards, typed records, and the portable locks it shares with the council record."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from lingyi._locks import FileMutex
from lingyi.council import CouncilMessage, FileCouncil
from lingyi.log import (
    GENESIS,
    AppealRecord,
    AppealResolutionRecord,
    Subject,
    VerificationLog,
    VerificationRecord,
    parse_record,
    read_log,
    record_hash,
    reversed_lines,
    tail_records,
    verification_record,
    verify_chain,
)
from lingyi.log.chain import MAX_LISTED
from lingyi.models import (
    Assertion,
    AssertionType,
    CheckResult,
    Decision,
    Fallback,
    Stage,
    ToolCall,
    VerificationResult,
)
from lingyi.stats import compute_stats, week_window


def write(path: Path, n: int, tag: str = "r") -> None:
    with VerificationLog(path) as log:
        for i in range(n):
            log.append({"kind": "verification", "content": f"{tag}-{i}", "decision": "approved"})


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_records_form_a_chain(tmp_path: Path) -> None:
    """Each record links to the one before it and its hash covers its content."""
    path = tmp_path / "log.jsonl"
    write(path, 3)
    records = [json.loads(line) for line in lines(path)]
    assert records[0]["prev"] == GENESIS
    assert [r["prev"] for r in records[1:]] == [r["hash"] for r in records[:-1]]
    assert all(record_hash(r) == r["hash"] for r in records)
    assert all(r["v"] == 1 and r["ts"].endswith("Z") and len(r["id"]) == 26 for r in records)
    assert verify_chain(path).ok


def test_ids_sort_by_time(tmp_path: Path) -> None:
    """Record ids sort in the order records were written."""
    path = tmp_path / "log.jsonl"
    write(path, 50)
    ids = [json.loads(line)["id"] for line in lines(path)]
    assert ids == sorted(ids)


def test_edited_record_is_found(tmp_path: Path) -> None:
    """Changing a decision in place breaks the chain at that record."""
    path = tmp_path / "log.jsonl"
    write(path, 5)
    rows = lines(path)
    rows[2] = rows[2].replace('"approved"', '"rejected"')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    report = verify_chain(path)
    assert not report.ok
    assert report.first_bad is not None and report.first_bad.lineno == 3
    assert "edited" in report.first_bad.reason


def test_deleted_record_is_found(tmp_path: Path) -> None:
    """Removing a record breaks the link of the record after it."""
    path = tmp_path / "log.jsonl"
    write(path, 5)
    rows = lines(path)
    del rows[1]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    report = verify_chain(path)
    assert report.first_bad is not None and report.first_bad.lineno == 2
    assert "deleted" in report.first_bad.reason


def test_torn_last_line_is_reported_and_appending_continues(tmp_path: Path) -> None:
    """A crash mid-write leaves a torn line: reported, skipped, and the chain goes on."""
    path = tmp_path / "log.jsonl"
    write(path, 3)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"v":1,"id":"TORN","content":"half')
    before = verify_chain(path)
    assert [n for n, _ in before.unreadable] == [4] and "torn" in before.unreadable[0][1]
    write(path, 2, tag="after")
    report = verify_chain(path)
    assert report.ok and report.records == 5
    assert report.unreadable[0][0] == 4 and "interrupted" in report.unreadable[0][1]
    assert [line.record["content"] for line in read_log(path) if line.record][-1] == "after-1"


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    """API keys and tokens in model content are redacted before writing."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path) as log:
        log.append(
            {
                "content": "use key sk-ant-api03-abcdefghijklmnopqrstuvwx now",
                "tool_call": {
                    "name": "x",
                    "arguments": {
                        "token": "ghp_abcdefghijklmnopqrstuvwxyz0123",
                        "api_key": "plain-secret-value",
                    },
                },
            }
        )
    text = path.read_text(encoding="utf-8")
    assert "sk-ant-api03" not in text and "ghp_abc" not in text and "plain-secret" not in text
    assert "[REDACTED:" in text and verify_chain(path).ok


def test_threads_never_interleave_or_lose_records(tmp_path: Path) -> None:
    """Eight threads sharing one log object write 1,600 records; all arrive, chain intact."""
    path = tmp_path / "log.jsonl"
    log = VerificationLog(path)
    threads = [
        threading.Thread(
            target=lambda t=t: [log.append({"content": f"t{t}-{i}"}) for i in range(200)]
        )
        for t in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    report = verify_chain(path)
    assert report.ok and report.records == 1600 and not report.unreadable


def test_processes_never_interleave_or_lose_records(tmp_path: Path) -> None:
    """Four processes, each with its own log object on one file: every record survives."""
    path = tmp_path / "log.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=write, args=(path, 300, f"p{p}")) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    report = verify_chain(path)
    assert report.ok, report.first_bad
    assert report.records == 1200 and not report.unreadable
    contents = {line.record["content"] for line in read_log(path) if line.record}
    assert contents == {f"p{p}-{i}" for p in range(4) for i in range(300)}


# --------------------------------------------------------------------------- one chain rule


def _hashed_lines(n: int, tmp_path: Path) -> list[str]:
    path = tmp_path / "source.jsonl"
    write(path, n)
    return lines(path)


def _unhashed(content: str) -> str:
    return json.dumps(
        {"ts": "2026-11-24T10:00:00+00:00", "content": content, "decision": "approved"}
    )


def _rehash(row: str, **change: object) -> str:
    """An edit whose author recomputed the record's own hash (but not the next prev)."""
    record = {**json.loads(row), **change}
    record["hash"] = record_hash(record)
    return json.dumps(record, ensure_ascii=False)


# (name, how the five hashed lines r[0..4] are laid out, breaks, edited, relinked, unhashed,
#  unreadable). Both verifiers must say exactly this.
DAMAGES: list[tuple[str, Callable[[list[str]], list[str]], int, int, int, int, int]] = [
    ("intact", lambda r: r, 0, 0, 0, 0, 0),
    ("a record older than the chain first", lambda r: [_unhashed("old"), *r], 0, 0, 0, 1, 0),
    ("a hash-less record in the middle", lambda r: [*r[:2], _unhashed("o"), *r[2:]], 1, 0, 0, 0, 0),
    ("edited in place", lambda r: [r[0], r[1].replace("r-1", "R-1"), *r[2:]], 1, 1, 0, 0, 0),
    ("edited and re-hashed", lambda r: [r[0], _rehash(r[1], content="x"), *r[2:]], 1, 0, 1, 0, 0),
    ("deleted", lambda r: [r[0], *r[2:]], 1, 0, 1, 0, 0),
    ("reordered", lambda r: [r[0], r[2], r[1], *r[3:]], 3, 0, 3, 0, 0),
    ("first record cut off", lambda r: r[1:], 1, 0, 1, 0, 0),
    ("garbage line", lambda r: [*r[:2], "not json", *r[2:]], 0, 0, 0, 0, 1),
    ("torn last line", lambda r: [*r, '{"v":1,"id":"TORN'], 0, 0, 0, 0, 1),
    ("hash not a string", lambda r: [r[0], r[1].replace('"hash":"', '"hash":1,"x":"'), *r[2:]],
     2, 1, 1, 0, 0),  # the next record's link cannot be followed either
]  # fmt: skip


@pytest.mark.parametrize(
    ("layout", "breaks", "edited", "relinked", "unhashed", "unreadable"),
    [d[1:] for d in DAMAGES],
    ids=[d[0] for d in DAMAGES],
)
def test_log_verify_and_stats_give_one_verdict(
    tmp_path: Path,
    layout: Callable[[list[str]], list[str]],
    breaks: int,
    edited: int,
    relinked: int,
    unhashed: int,
    unreadable: int,
) -> None:
    """`log verify` and the stats' integrity agree on every damage (issue 7: a log starting
    with a record older than the chain was two breaks for one and intact for the other)."""
    path = tmp_path / "log.jsonl"
    rows = layout(_hashed_lines(5, tmp_path))
    end = "" if "TORN" in rows[-1] else "\n"  # a torn line has no newline
    path.write_text("\n".join(rows) + end, encoding="utf-8")
    report = verify_chain(path)
    got = (report.break_count, report.edited, report.relinked, report.unhashed)
    assert (*got, report.unreadable_count) == (breaks, edited, relinked, unhashed, unreadable)
    assert report.ok is (breaks == 0)
    window = week_window("2026-W48", ZoneInfo("UTC"))
    integrity = compute_stats(path, window)["integrity"]
    assert integrity["chain_ok"] is report.ok
    assert (integrity["chain_breaks"], integrity["edited"], integrity["relinked"]) == (
        breaks, edited, relinked,
    )  # fmt: skip
    assert (integrity["unhashed"], integrity["unreadable"]) == (unhashed, unreadable)
    assert [e["line"] for e in integrity["examples"]] == sorted(
        [b.lineno for b in report.breaks] + [n for n, _ in report.unreadable]
    )


def test_the_writer_links_as_the_verifier_reads(tmp_path: Path) -> None:
    """After an older record, a garbage line or a torn line, new records keep the chain."""
    path = tmp_path / "log.jsonl"
    path.write_text(_unhashed("old") + "\n", encoding="utf-8")
    write(path, 2)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("garbage\n" + '{"v":1,"hash":"h", "torn')
    write(path, 2, tag="after")
    report = verify_chain(path)
    assert report.ok and report.records == 5 and report.unhashed == 1
    assert report.first_unhashed == 1 and report.unreadable_count == 2


def test_report_lists_are_bounded_but_counts_exact(tmp_path: Path) -> None:
    """A log of garbage lists the first MAX_LISTED lines and counts them all."""
    path = tmp_path / "log.jsonl"
    path.write_text("x\n" * (MAX_LISTED + 5), encoding="utf-8")
    report = verify_chain(path)
    assert report.unreadable_count == MAX_LISTED + 5 and len(report.unreadable) == MAX_LISTED
    assert report.as_json()["unreadable_count"] == MAX_LISTED + 5 and report.ok


# --------------------------------------------------------------------------- reading back


def _records(path: Path) -> list[dict[str, Any]]:
    return [line.record for line in read_log(path) if line.record is not None]


@pytest.mark.parametrize("block", [7, 64, 1000, 64 * 1024])
def test_reading_backwards_gives_the_lines_reversed(tmp_path: Path, block: int) -> None:
    """Backwards, with any block size (smaller than a record too), the same lines reversed,
    each whole and at its byte offset; a torn last line and empty lines included."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path) as log:
        for i in range(30):
            log.append({"content": "长" * (i * 37 % 300), "n": i})
    with path.open("ab") as handle:
        handle.write(b"\n\n" + b'{"torn": "half')
    forward = list(read_log(path))
    backward = list(reversed_lines(path, block=block))
    assert [line.raw for line in backward] == [line.raw for line in reversed(forward)]
    assert [line.offset for line in backward] == [line.offset for line in reversed(forward)]
    data = path.read_bytes()
    assert all(data[line.offset : line.offset + len(line.raw)] == line.raw for line in backward)


def test_tail_records_by_kind_and_of_any_size(tmp_path: Path) -> None:
    """The last n records of the kinds asked for, oldest first; a 3 MB record comes whole."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path) as log:
        log.append({"kind": "verification", "content": "big " * 750_000})
        for i in range(5):
            log.append({"kind": "verification" if i % 2 else "appeal", "n": i})
    with path.open("ab") as handle:
        handle.write(b'{"torn')
    assert [r.get("n") for r in tail_records(path, 3)] == [2, 3, 4]
    assert [r["n"] for r in tail_records(path, 2, kinds={"verification"})] == [1, 3]
    every = tail_records(path, 100, kinds=("verification",))
    assert len(every) == 3 and len(every[0]["content"]) == 3_000_000
    assert tail_records(path, 0) == [] and tail_records(tmp_path / "none.jsonl", 5) == []


def test_tail_does_not_read_the_whole_log(tmp_path: Path) -> None:
    """A log whose first 4 GiB are a hole (sparse file): the tail answers without reading them
    (the bytes this process reads, from /proc/self/io, stay far below the hole's size)."""
    path = tmp_path / "log.jsonl"
    with path.open("wb") as handle:
        handle.truncate(4 << 30)  # no disk used; reading it forwards would take minutes
    write(path, 3)
    before = _bytes_read()
    assert [r["content"] for r in tail_records(path, 2)] == ["r-1", "r-2"]
    assert _bytes_read() - before < 64 << 20


def _bytes_read() -> int:
    """Bytes this process has read through system calls (Linux's rchar)."""
    io = Path("/proc/self/io")
    if not io.exists():
        pytest.skip("needs /proc/self/io (Linux)")
    fields = dict(line.split(": ") for line in io.read_text().splitlines())
    return int(fields["rchar"])


# --------------------------------------------------------------------------- typed records


_CHECK = CheckResult(stage=Stage.BOUNDARY, code="boundary.medical", passed=False, reason="r")
_PUSH = ToolCall(name="git_push", arguments={"repo": "/r"})
RECORD_CASES = [
    ("灵知", "lingzhi", None, None, []),
    ("lingflow", "lingflow", _PUSH, Fallback(kind="dry_run", tool_call=_PUSH), [_CHECK]),
    ("nobody", None, _PUSH, None, [_CHECK, _CHECK]),
]


@pytest.mark.parametrize(("given", "member", "tool", "fallback", "checks"), RECORD_CASES)
def test_verification_record_is_what_the_model_writes(
    given: str,
    member: str | None,
    tool: ToolCall | None,
    fallback: Fallback | None,
    checks: list[CheckResult],
) -> None:
    """The record of a verdict (built as a dict for speed) is exactly the JSON of a valid
    VerificationRecord: every contract field, nothing the model does not know."""
    assertion = Assertion(member=given, type=AssertionType.ACTION, content="c", tool_call=tool)
    result = VerificationResult(
        id="V1", decision=Decision.REJECTED, reason="no", checks=checks, fallback=fallback
    )
    record = verification_record(assertion, result, "server", member)
    assert VerificationRecord.model_validate(record).to_log() == record
    assert record["member"] == (member or given)
    assert ("member_as_given" in record) is (member is not None and member != given)
    contract = {"id", "session", "member", "type", "content", "tool_call", "decision", "checks",
                "reason", "latency_ms", "policy_version"}  # fmt: skip
    assert contract <= set(record) and record["kind"] == "verification"
    typed = parse_record({**record, "v": 1, "ts": "2026-11-24T10:00:00.000Z", "later": 1})
    assert isinstance(typed, VerificationRecord) and typed.member == record["member"]


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"member": "m", "type": "fact", "content": "c", "decision": "approved", "reason": "r",
          "checks": [], "latency_ms": 1, "policy_version": "p", "source": "s", "session": "s"},
         VerificationRecord),  # no kind: the first schema had only verifications
        ({"kind": "appeal", "appeal_of": "V", "reason": "r", "by": "b", "subject": {}},
         AppealRecord),
        ({"kind": "appeal_resolution", "appeal_of": "V", "appeal_id": "A", "outcome": "upheld",
          "note": "n", "by": "b"}, AppealResolutionRecord),
    ],
)  # fmt: skip
def test_parse_record_by_kind(data: dict[str, Any], kind: type) -> None:
    """Each kind parses into its model; the envelope fields are optional."""
    assert isinstance(parse_record(data), kind)


def test_bad_records_are_refused_with_the_field() -> None:
    """A misspelt field when writing, or an unknown kind when reading, is an error."""
    with pytest.raises(ValidationError, match="apeal_of"):
        AppealRecord(apeal_of="V", reason="r", by="b", subject=Subject())  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="unknown record kind 'vote'"):
        parse_record({"kind": "vote"})


def test_appending_a_model_writes_its_json(tmp_path: Path) -> None:
    """A record model is appended as its JSON object, completed by the writer."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path) as log:
        written = log.append(AppealRecord(appeal_of="V", reason="r", by="b", subject=Subject()))
    assert written["kind"] == "appeal" and written["prev"] == GENESIS
    assert _records(path) == [written] and verify_chain(path).ok


# --------------------------------------------------------------------------- portability


# Run in a fresh interpreter: lingyi's own modules cannot import the POSIX-only modules, and
# os.pread (absent on Windows) is gone; third-party packages (mcp, filelock) keep their own
# platform branches, which this machine cannot switch.
_WITHOUT_POSIX = """
import builtins, importlib, os, pkgutil, sys
from pathlib import Path
real_import = builtins.__import__
def guarded(name, globals=None, *args, **kwargs):
    importer = (globals or {}).get("__name__", "")
    if name.split(".")[0] in ("fcntl", "pwd", "grp", "termios") and importer.startswith("lingyi"):
        raise ImportError(f"{importer} imports {name}, which Windows does not have")
    return real_import(name, globals, *args, **kwargs)
builtins.__import__ = guarded
del os.pread
import lingyi
names = [m.name for m in pkgutil.walk_packages(lingyi.__path__, "lingyi.")]
for name in names:
    if not name.endswith("__main__"):
        importlib.import_module(name)
from lingyi.log import VerificationLog, verify_chain
with VerificationLog(Path(sys.argv[1])) as log:
    for i in range(3):
        log.append({"content": str(i)})
assert verify_chain(Path(sys.argv[1])).records == 3
print(len(names))
"""


def test_the_package_imports_and_logs_without_posix_modules(tmp_path: Path) -> None:
    """Every module of lingyi imports, and the log is written, without fcntl or os.pread."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_POSIX, str(tmp_path / "log.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 40


def test_lock_files_sit_beside_the_log(tmp_path: Path) -> None:
    """Writers coordinate through <log>.lock; the log itself is never locked (Windows readers)."""
    path = tmp_path / "log.jsonl"
    write(path, 1)
    assert (tmp_path / "log.jsonl.lock").exists()
    with FileMutex(tmp_path / "log.jsonl.lock"):
        assert read_log(path) is not None and len(_records(path)) == 1


def _post(path: Path, tag: str, count: int) -> None:
    council = FileCouncil(path)
    for i in range(count):
        council.append(CouncilMessage(sender=f"m{tag}", content=f"{tag}-{i} " + "长" * 500))


def test_council_record_writers_never_interleave(tmp_path: Path) -> None:
    """Four processes post to one council record: every message arrives whole and readable."""
    path = tmp_path / "council.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_post, args=(path, str(p), 100)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    reader = FileCouncil(path)
    for p in range(4):
        contents = [m.content.split()[0] for m in reader.messages_from(f"m{p}")]
        assert contents == [f"{p}-{i}" for i in range(100)]
    assert len(path.read_text(encoding="utf-8").splitlines()) == 400


def _crafted(body: str) -> bytes:
    """A line laid out as the writer does, hashed over its own bytes (as a forger would)."""
    digest = hashlib.sha256(body.encode()).hexdigest()
    return (body[:-1] + f',"hash":"{digest}"}}\n').encode()
