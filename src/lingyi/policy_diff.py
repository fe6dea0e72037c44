"""``lingyi policy diff``: the same inputs decided under two policy folders, and what changed.

A team checks a policy change before making it: each input (an assertion of a replay
transcript, or a verification of the log) is decided once under the policies in effect and
once under the other folder, and every input whose decision or whose checks' outcomes differ
is a :class:`Change`. Nothing decided here reaches a verification log (each side writes to a
temporary one, deleted after) and the council record is only read.

The folder in effect is loaded as a start loads it (weaker than the shipped policies is
refused unless ``[policies] allow_weakening`` names it). The other folder is loaded and
validated by the same loader but never refused for weakening: the diff is a what-if, and
what a start would refuse is reported with it (:attr:`Sides.weakenings`).
"""

from __future__ import annotations

import functools
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lingyi.config import Config
from lingyi.council import CouncilMessage, CouncilRecord, FileCouncil, MemoryCouncil
from lingyi.errors import LingyiError, PolicyError, TranscriptError
from lingyi.guard import Guard, Lookup, kb_lookup, layer_from, open_kb, shipped_policies
from lingyi.ledger import Ledger
from lingyi.log import VerificationLog, read_log, record_kind
from lingyi.models import Assertion, OnFail, VerificationResult
from lingyi.policy import PolicySet, load_policies
from lingyi.policy._store import refuse_weaker
from lingyi.policy._weakening import start_weakenings
from lingyi.replay import Replayer

State = tuple[str, bool]  # a code's outcome (absent, pass, warn, fallback, reject), uncertain
ABSENT: State = ("absent", False)
_RANK = {"absent": 0, "pass": 1, "warn": 2, "fallback": 3, "reject": 4}
KINDS = ("newly_failing", "no_longer_failing", "now_uncertain", "no_longer_uncertain")


@dataclass(frozen=True)
class Decided:
    """One input's decision under one policy folder, with each check code's outcome."""

    where: str  # file:line of the transcript or the log
    record: str | None  # the log record's id (None for a transcript)
    assertion_id: str | None
    member: str
    type: str
    content: str
    decision: str
    codes: dict[str, State]


def decided(
    where: str, record: str | None, assertion: Assertion, result: VerificationResult
) -> Decided:
    return Decided(
        where,
        record,
        assertion.id,
        result.member or assertion.member,
        assertion.type.value,
        assertion.content,
        result.decision.value,
        code_states(result),
    )


def code_states(result: VerificationResult) -> dict[str, State]:
    """Each code's worst outcome in the result (a code may run twice) and whether it was
    uncertain. A failed check counts by its ``on_fail``: a reject turned warn is a change."""
    states: dict[str, State] = {}
    for check in result.checks:
        outcome = "pass" if check.passed else check.on_fail.value
        old = states.get(check.code, ABSENT)
        worst = max(old[0], outcome, key=_RANK.__getitem__)
        states[check.code] = (worst, old[1] or check.uncertain)
    return states


def _blocking(state: State) -> bool:
    return state[0] in (OnFail.REJECT.value, OnFail.FALLBACK.value)


@dataclass(frozen=True)
class CodeChange:
    code: str
    before: State
    after: State

    @property
    def kinds(self) -> list[str]:
        """Which of :data:`KINDS` this change is (none: e.g. reject turned fallback)."""
        flags = (
            not _blocking(self.before) and _blocking(self.after),
            _blocking(self.before) and not _blocking(self.after),
            not self.before[1] and self.after[1],
            self.before[1] and not self.after[1],
        )
        return [kind for kind, flag in zip(KINDS, flags, strict=True) if flag]


@dataclass(frozen=True)
class Change:
    before: Decided
    after: Decided
    codes: list[CodeChange]


def compare(before: Decided, after: Decided) -> Change | None:
    """What differs between the two decisions of one input (None: nothing)."""
    names = sorted(set(before.codes) | set(after.codes))
    codes = [
        CodeChange(c, before.codes.get(c, ABSENT), after.codes.get(c, ABSENT))
        for c in names
        if before.codes.get(c, ABSENT) != after.codes.get(c, ABSENT)
    ]
    if codes or before.decision != after.decision:
        return Change(before, after, codes)
    return None


@dataclass
class Diff:
    """Every input compared, the changes, and what could not be read."""

    inputs: int = 0
    changes: list[Change] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # "where: why", input that was not decided
    skipped: int = 0  # log records that are no verification (appeals, approvals, …)
    drift: int = 0  # log records re-decided in effect otherwise than they were logged

    def add(self, before: Decided, after: Decided) -> None:
        self.inputs += 1
        if (change := compare(before, after)) is not None:
            self.changes.append(change)

    def by_code(self) -> dict[str, dict[str, int]]:
        counts: dict[str, Counter[str]] = {}
        for change in self.changes:
            for code in change.codes:
                counts.setdefault(code.code, Counter()).update([*code.kinds, "changed"])
        return {c: {k: counts[c][k] for k in (*KINDS, "changed")} for c in sorted(counts)}

    def decisions(self) -> dict[str, int]:
        moved = Counter(
            f"{c.before.decision} → {c.after.decision}"
            for c in self.changes
            if c.before.decision != c.after.decision
        )
        return dict(moved.most_common())


