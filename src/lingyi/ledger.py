"""The per-session evidence ledger: what tools really returned.

Verification checks assertions against this record, never against the assertion's own
word. Entries are added only by the server after a tool really ran (or by replay from a
transcript's ``tool_result`` events).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from lingyi._ids import utc_now
from lingyi.models import Evidence


class LedgerEntry(BaseModel):
    session: str
    member: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    ts: str = Field(default_factory=utc_now)


class SessionLedger:
    """Evidence of one session, indexed by id and URL."""

    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []
        self.by_id: dict[str, tuple[Evidence, LedgerEntry]] = {}
        self.urls: set[str] = set()

    def add(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)
        for item in entry.evidence:
            self.by_id[item.id] = (item, entry)
            if item.url:
                self.urls.add(item.url)

    def has(self, evidence_id: str) -> bool:
        return evidence_id in self.by_id

    def from_tools(self, tools: set[str] | None = None) -> Iterator[Evidence]:
        """Evidence produced by the given tools (all tools when None), oldest first."""
        for entry in self.entries:
            if tools is None or entry.tool in tools:
                yield from entry.evidence


class Ledger:
    """All sessions' evidence. Thread-safe for one writer and many readers."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionLedger] = {}
        self._lock = threading.Lock()

    def record(
        self,
        session: str,
        member: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        evidence: list[Evidence] | None = None,
    ) -> LedgerEntry:
        entry = LedgerEntry(
            session=session,
            member=member,
            tool=tool,
            arguments=arguments or {},
            evidence=evidence or [],
        )
        with self._lock:
            self._sessions.setdefault(session, SessionLedger()).add(entry)
        return entry

    def session(self, session: str) -> SessionLedger:
        return self._sessions.get(session) or SessionLedger()

    def entries_by(self, member: str) -> Iterator[LedgerEntry]:
        """Every session's entries produced by ``member``: evidence of that member's work."""
        for ledger in list(self._sessions.values()):
            yield from (e for e in ledger.entries if e.member == member)
