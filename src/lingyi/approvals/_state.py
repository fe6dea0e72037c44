"""What the log says about approvals: one :class:`Approval` per id, folded from its records.

The log's chain records are the only state: the server and ``lingyi approve`` (another
process) read the same records, through the index beside the log (:mod:`lingyi.store`),
which holds only records the chain verifier authenticated (a hash-less copy of a request
marked ``approved`` is not one) and checks its approval rows again on every read. Every
request carries its expiry, and nothing older than the expiry window can still be pending
or usable, so the server folds only the events of that window (:func:`recent`);
``lingyi approvals --all`` folds them all.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lingyi.log.keys import LogKey
from lingyi.log.records import normalise_ts, record_kind, ts_key
from lingyi.store import Store

KIND = "approval"
LIVE = ("pending", "approved")  # statuses in which an approval can still be used or decided
_STATUS = {"approved": "approved", "refused": "refused", "expired": "expired", "used": "used"}


def args_digest(args: dict[str, Any], key: LogKey | None = None) -> str:
    """The digest an approval is bound to, of the arguments' canonical JSON.

    With the log's key: ``hmac-sha256:<key id>:<hex>``, an HMAC under a key derived from it
    (``LogKey.approval_key``), so that a low-entropy secret in the arguments (redacted in the
    log) cannot be found by hashing guesses and comparing. Without a key: ``sha256:<hex>``,
    which anyone who reads the log can test guesses against; a deployment that puts secrets
    in approved arguments should key its log (``[log] key_env``).
    """
    text = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    if key is None:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    mac = hmac.new(key.approval_key, text.encode(), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{key.key_id}:{mac}"


@dataclass(frozen=True)
class Binding:
    """What one approval is for: this member, token, tool, arguments and policy version."""

    member: str
    principal: str | None
    tool: str
    args_digest: str
    policy_version: str

    @classmethod
    def of(cls, record: dict[str, Any]) -> Binding:
        principal = record.get("principal")
        return cls(
            member=str(record.get("member")),
            principal=principal if isinstance(principal, str) else None,
            tool=str(record.get("tool")),
            args_digest=str(record.get("args_digest")),
            policy_version=str(record.get("policy_version")),
        )

    def caller(self) -> tuple[str, str | None, str]:
        """Who calls what, without the arguments and version (a changed call of the same)."""
        return (self.member, self.principal, self.tool)


@dataclass
class Approval:
    """One approval id: its request, its status now, and its events in log order."""

    request: dict[str, Any]
    status: str = "pending"
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.request.get("approval_id"))

    @property
    def binding(self) -> Binding:
        return Binding.of(self.request)

    @property
    def expires(self) -> str:
        return normalise_ts(self.request.get("expires")) or ""

    @property
    def via(self) -> str:
        return str(self.request.get("via", "pending"))

    def expired_at(self, now: str) -> bool:
        """Still pending or approved, but past its expiry at ``now`` (a timestamp key)."""
        return self.status in LIVE and now >= self.expires

    def live_at(self, now: str) -> bool:
        return self.status in LIVE and now < self.expires

    def apply(self, record: dict[str, Any]) -> None:
        """Move on with one later event (an event of a finished approval changes nothing)."""
        self.events.append(record)
        status = _STATUS.get(str(record.get("event")))
        if status is not None and self.status in LIVE:
            self.status = status


def fold(records: Iterable[dict[str, Any]]) -> dict[str, Approval]:
    """Every approval in ``records`` (log order); events without their request are dropped."""
    found: dict[str, Approval] = {}
    for record in records:
        if record_kind(record) != KIND:
            continue
        key = str(record.get("approval_id"))
        if record.get("event") == "requested":
            found.setdefault(key, Approval(record))
        elif key in found:
            found[key].apply(record)
    return found


def horizon(now: datetime, ttl_s: float) -> str:
    """The oldest timestamp key a record can have and still matter: two expiry windows back
    (an approval granted at the end of one window is used within the next)."""
    return ts_key(now - timedelta(seconds=2 * ttl_s + 60))


def recent(store: Store, since: str) -> dict[str, Approval]:
    """The approvals whose records are at or after ``since``."""
    return fold(record for _, record in store.approvals(since))


def every(store: Store) -> dict[str, Approval]:
    """Every approval in the log."""
    return fold(record for _, record in store.approvals())
