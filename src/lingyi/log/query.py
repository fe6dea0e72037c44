"""Finding records in the verification log: the filters of ``lingyi log tail|query``.

Both read the index beside the log (:mod:`lingyi.store`), brought up to date first, so they
show only records the chain verifier authenticated: ``query`` oldest first, ``tail`` newest
first until the N-th match. Lines passed over (unreadable, or not authenticated: edited,
stripped of their hash, keyed otherwise) are counted in :class:`Skipped` so the CLI can say
how many it passed over instead of hiding them.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from lingyi.log.chain import RELINKED
from lingyi.log.keys import KeyRing
from lingyi.log.records import KINDS as RECORD_KINDS
from lingyi.log.records import failed_codes, normalise_ts, record_kind, ts_key
from lingyi.redact import redact_value
from lingyi.store import Store, open_store

KINDS = (*RECORD_KINDS, "all")
_TEXT_FIELDS = ("content", "reason", "recommendation", "note", "error")  # error: an outcome's


@dataclass(frozen=True)
class Query:
    """Every given filter must hold; ``code`` and ``tool`` accept shell globs (``git.*``).

    ``code`` matches a check that *failed*; for appeal records, ``member``, ``decision``
    and ``code`` apply to the appealed verification (its snapshot in ``subject``).
    """

    member: str | None = None
    decision: str | None = None
    code: str | None = None
    tool: str | None = None
    session: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    text: str | None = None
    kind: str = "verification"

    def matches(self, record: dict[str, Any]) -> bool:
        kind = record_kind(record)
        if self.kind != "all" and kind != self.kind:
            return False
        # An outcome names its own member and tool; an appeal's are its verification's.
        view = record if kind in ("verification", "outcome") else _subject_view(record)
        return self._in_time(record) and self._fields_match(view) and self._text_match(record)

    def _in_time(self, record: dict[str, Any]) -> bool:
        if self.start is None and self.end is None:
            return True
        key = normalise_ts(record.get("ts"))
        if key is None:
            return False
        after = self.start is None or key >= ts_key(self.start)
        return after and (self.end is None or key < ts_key(self.end))

    def _fields_match(self, view: dict[str, Any]) -> bool:
        wanted = {"member": self.member, "decision": self.decision, "session": self.session}
        if any(want is not None and want != view.get(k) for k, want in wanted.items()):
            return False
        if self.tool is not None and not fnmatchcase(str(_tool_name(view)), self.tool):
            return False
        codes = view.get("codes") if "codes" in view else failed_codes(view)
        return self.code is None or any(fnmatchcase(str(c), self.code) for c in codes or [])

    def _text_match(self, record: dict[str, Any]) -> bool:
        if not self.text:
            return True
        needle = self.text.casefold()
        return any(needle in text.casefold() for text in _texts(record))


def _subject_view(record: dict[str, Any]) -> dict[str, Any]:
    subject = record.get("subject")
    return subject if isinstance(subject, dict) else {}


def _tool_name(view: dict[str, Any]) -> object:
    tool = view.get("tool_call")
    return tool.get("name") if isinstance(tool, dict) else view.get("tool")


def _texts(record: dict[str, Any]) -> Iterator[str]:
    for name in _TEXT_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            yield value
    checks = record.get("checks")
    for check in checks if isinstance(checks, list) else ():
        if isinstance(check, dict) and isinstance(check.get("reason"), str):
            yield check["reason"]


@dataclass
class Skipped:
    """Lines passed over because they could not be read (torn, not JSON)."""

    LISTED = 5  # lines named; the count stays exact

    count: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, lineno: int, error: str | None) -> None:
        self.count += 1
        if len(self.first) < self.LISTED:
            self.first.append(f"line {lineno}: {error}")


def query_log(
    path: Path,
    query: Query,
    *,
    limit: int | None = None,
    skipped: Skipped | None = None,
    keys: KeyRing | None = None,
    index: Path | None = None,
) -> Iterator[dict[str, Any]]:
    """Matching records in log order, at most ``limit``; lines passed over go to ``skipped``."""
    with closing(_opened(path, keys, index, skipped)) as store:
        found = 0
        for _, record in store.records(_kinds(query)):
            if query.matches(record):
                yield record
                found += 1
                if limit is not None and found >= limit:
                    return


def tail_log(
    path: Path,
    query: Query,
    count: int = 20,
    *,
    skipped: Skipped | None = None,
    keys: KeyRing | None = None,
    index: Path | None = None,
) -> list[dict[str, Any]]:
    """The last ``count`` matching records, oldest first."""
    found: list[dict[str, Any]] = []
    with closing(_opened(path, keys, index, skipped)) as store:
        for _, record in store.records(_kinds(query), newest_first=True) if count > 0 else ():
            if query.matches(record):
                found.append(record)
                if len(found) >= count:
                    break
    found.reverse()
    return found


def _kinds(query: Query) -> tuple[str, ...] | None:
    return None if query.kind == "all" else (query.kind,)


def _opened(path: Path, keys: KeyRing | None, index: Path | None, skipped: Skipped | None) -> Store:
    """The index, up to date; the lines it passed over noted in ``skipped``."""
    store = open_store(path, keys, index)
    chain = store.summary.chain
    if skipped is not None:
        passed = [(n, e) for n, e in chain.unreadable]
        passed += [(b.lineno, f"not authenticated: {b.reason}") for b in chain.breaks
                   if b.reason != RELINKED]  # fmt: skip
        for lineno, error in sorted(passed):
            skipped.add(lineno, error)
        skipped.count = chain.unreadable_count + chain.break_count - chain.relinked
    return store


# --------------------------------------------------------------------------- output


# What identifies a record and its place in the chain is shown as written: redacting a hash
# that happens to look like a token would break `lingyi log verify` on piped output.
_AS_WRITTEN = frozenset({"id", "ts", "seq", "prev", "hash", "mac", "key_id", "schema", "kind"})


def shown(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as tail and query show it: a record written before the redaction catalogue
    covered a secret (or by another tool) has it replaced on the way out."""
    return {k: v if k in _AS_WRITTEN else redact_value(v) for k, v in record.items()}


