"""begin_task / end_task as inputs of the one layer (type ``task``), and the session's task.

The open task lives in the session's state (one per session: the calls of the session are
what it is judged on): its intent, who declared it, when, and the intent's ``requires`` and
``before`` as the declaring member's policy gave them, so that ``task.order`` can hold any
member's call to them.
"""

from __future__ import annotations

from typing import Any

from lingyi._ids import utc_now
from lingyi.ledger import SessionLedger
from lingyi.models import Assertion, AssertionType, Decision, VerificationResult

STATE_KEY = "task"
EVENTS = ("begin", "end")


def active_task(session: SessionLedger) -> dict[str, Any] | None:
    """The session's open task, if one was begun and not ended."""
    task = session.state.get(STATE_KEY)
    return task if isinstance(task, dict) else None


def called_since(session: SessionLedger, task: dict[str, Any]) -> list[str]:
    """The tools that really ran in the session since the task began (the ledger's entries
    after the last one held when it began: order, not clocks, which tie within a millisecond).
    When that entry was trimmed away, every entry still held is newer than the task."""
    entries, last = session.entries, task.get("after")
    start = next((i + 1 for i, e in enumerate(entries) if e is last), 0) if last else 0
    return list(dict.fromkeys(e.tool for e in entries[start:]))


class TaskKind:
    """``{"type": "task", "event": "begin"|"end", member, intent}``; begin_task and end_task
    (below) are the same input named by its event."""

    name = "task"

    def assertion(self, given: dict[str, Any]) -> Assertion:
        return task_assertion(given, given.get("task_event") or given.get("phase"))

    def finish(
        self, assertion: Assertion, result: VerificationResult, session: SessionLedger
    ) -> dict[str, Any]:
        event, intent = assertion.payload["event"], assertion.payload.get("intent", "")
        declared = _detail(result, "task.intent_declared")
        if event == "begin":
            if result.decision is Decision.APPROVED:
                session.state[STATE_KEY] = {
                    "intent": intent,
                    "member": result.member or assertion.member,
                    "started": utc_now(),
                    "after": session.entries[-1] if session.entries else None,
                    "requires": declared.get("requires", []),
                    "before": declared.get("before", {}),
                }
            return {"task": "begin", "intent": intent, "requires": declared.get("requires", [])}
        done = _detail(result, "task.complete")
        if declared.get("open"):
            session.state.pop(STATE_KEY, None)  # ended, complete or not: the log keeps which
        return {
            "task": "end",
            "intent": declared.get("intent", intent),
            "complete": not done.get("missing") and bool(declared.get("open")),
            "missing": done.get("missing", []),
            "called": done.get("called", []),
        }


def _detail(result: VerificationResult, code: str) -> dict[str, Any]:
    return next((c.detail for c in result.checks if c.code == code), {})


def task_assertion(given: dict[str, Any], event: object) -> Assertion:
    """The task event as an assertion; raises ValueError naming the field that is wrong."""
    if event not in EVENTS:
        raise ValueError("event: must be begin or end (begin_task, end_task)")
    member, intent = given.get("member"), given.get("intent")
    if not isinstance(member, str) or not member.strip():
        raise ValueError("member: a non-empty text is required")
    if event == "begin" and (not isinstance(intent, str) or not intent.strip()):
        raise ValueError("intent: a non-empty text is required to begin a task")
    if intent is not None and not isinstance(intent, str):
        raise ValueError("intent: must be a text")
    return Assertion(
        id=given.get("id"),
        member=member,
        type=AssertionType.TASK,
        content=f"{event}_task {intent or ''}".strip(),
        session=str(given.get("session") or "default"),
        payload={"event": event, "intent": intent or ""},
    )


class _Event(TaskKind):
    def __init__(self, name: str, event: str) -> None:
        self.name, self.event = name, event

    def assertion(self, given: dict[str, Any]) -> Assertion:
        return task_assertion(given, self.event)


# Registered through the lingyi.kinds entry point (pyproject.toml).
TASK = TaskKind()
BEGIN = _Event("begin_task", "begin")
END = _Event("end_task", "end")
