"""What the tools return on the wire: the verdict, and the guarded tool's real result.

A rejection is a tool result with ``isError`` and the structured verdict, so the calling model
reads why (codes, reason) and what to do instead (recommendation, fallback); the tool never ran.
Every result, error or not, conforms to the tool's output schema: clients such as the MCP
Inspector validate structured content even on ``isError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import orjson
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from lingyi import messages
from lingyi.backends.kb import KBHit
from lingyi.models import Decision, Fallback, OnFail, ShadowVerdict, VerificationResult

Executed = Literal["original", "fallback"]


class CheckBrief(BaseModel):
    stage: str
    code: str
    passed: bool
    reason: str


class ApprovalBrief(BaseModel):
    """A person's approval of this call (lingyi.approvals): the request and what to run."""

    id: str
    status: Literal["pending", "approved", "refused", "expired", "used"]
    tool: str
    expires: str
    why: str = Field(description="required (the tool's policy), destructive, or uncertain")
    command: str = Field(description="what a person runs to approve it")


class Verdict(BaseModel):
    """The guard's decision as the calling model sees it (also the payload of a rejection)."""

    verification_id: str | None = Field(
        description="the verification record in the log; null when nothing was verified "
        "(arguments of the guard's own tools that do not form an assertion)"
    )
    member: str
    decision: Literal["approved", "rejected", "fallback", "pending"] = Field(
        description="pending: the guard approved, and the call waits for a person (approval)"
    )
    codes: list[str] = Field(description="codes of the checks that failed")
    reason: str
    recommendation: str | None = None
    fallback: Fallback | None = None
    executed: Executed | None = Field(
        None, description="which call ran: the one asked for, or the fallback variant"
    )
    error: str | None = Field(
        None, description="the backend's refusal, when an approved call failed"
    )
    checks: list[CheckBrief] = Field(
        default_factory=list,
        description="every check, when not approved (an approval's checks are in the log)",
    )
    outputs: dict[str, Any] | None = Field(
        None,
        description="what a kind of input adds: a conclusion's route (passed, revise, final), "
        "revisions, max_revisions, feedback and message",
    )
    argument_problems: list[dict[str, Any]] = Field(
        default_factory=list,
        description="each rejected argument: field, kind, value given, the valid values or "
        "format (allowed, pattern, minimum, maximum, expected) and the closest valid value",
    )
    approval: ApprovalBrief | None = Field(
        None, description="when the call needs a person: the approval request and its status"
    )


R = TypeVar("R", bound=BaseModel)


class Guarded(BaseModel, Generic[R]):
    """A guarded tool's result: the verdict, then what the tool really returned.

    ``result`` is null when the tool did not run (a rejection, or the backend refused), so
    an error result still conforms to the tool's output schema.
    """

    verdict: Verdict
    result: R | None = None


class SearchHits(BaseModel):
    hits: list[KBHit]


class PostedMessage(BaseModel):
    id: str
    sender: str
    content: str
    ts: str


class Source(BaseModel):
    url: str
    title: str


class Signal(BaseModel):
    """One critic signal: the judge's score, the policy's threshold, whether it passed."""

    signal: str
    value: float = Field(description="the judge's score, from 0 to 1")
    min: float | None = Field(None, description="passes at or above this")
    max: float | None = Field(None, description="passes at or below this")
    passed: bool


class AnswerOutputs(BaseModel):
    """What verify_answer returns beside the verdict (lingyi.answers): the source gate, the
    attempt, and what a failed attempt lacks."""

    sources: list[Source] = Field(
        description="what may be shown with the answer; empty whenever the gate is closed"
    )
    gate: Literal["open", "no_results", "validation", "critic"]
    gates_closed: list[str]
    critic: Literal["passed", "failed", "skipped", "not_run"]
    signals: list[Signal] = Field(
        default_factory=list,
        description="the critic's scored signals; empty when it did not score (see critic)",
    )
    intent: Literal["general", "catalog"]
    attempt: int
    max_attempts: int
    gaps: list[dict[str, Any]] = Field(description="per failed check: code, reason, what to fix")
    degraded: bool
    fallback_answer: str | None = Field(None, description="when degraded: an answer citing nothing")


class TaskOutputs(BaseModel):
    """What begin_task and end_task return beside the verdict (lingyi.tasks)."""

    task: Literal["begin", "end"]
    intent: str
    requires: list[str] = Field(default_factory=list, description="begin: what finishing takes")
    complete: bool | None = Field(None, description="end: every required tool ran")
    missing: list[str] = Field(default_factory=list, description="end: required, not yet called")
    called: list[str] = Field(default_factory=list, description="end: tools run since it began")


