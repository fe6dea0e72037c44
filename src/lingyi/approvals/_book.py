"""Writing approval events to the log, and deciding a request by its id.

:class:`Book` is the one place that appends approval records: it reads the recent approvals
and appends under one lock of its own beside the log (``<log>.approval.lock``), so that a
request is decided once and an approval is used once, by threads and by processes (the
server and ``lingyi approve``). The log writer's own lock is taken inside it, for the append.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lingyi._ids import new_id
from lingyi._locks import FileMutex
from lingyi.approvals._state import Approval, Binding, every, horizon, recent
from lingyi.errors import LingyiError
from lingyi.log.records import ApprovalRecord, ts_key
from lingyi.log.writer import VerificationLog
from lingyi.redact import clip, redact_value
from lingyi.store import Store, open_store

Clock = Callable[[], datetime]
ARGS_CHARS = 2000  # the redacted arguments kept for the person, per value


def utc_clock() -> datetime:
    return datetime.now(UTC)


class ApprovalError(LingyiError):
    """An approval cannot be decided; ``code`` is the stable id (approval.unknown, …)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Request:
    """What a new request says besides its binding."""

    session: str
    args: dict[str, Any]
    why: str
    via: str
    verification_id: str | None


def shown_args(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as a person sees them: secrets redacted, long values clipped."""
    redacted = redact_value(args)
    return {k: clip(v, ARGS_CHARS) if isinstance(v, str) else v for k, v in redacted.items()}


class Book:
    """The approvals of one log: read them, append their events, under one lock."""

    def __init__(self, log: VerificationLog, ttl_s: float, clock: Clock = utc_clock) -> None:
        self.log, self.ttl_s, self.clock = log, ttl_s, clock
        path = log.path
        self.mutex = FileMutex(path.with_name(path.name + ".approval.lock"))

    @property
    def path(self) -> Path:
        return self.log.path

    def now(self) -> str:
        return ts_key(self.clock())

    def store(self) -> Store:
        """The index of the log, brought up to date (a connection per use: threads)."""
        options = self.log.options
        return open_store(self.path, options.keys, options.index)

    def recent(self) -> dict[str, Approval]:
        """The approvals that can still matter (those of the expiry window)."""
        with closing(self.store()) as store:
            return recent(store, horizon(self.clock(), self.ttl_s))

    def every(self) -> dict[str, Approval]:
        with closing(self.store()) as store:
            return every(store)

    def request(self, binding: Binding, request: Request) -> dict[str, Any]:
        """Append a new request for ``binding``; it expires ``ttl_s`` from now."""
        expires = ts_key(self.clock() + timedelta(seconds=self.ttl_s))
        record = ApprovalRecord(
            event="requested",
            approval_id=f"ap-{new_id().lower()}",
            session=request.session,
            member=binding.member,
            principal=binding.principal,
            tool=binding.tool,
            args_digest=binding.args_digest,
            args=shown_args(request.args),
            policy_version=binding.policy_version,
            expires=expires,
            via=request.via,
            why=request.why,
            verification_id=request.verification_id,
        )
        return self.log.append(record)

    def event(
        self,
        approval: Approval,
        event: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        verification_id: str | None = None,
    ) -> dict[str, Any]:
        """Append one later event of ``approval``, repeating its binding; apply it."""
        keep = ("session", "member", "principal", "tool", "args_digest", "policy_version")
        fields = {k: approval.request.get(k) for k in keep}
        record = ApprovalRecord(
            event=event,
            approval_id=approval.id,
            expires=approval.expires,
            via=approval.via,
            why=approval.request.get("why", "required"),
            verification_id=verification_id,
            by=by,
            reason=reason,
            **fields,
        )
        written = self.log.append(record)
        approval.apply(written)
        return written

    def close(self) -> None:
        self.mutex.close()

    # -- a person decides -----------------------------------------------------------------

    def decide(
        self,
        approval_id: str,
        by: str,
        *,
        refuse: bool = False,
        reason: str | None = None,
        guard: Callable[[Approval], None] | None = None,
    ) -> dict[str, Any]:
        """Approve (or refuse) the pending request ``approval_id``; the record written.

        ``guard`` may refuse first (an approver token deciding its own request).
        """
        with self.mutex:
            found = self.recent().get(approval_id) or self.every().get(approval_id)
            approval = _decidable(found, approval_id, self.now(), self)
            if guard is not None:
                guard(approval)
            event = "refused" if refuse else "approved"
            return self.event(approval, event, by=by, reason=reason)


def _decidable(found: Approval | None, approval_id: str, now: str, book: Book) -> Approval:
    if found is None:
        raise ApprovalError("approval.unknown", f"no approval request {approval_id} in {book.path}")
    if found.expired_at(now):
        book.event(found, "expired", by="lingyi")
        raise ApprovalError(
            "approval.expired",
            f"approval {approval_id} expired at {found.expires}; "
            "the call must be made again for a new request",
        )
    if found.status != "pending":
        raise ApprovalError("approval.decided", f"approval {approval_id} is already {found.status}")
    return found
