"""The log's checkpoints, read by the index as it reads the log, as ``lingyi log verify`` does.

Each new checkpoint (record ``seq`` has ``hash``, signed) is checked once: its signature
(:func:`lingyi.log.checkpoints.refusal`), its order, and the hash the index holds for record
``seq`` (the chain's own links: every hashed line, as the verifier followed it). A
checkpoint beyond the records read so far is not consumed: either the writer is
appending that record now, or records were cut off the end of the log; it is counted as
``beyond_end`` until the log holds that record again.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from lingyi.log.checkpoints import CheckpointReport, parse_checkpoint, refusal
from lingyi.log.keys import KeyRing
from lingyi.log.reader import raw_lines


def read_checkpoints(
    db: sqlite3.Connection,
    path: Path,
    keys: KeyRing | None,
    saved: dict[str, Any],
    log_seq: int,
) -> tuple[dict[str, Any], CheckpointReport]:
    """The state to resume from next time (``offset``, ``lines``, the report), and the
    report as of now (checkpoints beyond the log's last record ``log_seq`` counted)."""
    state = {"offset": 0, "lines": 0, "report": vars(CheckpointReport(str(path))), **saved}
    report = CheckpointReport(**state["report"])
    report.present, report.log_seq = path.is_file(), log_seq
    pending = None
    for number, offset, raw in raw_lines(path, state["offset"]):
        if not raw.endswith(b"\n"):
            break
        data = parse_checkpoint(raw)
        seq = data["seq"] if data is not None else 0
        if pending is None and data is not None and seq > log_seq and seq > (report.last_seq or 0):
            pending = (state["lines"] + number, seq)  # beyond the log: not consumed
        if pending is None:
            _check(db, report, keys, state["lines"] + number, data)
            state["offset"], state["lines"] = offset + len(raw), state["lines"] + number
    state["report"] = vars(report)
    now = CheckpointReport(**{**vars(report), "problems": list(report.problems)})
    if pending is not None:
        now.beyond_end += 1
        now.note(f"the log ends at record {log_seq}, but checkpoints line {pending[0]} says "
                 f"record {pending[1]} was written (records were cut off the end of the log)")  # fmt: skip
    if not now.present and log_seq:
        now.bad += 1
        now.note("the checkpoint file does not exist (deleted, or never written)")
    return state, now


def _check(
    db: sqlite3.Connection,
    report: CheckpointReport,
    keys: KeyRing | None,
    lineno: int,
    data: dict[str, Any] | None,
) -> None:
    report.checkpoints += 1
    why, how = ("not a checkpoint", "") if data is None else refusal(data, keys)
    if data is not None and why is None and data["seq"] <= (report.last_seq or 0):
        why = f"seq {data['seq']} after seq {report.last_seq} (out of order)"
    if why is not None or data is None:
        report.bad += 1
        report.note(f"checkpoints line {lineno}: {why}")
        return
    setattr(report, how, getattr(report, how) + 1)
    report.last_seq = seq = data["seq"]
    row = db.execute("SELECT hash FROM links WHERE seq = ? ORDER BY line DESC", (seq,)).fetchone()
    if row is None:
        report.mismatched += 1
        report.note(f"checkpoints line {lineno}: record {seq} is not in the log")
    elif row[0] != data["hash"]:
        report.mismatched += 1
        report.note(
            f"record {seq} has hash {str(row[0])[:16]}…, checkpoints line {lineno} says "
            f"{str(data['hash'])[:16]}… (the record was rewritten)"
        )
