"""What the log says about approvals: one :class:`Approval` per id, folded from its records.

The log's chain records are the only state (no second store to keep in step): the server and
``lingyi approve`` (another process) read the same records and append to the same chain.
Every request carries its expiry, and nothing older than the expiry window can still be
pending or usable, so the server reads the log backwards only as far as that window
(:func:`recent`), whatever the log's length; ``lingyi approvals --all`` streams all of it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lingyi.log.keys import LogKey
from lingyi.log.reader import read_log, reversed_lines
from lingyi.log.records import normalise_ts, record_kind, ts_key

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


def recent(path: Path, since: str) -> dict[str, Approval]:
    """The approvals whose records are at or after ``since``, reading the log backwards."""
    records: list[dict[str, Any]] = []
    for line in reversed_lines(path):
        record = line.record
        if record is None:
            continue
        ts = normalise_ts(record.get("ts"))
        if ts is not None and ts < since:
            break
        if record_kind(record) == KIND:
            records.append(record)
    records.reverse()
    return fold(records)


def every(path: Path) -> dict[str, Approval]:
    """Every approval in the log (one streaming pass; memory grows with approvals only)."""
    return fold(
        line.record
        for line in read_log(path)
        if line.record is not None and record_kind(line.record) == KIND
    )