def format_jsonl(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def local_time(ts: object, zone: tzinfo) -> str:
    key = normalise_ts(ts)
    if key is None:
        return f"{ts!s:<25}"
    moment = datetime.fromisoformat(key).astimezone(zone)
    return moment.isoformat(sep=" ", timespec="seconds")


def format_human(record: dict[str, Any], zone: tzinfo) -> str:
    """One line a person can scan: time (in ``zone``), verdict, who, what, why, id."""
    when, kind = local_time(record.get("ts"), zone), record_kind(record)
    if kind == "appeal":
        text = f"APPEAL    of {record.get('appeal_of')} by {record.get('by')}: "
        text += _one_line(str(record.get("reason", "")))
    elif kind == "appeal_resolution":
        outcome = str(record.get("outcome", "?")).upper()
        text = f"{outcome:<9} appeal {record.get('appeal_id')} by {record.get('by')}: "
        text += _one_line(str(record.get("note", "")))
    elif kind == "approval":
        text = _approval_text(record)
    elif kind == "outcome":
        text = _outcome_text(record)
    else:
        text = _verification_text(record)
    return f"{when}  {text}  [{record.get('id')}]"


def _approval_text(record: dict[str, Any]) -> str:
    """APPROVAL <event> <id>: member · tool (by whom, why), for a human approval's step."""
    event = str(record.get("event", "?"))
    text = f"APPROVAL  {event:<9} {record.get('approval_id')}: {record.get('member')} · "
    text += str(record.get("tool"))
    if record.get("by"):
        text += f" by {record.get('by')}"
    return text + (f": {_one_line(str(record['reason']))}" if record.get("reason") else "")


def _outcome_text(record: dict[str, Any]) -> str:
    """OUTCOME <status> member · tool of <verification>: error, for a call that did not run."""
    status = str(record.get("status", "?")).upper()
    text = f"OUTCOME   {status:<9} {record.get('member')} · {record.get('tool')}"
    text += f" of {record.get('verification_id')}"
    if record.get("approval_id"):
        text += f" (approval {record.get('approval_id')})"
    return text + (f": {_one_line(str(record['error']))}" if record.get("error") else "")


def text_width(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int, *, right: bool = False) -> str:
    fill = " " * max(width - text_width(text), 0)
    return fill + text if right else text + fill


def _verification_text(record: dict[str, Any]) -> str:
    codes = ",".join(failed_codes(record)) or "-"
    tool = _tool_name(record) or "-"
    decision = str(record.get("decision", "?")).upper()
    who, kind = str(record.get("member")), str(record.get("type"))
    head = f"{decision:<9} {pad(who, 12)} {pad(kind, 13)} {tool!s}"
    return f"{head}  {codes}  {_one_line(str(record.get('reason', '')))}"


def _one_line(text: str, width: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
