"""The council record: the messages members really posted.

A claim about what another member said is checked against this record. The default
record is an append-only JSONL file shared by every process of a deployment; replay
uses an in-memory record filled only by the transcript. Appends are serialised by a lock
file beside the record (``<record>.lock``, :class:`lingyi._locks.FileMutex`), on every OS.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Protocol

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lingyi._ids import new_id, utc_now
from lingyi._locks import FileMutex, lock_path
from lingyi.redact import redact_value

log = structlog.get_logger()


class CouncilMessage(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    id: str = Field(default_factory=new_id)
    sender: str = Field(alias="from")
    content: str
    ts: str = Field(default_factory=utc_now)


class CouncilRecord(Protocol):
    def messages_from(self, member: str) -> list[CouncilMessage]: ...

    def append(self, message: CouncilMessage) -> None: ...


class MemoryCouncil:
    """A council record held in memory (replay, tests)."""

    def __init__(self, messages: list[CouncilMessage] | None = None) -> None:
        self._by_member: dict[str, list[CouncilMessage]] = {}
        for message in messages or []:
            self.append(message)

    def messages_from(self, member: str) -> list[CouncilMessage]:
        return list(self._by_member.get(member, []))

    def append(self, message: CouncilMessage) -> None:
        self._by_member.setdefault(message.sender, []).append(message)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_member.values())


class FileCouncil:
    """A council record in a JSONL file; picks up lines other processes appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._memory = MemoryCouncil()
        self._offset = 0
        self._lock = threading.Lock()
        self._writers = FileMutex(lock_path(path))

    def messages_from(self, member: str) -> list[CouncilMessage]:
        with self._lock:
            self._catch_up()
        return self._memory.messages_from(member)

    def append(self, message: CouncilMessage) -> None:
        # The record is read by every member and reviewer: no secret is written to it.
        row = redact_value(message.model_dump(by_alias=True))
        line = json.dumps(row, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # newline="\n": the record is the same bytes on Windows (no "\r\n" translation).
        with self._writers, self.path.open("a", encoding="utf-8", newline="\n") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        with self._lock:
            self._catch_up()

    def _catch_up(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]  # leave a half-written line for later
        for raw in complete.splitlines():
            self._load_line(raw)
        self._offset += len(complete)

    def _load_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            self._memory.append(CouncilMessage.model_validate_json(raw))
        except ValidationError as exc:
            log.warning(
                "skipping unreadable council record line", path=str(self.path), error=str(exc)
            )
