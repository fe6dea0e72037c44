"""Offline replay of a recorded session (the design's transcript contract).

Replay starts from an empty ledger and an empty council record, filled only by the
transcript's own events, and logs every verification as the server does. A malformed
line is reported with its number and the rest still runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lingyi._validation import problems
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.errors import TranscriptError
from lingyi.guard import Guard
from lingyi.kinds import kind_names, kind_of
from lingyi.ledger import Ledger
from lingyi.models import Assertion, AssertionType, Decision, Evidence, VerificationResult


@dataclass
class Mismatch:
    line: int
    assertion_id: str | None
    expected: str
    got: str
    reason: str


def output_line(result: VerificationResult) -> dict[str, Any]:
    """The contract's one JSON object per assertion."""
    return {
        "id": result.assertion_id,
        "decision": result.decision.value,
        "reason": result.reason,
        "recommendation": result.recommendation,
        "fallback": result.fallback.model_dump(mode="json") if result.fallback else None,
        "checks": [
            {"stage": c.stage.value, "code": c.code, "passed": c.passed, "reason": c.reason}
            for c in result.checks
        ],
        **result.outputs,  # a conclusion's route, an answer's sources (lingyi.kinds)
        # Only when a check in shadow mode ran: what enforcing it would have decided.
        **({"shadow": result.shadow.model_dump(mode="json")} if result.shadow else {}),
    }


def read_events(
    lines: Iterable[str | bytes],
) -> Iterator[tuple[int, dict[str, Any] | TranscriptError]]:
    """Each non-blank line as an event dict, or the error that names its line.

    Lines may be bytes (a file read in binary, so that progress can count bytes): one line
    that is not UTF-8 is reported like any bad line and the rest still runs.
    """
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
        except UnicodeDecodeError:
            yield lineno, TranscriptError(lineno, "not valid UTF-8")
            continue
        except ValueError as exc:
            yield lineno, TranscriptError(lineno, f"not valid JSON: {exc}")
            continue
        ok = isinstance(event, dict) and isinstance(event.get("event"), str)
        yield (
            lineno,
            event if ok else TranscriptError(lineno, 'not an object with an "event" field'),
        )


class Replayer:
    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.ledger = Ledger()
        self.council = MemoryCouncil()
        guard.layer.council = self.council  # never the server's record
        self._context_only = False

    def preload(self, lines: Iterable[str | bytes]) -> list[TranscriptError]:
        """Apply only tool_result and council_message events (context for one verification)."""
        self._context_only = True
        try:
            return [out for _, out in self.run(lines) if isinstance(out, TranscriptError)]
        finally:
            self._context_only = False

    def run(
        self, lines: Iterable[str | bytes]
    ) -> Iterator[tuple[int, dict[str, Any] | TranscriptError]]:
        """Yield (line, output) per assertion and (line, error) per bad line, in order."""
        for lineno, event in read_events(lines):
            if isinstance(event, TranscriptError):
                yield lineno, event
                continue
            try:
                out = self._apply(event)
            except (ValidationError, ValueError) as exc:
                yield lineno, TranscriptError(lineno, _brief(exc, _MODELS.get(event["event"])))
                continue
            if out is not None:
                yield lineno, out

    def _apply(self, event: dict[str, Any]) -> dict[str, Any] | None:
        kind = event["event"]
        if kind == "tool_result":
            self._tool_result(event)
        elif kind == "council_message":
            self._council_message(event)
        elif kind == "assertion":
            return None if self._context_only else self._assertion(event)
        elif (structured := kind_of(kind)) is not None:
            return None if self._context_only else self._verify(structured.assertion(event), event)
        else:
            known = ", ".join(["tool_result", "council_message", "assertion", *kind_names()])
            raise ValueError(f"unknown event {kind!r} ({known})")
        return None

    def _tool_result(self, event: dict[str, Any]) -> None:
        # A null field means "not given", as it did before events had a model.
        result = ToolResultEvent.model_validate({k: v for k, v in event.items() if v is not None})
        member = self._member_id(result.member)
        self.ledger.record(result.session, member, result.tool, result.arguments, result.evidence)

    def _council_message(self, event: dict[str, Any]) -> None:
        message = CouncilMessage.model_validate(event)
        self.council.append(message.model_copy(update={"sender": self._member_id(message.sender)}))

    def _member_id(self, name: str) -> str:
        member = self.guard.layer.policies.resolve(name)
        return member.id if member else name

    def _assertion(self, event: dict[str, Any]) -> dict[str, Any]:
        assertion = Assertion.model_validate(event)
        if assertion.type.value in _STRUCTURED:  # a conclusion comes as its own event
            raise ValueError(
                f"type {assertion.type.value!r} is an event of its own, not an assertion"
            )
        return self._verify(assertion, event)

    def _verify(self, assertion: Assertion, event: dict[str, Any]) -> dict[str, Any]:
        out = output_line(self.guard.check(assertion, self.ledger))
        if "expect" in event:
            out["expect"] = event["expect"]
        return out


# Assertion types that only their own events (and tools) may produce: they carry a payload.
_STRUCTURED = {AssertionType.CONCLUSION.value, AssertionType.ANSWER.value, AssertionType.TASK.value}


class ToolResultEvent(BaseModel):
    """What a tool really returned in a recorded session (fills the replay's ledger)."""

    model_config = ConfigDict(extra="ignore")

    session: str = "default"
    member: str = ""
    tool: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)


_MODELS: dict[str, type[BaseModel]] = {
    "tool_result": ToolResultEvent,
    "council_message": CouncilMessage,
    "assertion": Assertion,
}


def _brief(exc: Exception, model: type[BaseModel] | None) -> str:
    if isinstance(exc, ValidationError) and model is not None:
        return "; ".join(f"{p.key}: {p.message}" for p in problems(exc, model))
    return str(exc)


# What a conclusion's ``expect`` may name besides a decision: its route (lingyi.conclusions).
ROUTES = ("passed", "revise", "final")


def check_expectation(lineno: int, out: dict[str, Any]) -> Mismatch | None:
    """``expect`` is a decision, or for a conclusion also its route (passed, revise, final)."""
    expected = out.get("expect")
    if expected is None:
        return None
    by_route = expected in ROUTES and "route" in out
    got = str(out["route"] if by_route else out["decision"])
    if expected == got:
        return None
    if not by_route and expected not in {d.value for d in Decision}:
        return Mismatch(lineno, out["id"], str(expected), got, "expect is not a decision")
    return Mismatch(lineno, out["id"], str(expected), got, out["reason"])
