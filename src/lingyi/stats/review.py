"""What the figures point at: the records a reviewer acts on, from one pass over the log.

The counters (:mod:`lingyi.stats.view`) say how often; the review says which: the appeals
still open (whenever they were filed) with the verification they concern and the command
that decides each, a few rejections per failing check as examples, the policy versions that
decided in the window and in the period before, and what a shadow policy would have decided
when the log has such records. It is the ``review`` object of the weekly report's stats and
of the MCP ``verification_stats`` tool (``docs/stats-json.md``).

Read from the index (:mod:`lingyi.store`): the verifications of both periods and every
appeal, in log order; the verifications of open appeals are looked up by id. Memory is
bounded by the open appeals, the codes (a few examples each) and the policy versions, never
by the size of the log. Every text shown is redacted (as the log redacts) before it is cut.

Examples are sampled reproducibly: per check, the rejections with the smallest
``sha256(code, record id)``, so two runs over the same week show the same ones.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lingyi.log.records import failed_codes, normalise_ts, record_kind, ts_key
from lingyi.redact import clip, redact_text
from lingyi.stats.window import Window
from lingyi.store import Store

EXAMPLES_PER_CODE = 3
EXAMPLE_CODES = 5  # the top failing checks that get examples
MAX_OPEN_APPEALS = 50  # listed; ``open_appeals_total`` stays exact
TEXT_CHARS = 300


def shown(value: object, limit: int = TEXT_CHARS) -> str:
    """A text from the log as the review shows it: redacted, then cut."""
    return clip(redact_text(value if isinstance(value, str) else str(value or "")), limit)


@dataclass
class _Versions:
    """Policy versions seen in a window: first and last time, how many verifications."""

    seen: dict[str, list[Any]] = field(default_factory=dict)  # version → [first, last, n]

    def add(self, version: object, ts: str) -> None:
        entry = self.seen.setdefault(str(version), [ts, ts, 0])
        entry[0], entry[1], entry[2] = min(entry[0], ts), max(entry[1], ts), entry[2] + 1

    def as_json(self, before: _Versions | None = None) -> list[dict[str, Any]]:
        rows = sorted(self.seen.items(), key=lambda kv: (kv[1][0], kv[0]))
        return [
            {"version": v, "first": first, "last": last, "verifications": n,
             **({"new": v not in before.seen} if before is not None else {})}
            for v, (first, last, n) in rows
        ]  # fmt: skip


@dataclass
class _Shadow:
    """What a shadow policy would have decided (records with a ``shadow`` decision)."""

    would_have: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)  # "approved→rejected": n

    def add(self, record: dict[str, Any]) -> None:
        shadow = record.get("shadow")
        decision = shadow.get("decision") if isinstance(shadow, dict) else None
        if not isinstance(decision, str):
            return
        self.would_have[decision] += 1
        actual = str(record.get("decision"))
        if actual != decision:
            self.changed[f"{actual}→{decision}"] += 1

    def as_json(self) -> dict[str, Any] | None:
        if not self.would_have:
            return None  # no shadow records: the report shows no section for it
        return {
            "verifications": sum(self.would_have.values()),
            "would_have": dict(sorted(self.would_have.items())),
            "changed": dict(sorted(self.changed.items())),
        }


class ReviewPass:
    """The records of one window (and the period before) a reviewer acts on."""

    def __init__(self, window: Window, previous: Window, member: str | None = None) -> None:
        self.member = member
        self.span = (ts_key(window.start), ts_key(window.end))
        self.before = (ts_key(previous.start), ts_key(previous.end))
        self.versions, self.previous_versions = _Versions(), _Versions()
        self.shadow = _Shadow()
        self.samples: dict[str, list[tuple[bytes, str, dict[str, Any]]]] = {}
        self.appeals: dict[str, dict[str, Any]] = {}  # open ones, by appeal id
        self.resolved: set[str] = set()

    def feed(self, record: dict[str, Any]) -> None:
        kind = record_kind(record)
        if kind == "appeal":
            self._appeal(record)
        elif kind == "appeal_resolution":
            self.resolved.add(str(record.get("appeal_id")))
            self.appeals.pop(str(record.get("appeal_id")), None)
        elif kind == "verification":
            self._verification(record)

    def _verification(self, record: dict[str, Any]) -> None:
        key = normalise_ts(record.get("ts"))
        if key is None or (self.member is not None and record.get("member") != self.member):
            return
        if self.before[0] <= key < self.before[1]:
            self.previous_versions.add(record.get("policy_version"), key)
        elif self.span[0] <= key < self.span[1]:
            self.versions.add(record.get("policy_version"), key)
            self.shadow.add(record)
            if record.get("decision") == "rejected":
                self._sample(record, key)

    def _sample(self, record: dict[str, Any], key: str) -> None:
        """Keep, per failed rejecting check, the few with the smallest sampling hash."""
        rid, done = str(record.get("id")), set()
        for check in record.get("checks") or []:
            if not (isinstance(check, dict) and check.get("passed") is False):
                continue
            code = str(check.get("code"))
            if check.get("on_fail") in ("warn", "fallback") or code in done:
                continue
            done.add(code)
            rank = hashlib.sha256(f"{code}\0{rid}".encode()).digest()
            heap = self.samples.setdefault(code, [])
            entry = (_neg(rank), rid, _example(record, key, check))
            if len(heap) < EXAMPLES_PER_CODE:
                heapq.heappush(heap, entry)
            elif entry[0] > heap[0][0]:
                heapq.heapreplace(heap, entry)

    def _appeal(self, record: dict[str, Any]) -> None:
        subject = record.get("subject")
        subject = subject if isinstance(subject, dict) else {}
        if self.member is not None and subject.get("member") != self.member:
            return
        aid = str(record.get("id"))
        if aid not in self.resolved:
            self.appeals[aid] = {"record": record, "subject": subject}


def _neg(rank: bytes) -> bytes:
    """A max-heap on the smallest hashes: the heap's top is the largest kept, to be replaced."""
    return bytes(255 - b for b in rank)