# --- the two sides ---------------------------------------------------------------------


@dataclass
class Sides:
    """The policies in effect and the other folder, each with a guard that logs nowhere
    that lasts (a temporary log, deleted by :meth:`close`)."""

    config: Config
    before: PolicySet
    after: PolicySet
    other: Path
    weakenings: list[PolicyError]
    _tmp: tempfile.TemporaryDirectory[str] = field(default_factory=tempfile.TemporaryDirectory)
    _guards: list[Guard] = field(default_factory=list)

    def guard(self, policies: PolicySet, council: CouncilRecord, *, lookups: bool) -> Guard:
        found = {"knowledge_base": self._kb(policies)} if lookups else None
        layer = layer_from(self.config, policies, council, found)
        log = Path(self._tmp.name) / f"diff-{len(self._guards)}.jsonl"
        guard = Guard(layer, VerificationLog(log), source="policy-diff")
        self._guards.append(guard)
        return guard

    def _kb(self, policies: PolicySet) -> Lookup:
        # Opened on the first lookup, as ``lingyi verify`` does: a log with no fact about the
        # knowledge base never needs it.
        kb = functools.cache(lambda: open_kb(self.config, policies, watch=False))
        return kb_lookup(kb, url_base=self.config.raw.evidence.kb_url_base)

    def close(self) -> None:
        for guard in self._guards:
            guard.close()
        self._tmp.cleanup()


def load_sides(config: Config, other: Path) -> Sides:
    """Both folders through the normal loader (PolicyError naming file and key); the folder
    in effect also refused when weaker than the shipped ones, as a start refuses it."""
    policies = config.raw.policies
    shared = policies.require_shared
    judge_on_fail = OnFail(config.raw.judge.on_fail)
    before = load_policies(config.validators_dir, require_shared=shared)
    shipped = shipped_policies()
    if shipped.resolve() != config.validators_dir.resolve():
        refuse_weaker(before, shipped, policies.allow_weakening, judge_on_fail)
    after = load_policies(other, require_shared=shared)
    weaker: list[PolicyError] = []
    if shipped.resolve() != other.resolve():
        weaker = start_weakenings(
            load_policies(shipped), after, policies.allow_weakening, judge_on_fail=judge_on_fail
        )
    return Sides(config, before, after, other, weaker)


# --- transcripts -----------------------------------------------------------------------


class _Deciding(Replayer):
    """A replayer that hands back whole results: the diff compares every check's outcome,
    which the replay output line does not carry."""

    def _verify(self, assertion: Assertion, event: dict[str, Any]) -> dict[str, Any]:
        return {"assertion": assertion, "result": self.guard.check(assertion, self.ledger)}


def _replayed(
    guard: Guard, path: str, lines: Iterable[bytes]
) -> tuple[dict[int, Decided], list[str]]:
    """Each assertion of one transcript decided (a fresh ledger and council record filled by
    the transcript's own events, as replay does), and the lines that could not be."""
    found: dict[int, Decided] = {}
    bad: list[str] = []
    for lineno, out in _Deciding(guard).run(lines):
        if isinstance(out, TranscriptError):
            bad.append(f"{path}:{out}")
        else:
            found[lineno] = decided(f"{path}:{lineno}", None, out["assertion"], out["result"])
    return found, bad


def diff_transcripts(
    sides: Sides,
    diff: Diff,
    files: Iterable[tuple[str, Sequence[bytes]]],
    progress: Callable[[int], None] | None = None,
) -> None:
    """Replay each transcript under both folders; add each assertion's pair to ``diff``.
    ``progress`` is told the bytes decided so far, each line counting once per side."""
    guards = [sides.guard(p, MemoryCouncil(), lookups=False) for p in (sides.before, sides.after)]
    counted = _Counted(progress)
    for path, lines in files:
        before, bad = _replayed(guards[0], path, counted(lines))
        after, _ = _replayed(guards[1], path, counted(lines))  # the same lines: the same bad ones
        diff.bad += bad
        for lineno in sorted(before.keys() & after.keys()):
            diff.add(before[lineno], after[lineno])


