"""Appeals against the guard's verdicts, kept in the verification log itself.

An appeal and its resolution are appended records (the log stays append-only and
hash-chained): ``{"kind": "appeal", "appeal_of": <verification id>, ...}`` and
``{"kind": "appeal_resolution", "appeal_of", "appeal_id", "outcome", ...}``. Both carry a
``subject``: a snapshot of the appealed verification (ts, member, decision, failed check
codes), so that stats attribute appeals per member and per code in one streaming pass
without remembering every verification.

Records are looked up in the index beside the log (:mod:`lingyi.store`), which holds only
records the chain verifier authenticated. The check and the append run under a lock file of
their own next to the log (``<log>.appeal.lock``), so two people cannot open the same appeal
twice; the writer's own lock is taken inside it, for the append only, so verifications go
on being logged while an appeal is looked up.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from lingyi._locks import FileMutex
from lingyi._logging import get_logger
from lingyi.errors import LingyiError
from lingyi.log.records import (
    OUTCOMES,
    AppealRecord,
    AppealResolutionRecord,
    RecordModel,
    Subject,
    record_kind,
    subject_of,
)
from lingyi.log.writer import LogOptions, VerificationLog
from lingyi.store import Store, open_store

log = get_logger(__name__)


class AppealError(LingyiError):
    """An appeal cannot be recorded or resolved (the message says why and what to do)."""


class UnknownRecordError(AppealError):
    """No record in the log has the id given."""


class NotAVerificationError(AppealError):
    """The id names a record that is not a verification (an appeal of an appeal)."""


class AppealOpenError(AppealError):
    """The verification already has an appeal waiting for a decision."""


class NoOpenAppealError(AppealError):
    """There is no appeal to resolve for the id given."""


class AlreadyResolvedError(AppealError):
    """The appeal already has a resolution."""


def default_actor() -> str:
    """Who is acting: ``$LINGYI_USER``, else the login name."""
    try:
        return os.environ.get("LINGYI_USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass
class _Found:
    """Everything in the log about one id: the record, its appeals, their resolutions."""

    target: dict[str, Any] | None = None
    appeals: list[dict[str, Any]] = field(default_factory=list)
    resolutions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def open_appeals(self) -> list[dict[str, Any]]:
        return [a for a in self.appeals if a.get("id") not in self.resolutions]


def _find(path: Path, ref: str, options: LogOptions | None) -> _Found:
    """The record ``ref`` names, and the appeals and resolutions that concern it."""
    found = _Found()
    with closing(_store(path, options)) as store:
        found.target = store.find(ref)
        for _, record in store.appeals(ref):
            if record_kind(record) == "appeal":
                found.appeals.append(record)
            else:
                found.resolutions[str(record.get("appeal_id"))] = record
    return found


def _store(path: Path, options: LogOptions | None) -> Store:
    keys, index = (options.keys, options.index) if options is not None else (None, None)
    return open_store(path, keys, index)


@contextmanager
def _appeal_lock(path: Path) -> Iterator[None]:
    mutex = FileMutex(path.with_name(path.name + ".appeal.lock"))
    try:
        with mutex:
            yield
    finally:
        mutex.close()


def file_appeal(
    path: Path,
    verification_id: str,
    reason: str,
    by: str | None = None,
    *,
    options: LogOptions | None = None,
) -> dict[str, Any]:
    """Append an appeal against a verification and return the record written.

    ``options``: how the log is written (its key, checkpoints), as for the guard's records.
    """
    if not reason.strip():
        raise AppealError('an appeal needs a reason (--reason "...")')
    with _appeal_lock(path):
        found = _find(path, verification_id, options)
        target = _require_verification(found, verification_id, path)
        if found.open_appeals():
            open_id = found.open_appeals()[-1].get("id")
            raise AppealOpenError(
                f"verification {verification_id} already has an open appeal {open_id}; "
                f"resolve it first: lingyi appeal resolve {open_id} --uphold|--overturn"
            )
        record = AppealRecord(
            appeal_of=verification_id,
            reason=reason,
            by=by or default_actor(),
            subject=subject_of(target),
        )
        return _append(path, record, options)


def _require_verification(found: _Found, ref: str, path: Path) -> dict[str, Any]:
    if found.target is None:
        raise UnknownRecordError(f"no record with id {ref} in {path}")
    kind = record_kind(found.target)
    if kind != "verification":
        raise NotAVerificationError(
            f"{ref} is an {kind} record; only verifications can be appealed"
        )
    return found.target


def resolve_appeal(
    path: Path,
    ref: str,
    outcome: str,
    note: str,
    by: str | None = None,
    *,
    options: LogOptions | None = None,
) -> dict[str, Any]:
    """Record the human decision on an appeal; ``ref`` is the appeal or verification id."""
    if outcome not in OUTCOMES:
        raise AppealError(f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
    with _appeal_lock(path):
        found = _find(path, ref, options)
        appeal = _appeal_to_resolve(found, ref, path)
        record = AppealResolutionRecord(
            appeal_of=_text(appeal.get("appeal_of")),
            appeal_id=_text(appeal.get("id")),
            outcome=cast(Literal["upheld", "overturned"], outcome),
            note=note,
            by=by or default_actor(),
            subject=_subject(appeal.get("subject")) or _subject_if_verification(found.target),
        )
        return _append(path, record, options)


def _appeal_to_resolve(found: _Found, ref: str, path: Path) -> dict[str, Any]:
    if found.target is None:
        raise UnknownRecordError(f"no record with id {ref} in {path}")
    kind = record_kind(found.target)
    if kind == "appeal":
        appeal = found.target
    elif kind == "verification":
        appeal = _open_appeal_of(found, ref)
    else:
        raise AppealError(f"{ref} is an {kind} record, not an appeal or a verification")
    previous = found.resolutions.get(str(appeal.get("id")))
    if previous is not None:
        raise AlreadyResolvedError(
            f"appeal {appeal.get('id')} was already resolved: {previous.get('outcome')} "
            f"by {previous.get('by')} ({previous.get('id')})"
        )
    return appeal


def _open_appeal_of(found: _Found, ref: str) -> dict[str, Any]:
    open_appeals = found.open_appeals()
    if open_appeals:
        return open_appeals[-1]
    if found.appeals:
        raise AlreadyResolvedError(f"every appeal of verification {ref} is already resolved")
    raise NoOpenAppealError(
        f'verification {ref} has no appeal; file one first: lingyi appeal {ref} --reason "..."'
    )


def _subject_if_verification(record: dict[str, Any] | None) -> Subject | None:
    if record is not None and record_kind(record) == "verification":
        return subject_of(record)
    return None


def _subject(value: object) -> Subject | None:
    """The snapshot an appeal carries, if it has a usable one."""
    return Subject.model_validate(value) if isinstance(value, dict) and value else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _append(path: Path, record: RecordModel, options: LogOptions | None) -> dict[str, Any]:
    with VerificationLog(path, options) as vlog:
        written = vlog.append(record)
    log.info(f"{written['kind']}.recorded", id=written["id"], appeal_of=written["appeal_of"])
    return written


def list_appeals(
    path: Path, *, open_only: bool = False, options: LogOptions | None = None
) -> list[dict[str, Any]]:
    """Every appeal with its status (open, upheld, overturned), oldest first."""
    appeals: list[dict[str, Any]] = []
    outcomes: dict[str, str] = {}
    with closing(_store(path, options)) as store:
        for _, record in store.appeals():
            if record_kind(record) == "appeal":
                appeals.append(_appeal_row(record))
            else:
                outcomes[str(record.get("appeal_id"))] = str(record.get("outcome"))
    for row in appeals:
        row["status"] = outcomes.get(row["id"], "open")
    return [row for row in appeals if not open_only or row["status"] == "open"]


def _appeal_row(record: dict[str, Any]) -> dict[str, Any]:
    subject = record.get("subject")
    subject = subject if isinstance(subject, dict) else {}
    return {
        "id": str(record.get("id")),
        "ts": record.get("ts"),
        "appeal_of": record.get("appeal_of"),
        "by": record.get("by"),
        "reason": record.get("reason"),
        "member": subject.get("member"),
        "decision": subject.get("decision"),
        "codes": subject.get("codes", []),
    }