class CheckLine(BaseModel):
    stage: str
    code: str
    passed: bool
    reason: str
    on_fail: OnFail
    shadow: OnFail | None = Field(None, description="in shadow mode: the on_fail enforcing gives")


class Verification(BaseModel):
    """The whole verification as ``lingyi verify`` prints it (the ``verify`` tool's result):
    every check, approved or not; no check's detail (it can be large)."""

    id: str = Field(description="the verification record in the log")
    assertion_id: str | None
    member: str | None = Field(description="the member that decided (null: unknown)")
    decision: Decision
    reason: str
    recommendation: str | None
    fallback: Fallback | None
    checks: list[CheckLine]
    shadow: ShadowVerdict | None
    outputs: dict[str, Any] = Field(description="a conclusion's route, an answer's sources")
    policy_version: str

    @classmethod
    def of(cls, result: VerificationResult) -> Verification:
        return cls.model_validate(result.model_dump(exclude={"checks": {"__all__": {"detail"}}}))


def verdict_of(
    result: VerificationResult,
    member: str,
    executed: Executed | None = None,
    *,
    error: str | None = None,
) -> Verdict:
    """The verdict of ``result``; ``member`` is the name given, when no member decided."""
    return Verdict(
        verification_id=result.id,
        member=result.member or member,
        decision=result.decision.value,
        codes=[c.code for c in result.checks if c.blocking],
        reason=result.reason,
        recommendation=result.recommendation,
        fallback=result.fallback,
        executed=executed,
        error=error,
        checks=[
            CheckBrief(stage=c.stage.value, code=c.code, passed=c.passed, reason=c.reason)
            for c in result.checks
            if result.decision is not Decision.APPROVED  # keep approvals light on the wire
        ],
        outputs=result.outputs or None,
        argument_problems=argument_problems(result),
    )


def argument_problems(result: VerificationResult) -> list[dict[str, Any]]:
    """What a model needs to fix its call in one retry: every failed check's argument problems
    (``tool.args_schema``, ``tool.path_allowed``, ``git.branch_exists``…), empty fields left out."""
    return [
        {k: v for k, v in p.items() if v is not None}
        for c in result.checks
        if not c.passed
        for p in c.detail.get("problems", [])
        if isinstance(p, dict) and "field" in p
    ]


@dataclass(frozen=True)
class Reply:
    """A tool's answer, and the verdict in it (which also goes to the client's log)."""

    result: CallToolResult
    verdict: Verdict


def _reply(payload: Verdict | Guarded[Any], *, is_error: bool) -> Reply:
    """Serialised once: the text is the structured content's own JSON, as the MCP spec asks of
    a tool with an output schema (for clients that read only the text)."""
    verdict = payload if isinstance(payload, Verdict) else payload.verdict
    data = payload.model_dump(mode="json")
    text = [TextContent(type="text", text=_json_text(data, payload))]
    return Reply(CallToolResult(content=text, structured_content=data, is_error=is_error), verdict)


def _json_text(data: dict[str, Any], payload: BaseModel) -> str:
    try:
        return orjson.dumps(data).decode()
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, a lone surrogate
        return payload.model_dump_json()


def success(payload: Verdict | Guarded[Any]) -> Reply:
    return _reply(payload, is_error=False)


def refusal(payload: Verdict | Guarded[Any]) -> Reply:
    """isError with the structured verdict: the model reads why and what to do instead."""
    return _reply(payload, is_error=True)


LOG_UNWRITABLE = "log.unwritable"


def log_failure(language: str, member: str, error: str, *, wrap: bool) -> Reply:
    """The tool did not run because its verification could not be logged (fail closed).

    An error result in the tool's own output shape, like a rejection, so the client reads
    what happened and that nothing ran; ``wrap``: the tool answers a :class:`Guarded`.
    """
    verdict = Verdict(
        verification_id=None,
        member=member,
        decision="rejected",
        codes=[LOG_UNWRITABLE],
        reason=f"[{LOG_UNWRITABLE}] "
        + messages.text(language, f"{LOG_UNWRITABLE}.fail", error=error),
        recommendation=messages.text(language, f"{LOG_UNWRITABLE}.hint"),
        error=error,
    )
    return refusal(Guarded(verdict=verdict) if wrap else verdict)
