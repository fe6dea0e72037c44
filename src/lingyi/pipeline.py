"""One guarded tool call, top to bottom, in one worker thread:

    verify (and log) → approvals → execute → audit → record evidence → reply

Each step reads and fills one :class:`Call`; a step that settles the call (a rejection, a hold
for a person, a backend's refusal) marks it ``done`` and the steps after it do not run. The reply
is built once, at the end, from what the call holds, with the one verdict type
(:class:`lingyi.verdict.Verdict`). The verification record is in the log before anything touches
the world (the guard writes it in ``verify``), so an interrupted server never has done work the
log does not show; the outcome of a call that was let through but did not run to its end is
appended after it (``audit``).

The server builds a :class:`Call` per tools/call and runs :meth:`Pipeline.run`; nothing else
decides or writes the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from lingyi._logging import get_logger
from lingyi.approvals import ApprovalGate
from lingyi.errors import BackendError, LogError
from lingyi.guard import Guard
from lingyi.ledger import Ledger
from lingyi.log.records import OutcomeRecord
from lingyi.models import (
    Assertion,
    AssertionType,
    Decision,
    Evidence,
    Principal,
    ToolCall,
    VerificationResult,
)
from lingyi.policy import MemberPolicy, PolicySet
from lingyi.redact import clip, redact_text
from lingyi.verdict import Executed, Guarded, Reply, refusal, success, verdict_of

log = get_logger()

NO_OWNER = "(no owner)"  # the member of a call to a tool no policy owns: member.known rejects it
ERROR_CHARS = 2000  # an outcome's error, redacted then clipped (an upstream's text is long)
OutcomeStatus = Literal["failed", "held", "refused"]
# The real work of a tool: its owner's policy and the approved arguments → result, evidence.
Execute = Callable[[MemberPolicy, dict[str, Any]], tuple[BaseModel, list[Evidence]]]


@dataclass(frozen=True)
class Caller:
    """Who is calling: the ledger session, and the principal when a token was presented.

    ``once``: the session is this request's alone (stateless HTTP), dropped when it is answered.
    """

    session: str
    principal: Principal | None = None
    once: bool = False


@dataclass
class Call:
    """One guarded call as it flows through the steps."""

    caller: Caller
    tool: str
    args: dict[str, Any]
    execute: Execute
    policies: PolicySet  # one snapshot for the whole call
    owner: MemberPolicy | None = None
    member: str = NO_OWNER
    result: VerificationResult | None = None
    runnable: ToolCall | None = None  # what runs: the call asked for, or its fallback
    held: Reply | None = None  # the approval gate's answer, when a person decides first
    payload: BaseModel | None = None
    evidence: list[Evidence] = field(default_factory=list)
    executed: Executed = "original"
    error: str | None = None  # the backend's refusal
    done: bool = False


class Pipeline:
    """The steps of a guarded call, composed once per server."""

    def __init__(self, guard: Guard, ledger: Ledger, approvals: ApprovalGate) -> None:
        self.guard, self.ledger, self.approvals = guard, ledger, approvals
        self.steps: tuple[Callable[[Call], None], ...] = (
            self.verify,
            self.hold,
            self.execute,
            self.record,
        )

    def run(self, call: Call) -> Reply:
        for step in self.steps:
            if call.done:
                break
            step(call)
        return self.reply(call)

    def verify(self, call: Call) -> None:
        """The layer decides and the guard logs; a call with nothing to run is done."""
        call.owner = call.policies.tool_owner(call.tool)
        call.member = member_of(call.policies, call.tool)
        asked = ToolCall(name=call.tool, arguments=call.args)
        assertion = Assertion(member=call.member, type=AssertionType.ACTION, tool_call=asked)
        assertion.session = call.caller.session
        call.result = self.guard.check(
            assertion, self.ledger, policies=call.policies, principal=call.caller.principal
        )
        call.runnable = runnable_call(call.result, asked)
        call.executed = "original" if call.runnable is asked else "fallback"
        call.done = call.runnable is None or call.owner is None

    def hold(self, call: Call) -> None:
        """A person approves first when the tool's policy (or the verdict) asks for it."""
        assert call.owner is not None and call.runnable is not None and call.result is not None
        call.held = self.approvals.hold(call.caller, call.owner, call.runnable, call.result)
        if call.held is not None:
            brief = call.held.verdict.approval
            status: OutcomeStatus = (
                "held" if brief is None or brief.status == "pending" else "refused"
            )
            self.audit(call, status, approval_id=brief.id if brief else None)
            call.done = True

    def execute(self, call: Call) -> None:
        """The real work; a backend's refusal is audited and answered, a bug audited and raised."""
        assert call.owner is not None and call.runnable is not None
        try:
            call.payload, call.evidence = call.execute(call.owner, call.runnable.arguments)
        except BackendError as exc:
            call.error = str(exc)
            self.audit(call, "failed", error=call.error)
            call.done = True
        except Exception as exc:
            self.audit(call, "failed", error=f"{type(exc).__name__}: {exc}")
            raise

    def record(self, call: Call) -> None:
        """What the tool really produced becomes the session's evidence."""
        assert call.owner is not None and call.runnable is not None
        args = call.runnable.arguments
        self.ledger.record(call.caller.session, call.owner.id, call.tool, args, call.evidence)

    def reply(self, call: Call) -> Reply:
        """The one answer: the approval gate's, or the verdict with the tool's result."""
        if call.held is not None:
            return call.held
        assert call.result is not None
        ran = call.owner is not None and call.runnable is not None
        member = call.owner.id if call.owner else call.member
        verdict = verdict_of(call.result, member, call.executed if ran else None, error=call.error)
        guarded: Guarded[BaseModel] = Guarded(verdict=verdict, result=call.payload)
        return success(guarded) if call.payload is not None else refusal(guarded)

    def audit(
        self,
        call: Call,
        status: OutcomeStatus,
        *,
        error: str | None = None,
        approval_id: str | None = None,
    ) -> None:
        """The outcome of a call that was let through but did not run to its end.

        The verification is already in the log; a log that fails now leaves it there and
        the reply unchanged (said on stderr), since the call's fate is already decided.
        """
        assert call.owner is not None and call.result is not None
        record = OutcomeRecord(
            verification_id=call.result.id,
            session=call.caller.session,
            member=call.owner.id,
            tool=call.tool,
            status=status,
            executed=call.executed,
            error=clip(redact_text(error), ERROR_CHARS) if error is not None else None,
            approval_id=approval_id,
        )
        try:
            self.guard.log.append(record)
        except LogError as exc:
            log.error("outcome not logged", tool=call.tool, status=status, error=str(exc))


def member_of(policies: PolicySet, tool: str) -> str:
    """Whose policy judges a call: the tool's owner; for an upstream tool not served now, the
    owner its policy names (tool.owned then says why it is not served)."""
    if (owner := policies.tool_owner(tool)) is not None:
        return owner.id
    unserved = policies.unserved.get(tool)
    return unserved.owner if unserved else NO_OWNER


def runnable_call(result: VerificationResult, call: ToolCall) -> ToolCall | None:
    """The call to execute: the original if approved, the fallback's variant of the same tool."""
    if result.decision is Decision.APPROVED:
        return call
    fallback = result.fallback
    if result.decision is Decision.FALLBACK and fallback and fallback.tool_call:
        return fallback.tool_call if fallback.tool_call.name == call.name else None
    return None
