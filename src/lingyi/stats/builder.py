"""The pass that builds and extends the rollup: every line counted into the days of each zone.

:class:`RollupBuilder` is a :class:`~lingyi.stats.aggregate.LogPass` like the windowed
:class:`~lingyi.stats.aggregate.Aggregator`: the same chain verifier, the same integrity
findings, the same code counting a verification (:meth:`Counters.count`). Where the
aggregator keeps a record only if it is in its window, the builder counts it in its local
day of every zone it keeps, so that any window of whole days can later be summed from them.
It parses every line (there is no window outside which a line could be merely skimmed), so
its chain findings are exactly ``lingyi log verify``'s.

A builder can be saved and resumed (:func:`chain_state`, :func:`integrity_state` and their
inverses): the rollup is a builder stopped at a line boundary of the log.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lingyi.log.chain import GENESIS, ChainBreak, ChainReport, ChainVerifier
from lingyi.log.keys import KeyRing
from lingyi.log.reader import LogLine
from lingyi.log.records import subject_of
from lingyi.stats.aggregate import _DEC_INDEX, Integrity, LogPass, is_subject
from lingyi.stats.days import ZoneDays, member_key


class RollupBuilder(LogPass):
    """Counts every line into the days of each zone in ``zones``.

    ``subjects``: the ids of the verifications that appeals without a snapshot name, with
    the snapshot of the last such verification read (None while none was), kept up to date
    as lines are read (the last one wins, as in the lookup after a windowed pass).
    """

    def __init__(
        self,
        zones: list[ZoneDays],
        prev: str | None = GENESIS,
        keys: KeyRing | None = None,
    ) -> None:
        super().__init__(prev, keys)
        self.zones = {z.name: z for z in zones}
        self.subjects: dict[str, dict[str, Any] | None] = {}
        self.last_seq: int | None = None  # seq and hash of the last hashed record read
        self.last_hash: str | None = None

    def feed(self, line: LogLine) -> None:
        super().feed(line)
        record = line.record
        if record is None:
            return
        if self.subjects and is_subject(record, self.subjects):
            self.subjects[record["id"]] = subject_of(record).model_dump()
        if "hash" in record:
            seq, stored = record.get("seq"), record["hash"]
            self.last_seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
            self.last_hash = stored if isinstance(stored, str) else None

    def _verification(self, lineno: int, record: dict[str, Any]) -> None:
        key = self.valid_ts(lineno, record, record.get("ts"))
        if key is None:
            return
        member = member_key(record.get("member"))
        index = _DEC_INDEX.get(record.get("decision"))  # type: ignore[arg-type]
        for zone in self.zones.values():
            day = zone.day_for(key)
            if day is None:
                continue
            cell = day.cell(member)
            if index is None:
                cell.invalid_decision(lineno, record.get("id"))
            else:
                cell.count(record, member[0], index, lineno)

    def _approval(self, lineno: int, record: dict[str, Any]) -> None:
        """Count an approval event in its own day (by its ts), in each zone."""
        key = self.valid_ts(lineno, record, record.get("ts"))
        if key is None:
            return
        member, event = member_key(record.get("member")), str(record.get("event"))
        for zone in self.zones.values():
            day = zone.day_for(key)
            if day is not None:
                day.approval(member, event)

    def _outcome(self, lineno: int, record: dict[str, Any]) -> None:
        """Count a call outcome in its member's cell of its own day, in each zone."""
        key = self.valid_ts(lineno, record, record.get("ts"))
        if key is None:
            return
        member = member_key(record.get("member"))
        for zone in self.zones.values():
            day = zone.day_for(key)
            if day is not None:
                day.cell(member).outcome(record)

    def count_appeal(
        self,
        lineno: int,
        kind: str,
        outcome: object,
        subject: dict[str, Any],
        record: dict[str, Any],
    ) -> None:
        """Count an appeal in the day of the verification it concerns, in each zone."""
        key = self.valid_ts(lineno, record, subject.get("ts"))
        if key is None:
            return
        member = str(subject.get("member"))
        approved = subject.get("decision") == "approved"
        for zone in self.zones.values():
            day = zone.day_for(key)
            if day is not None:
                day.appeal(member, kind, outcome, approved, subject.get("codes"))

    def merge(self, other: RollupBuilder, line_offset: int) -> None:
        """Append the builder of the chunk that follows this one in the log."""
        self.merge_log(other, line_offset)
        for name, zone in other.zones.items():
            mine = self.zones[name]
            for day_name, day in zone.days.items():
                into = mine.days.get(day_name)
                if into is None:
                    into = mine.days[day_name] = type(day)(day.start, day.end)
                into.add_day(day, line_offset)
        for rid, subject in other.subjects.items():
            if subject is not None or rid not in self.subjects:
                self.subjects[rid] = subject
        if other.last_hash is not None:
            self.last_seq, self.last_hash = other.last_seq, other.last_hash


# --------------------------------------------------------------------------- saved state


def chain_state(chain: ChainVerifier) -> dict[str, Any]:
    """Where the chain verifier stands, as plain JSON (a verifier that started at line 1)."""
    return {
        "prev": chain.prev,
        "key_id": chain.key_id,
        "seq": chain.seq,
        "last": list(chain.last) if chain.last is not None else None,
        "report": dataclasses.asdict(chain.report),
    }


def restore_chain(state: dict[str, Any], keys: KeyRing | None) -> ChainVerifier:
    chain = ChainVerifier(state["prev"], keys)
    chain.key_id, chain.seq = state["key_id"], state["seq"]
    last = state["last"]
    chain.last = (last[0], last[1], last[2]) if last is not None else None
    report = dict(state["report"])
    report["breaks"] = [ChainBreak(**b) for b in report["breaks"]]
    report["unreadable"] = [(n, e) for n, e in report["unreadable"]]
    chain.report = ChainReport(**report)
    return chain


def integrity_state(integrity: Integrity) -> dict[str, Any]:
    return {
        "invalid": integrity.invalid,
        "unknown_schema": integrity.unknown_schema,
        "schema_versions": dict(integrity.schema_versions),
        "other_kinds": dict(integrity.other_kinds),
        "examples": integrity.examples,
    }


def restore_integrity(state: dict[str, Any]) -> Integrity:
    integrity = Integrity(invalid=state["invalid"], unknown_schema=state["unknown_schema"])
    integrity.schema_versions.update(state["schema_versions"])
    integrity.other_kinds.update(state["other_kinds"])
    integrity.examples = [dict(e) for e in state["examples"]]
    return integrity