def _example(record: dict[str, Any], key: str, check: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(record.get("id")),
        "ts": key,
        "member": shown(record.get("member"), 80),
        "content": shown(record.get("content")),
        "reason": shown(check.get("reason")),
    }


def review_json(
    store: Store,
    window: Window,
    previous: Window,
    *,
    member: str | None = None,
    codes: list[str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The ``review`` object: open appeals, examples of ``codes``, policy versions, shadow."""
    review = ReviewPass(window, previous, member)
    for _, record in store.verifications(review.before[0], review.span[1], member):
        review.feed(record)
    for _, record in store.appeals():
        review.feed(record)
    opened = sorted(review.appeals.values(), key=lambda a: str(a["record"].get("ts")))
    found = find_verifications(store, {str(a["record"].get("appeal_of")) for a in opened})
    moment = now or datetime.now(UTC)
    return {
        "open_appeals": [_open_appeal(a, found, moment) for a in opened[:MAX_OPEN_APPEALS]],
        "open_appeals_total": len(opened),
        "examples": _examples(review, codes),
        "policy_versions": review.versions.as_json(review.previous_versions),
        "previous_policy_versions": review.previous_versions.as_json(),
        "shadow": review.shadow.as_json(),
    }


def _examples(review: ReviewPass, codes: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    wanted = codes if codes is not None else sorted(review.samples)[:EXAMPLE_CODES]
    out = {}
    for code in wanted:
        kept = sorted(review.samples.get(code, []), key=lambda e: (e[2]["ts"], e[1]))
        out[code] = [example for _, _, example in reversed(kept)]  # newest first
    return out


def find_verifications(store: Store, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The verifications with these ids (the last one of each)."""
    found = {i: store.find(i) for i in ids}
    return {i: r for i, r in found.items() if r is not None and record_kind(r) == "verification"}


def _open_appeal(
    appeal: dict[str, Any], found: dict[str, dict[str, Any]], now: datetime
) -> dict[str, Any]:
    record, subject = appeal["record"], appeal["subject"]
    verification = found.get(str(record.get("appeal_of")), {})
    aid = str(record.get("id"))
    return {
        "appeal_id": aid,
        "appeal_of": str(record.get("appeal_of")),
        "filed_at": normalise_ts(record.get("ts")),
        "age_days": _age_days(record.get("ts"), now),
        "by": shown(record.get("by"), 80),
        "reason": shown(record.get("reason")),
        "member": shown(subject.get("member") or verification.get("member"), 80),
        "decision": subject.get("decision") or verification.get("decision"),
        "codes": [shown(c, 80) for c in subject.get("codes") or failed_codes(verification)],
        "content": shown(verification.get("content")) if verification else None,
        "verdict_reason": shown(verification.get("reason")) if verification else None,
        "command": f'lingyi appeal resolve {aid} --uphold|--overturn --note "..."',
    }


def _age_days(ts: object, now: datetime) -> float | None:
    key = normalise_ts(ts)
    if key is None:
        return None
    return round((now - datetime.fromisoformat(key)).total_seconds() / 86400, 1)
