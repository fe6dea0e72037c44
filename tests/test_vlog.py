"""The verification log: hash chain, tamper detection, torn lines, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

from lingyi.log import GENESIS, VerificationLog, read_log, record_hash, verify_chain


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
    assert "[REDACTED]" in text and verify_chain(path).ok


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