@dataclass
class _Counted:
    """Lines passed through, their bytes added up and reported as they are decided."""

    progress: Callable[[int], None] | None
    done: int = 0

    def __call__(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        for line in lines:
            yield line
            self.done += len(line)
            if self.progress is not None:
                self.progress(self.done)


# --- the verification log ----------------------------------------------------------------


class ReadOnlyCouncil:
    """The deployment's council record, read and never written: a what-if posts nothing."""

    def __init__(self, record: FileCouncil) -> None:
        self._record = record

    def messages_from(self, member: str) -> list[CouncilMessage]:
        return self._record.messages_from(member)

    def search(
        self, senders: Collection[str], terms: Sequence[Collection[str]], limit: int
    ) -> list[CouncilMessage]:
        return self._record.search(senders, terms, limit)

    def count_from(self, senders: Collection[str]) -> int:
        return self._record.count_from(senders)

    def append(self, message: CouncilMessage) -> None:
        raise LingyiError("lingyi policy diff never writes to the council record")


def log_assertion(record: dict[str, Any]) -> Assertion:
    """The assertion a verification record logged (ValidationError when it cannot be one)."""
    return Assertion.model_validate(
        {
            "id": record.get("assertion_id"),
            "member": record.get("member_as_given") or record.get("member"),
            "type": record.get("type"),
            "content": record.get("content") or "",
            "tool_call": record.get("tool_call"),
            "evidence_ids": record.get("evidence_ids") or [],
            "session": record.get("session") or "default",
            "payload": record.get("payload") or {},
        }
    )


def diff_log(
    sides: Sides, diff: Diff, path: Path, progress: Callable[[int], None] | None = None
) -> None:
    """Re-decide each verification of the log under both folders, in log order.

    What a record lacks: the evidence the session's tools returned (each side's ledger holds
    only what its own knowledge-base lookups find, session by session), and the council
    record as it was then (the deployment's record as it is now is read). Both sides decide
    without the same context, so what differs is the policies' doing; ``drift`` counts the
    records whose re-decision in effect differs from the logged one (lost context, or
    policies changed since)."""
    if not path.is_file():
        raise LingyiError(f"{path}: no verification log here (give --log FILE, or transcripts)")
    council = ReadOnlyCouncil(FileCouncil(sides.config.council_path))
    guards = [sides.guard(p, council, lookups=True) for p in (sides.before, sides.after)]
    ledgers = (Ledger(), Ledger())
    for line in read_log(path):
        if progress is not None:
            progress(line.offset)
        where = f"{path}:{line.lineno}"
        if line.record is None:
            diff.bad.append(f"{where}: {line.error}")
        elif record_kind(line.record) != "verification":
            diff.skipped += 1
        else:
            _redecide(guards, ledgers, diff, where, line.record)


def _redecide(
    guards: list[Guard],
    ledgers: tuple[Ledger, Ledger],
    diff: Diff,
    where: str,
    record: dict[str, Any],
) -> None:
    try:
        assertion = log_assertion(record)
    except ValidationError as exc:
        diff.bad.append(
            f"{where}: not a verification the diff can decide: {exc.errors()[0]['msg']}"
        )
        return
    rid = record.get("id") if isinstance(record.get("id"), str) else None
    before, after = (
        decided(where, rid, assertion, g.check(assertion, led))
        for g, led in zip(guards, ledgers, strict=True)
    )
    diff.drift += before.decision != record.get("decision")
    diff.add(before, after)


# --- the JSON document ---------------------------------------------------------------------


def _state(state: State) -> dict[str, Any]:
    return {"outcome": state[0], "uncertain": state[1]}


def change_json(change: Change) -> dict[str, Any]:
    b, a = change.before, change.after
    return {
        "where": b.where,
        "record": b.record,
        "assertion_id": b.assertion_id,
        "member": b.member,
        "type": b.type,
        "content": b.content,
        "before": b.decision,
        "after": a.decision,
        "codes": [
            {"code": c.code, "before": _state(c.before), "after": _state(c.after), "kinds": c.kinds}
            for c in change.codes
        ],
    }


def diff_json(sides: Sides, diff: Diff, source: dict[str, Any]) -> dict[str, Any]:
    """The one JSON document of ``lingyi policy diff --json`` (docs/policy-diff.md)."""
    config = sides.config
    return {
        "ok": True,
        "before": {"folder": str(config.validators_dir), "version": sides.before.version},
        "after": {
            "folder": str(sides.other),
            "version": sides.after.version,
            "weakenings": [
                {"file": w.path, "key": w.key, "message": w.message} for w in sides.weakenings
            ],
        },
        "source": source,
        "inputs": diff.inputs,
        "changed": len(diff.changes),
        "decisions": diff.decisions(),
        "codes": diff.by_code(),
        "changes": [change_json(c) for c in diff.changes],
        "bad": diff.bad,
        **({"skipped": diff.skipped, "drift": diff.drift} if source["kind"] == "log" else {}),
    }
