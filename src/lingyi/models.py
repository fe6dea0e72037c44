"""The data the layer speaks: assertions in, verdicts out (pydantic v2)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AssertionType(StrEnum):
    FACT = "fact"
    ACTION = "action"
    COMMUNICATION = "communication"
    # Structured inputs (lingyi.kinds): set by their entry points, never chosen by a caller
    # of verify_assertion, whose schema offers only the three above.
    CONCLUSION = "conclusion"
    ANSWER = "answer"
    TASK = "task"  # begin_task / end_task (lingyi.tasks)


class Decision(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"
    FALLBACK = "fallback"


class OnFail(StrEnum):
    REJECT = "reject"
    FALLBACK = "fallback"
    WARN = "warn"


class Stage(StrEnum):
    """Stages in the order the layer runs them: cheapest first."""

    PRE_CHECK = "pre_check"
    TOOL_VALIDATION = "tool_validation"
    BOUNDARY = "boundary"
    FACT_VERIFICATION = "fact_verification"
    JUDGE = "judge"


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Evidence(BaseModel):
    """One thing a tool really returned: a KB document, a commit, an analysis, a URL."""

    model_config = ConfigDict(extra="ignore")

    id: str
    title: str = ""
    snippet: str = ""
    url: str | None = None


class Assertion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    member: str
    type: AssertionType
    content: str = ""
    tool_call: ToolCall | None = None
    evidence_ids: list[str] = Field(default_factory=list)
    session: str = "default"
    context: dict[str, Any] = Field(default_factory=dict)
    # The structured part of a conclusion or an answer (see lingyi.kinds); empty otherwise.
    payload: dict[str, Any] = Field(default_factory=dict)


class Principal(BaseModel):
    """Who a transport authenticated (an HTTP bearer token): its name and the members it
    may speak for. No principal (stdio, the CLI, replay) and a token bound to no member
    both speak for anyone."""

    model_config = ConfigDict(frozen=True)

    name: str
    members: tuple[str, ...] = ()


class Fallback(BaseModel):
    """The safe, degraded alternative offered instead of the original assertion."""

    kind: str
    content: str | None = None
    tool_call: ToolCall | None = None
    note: str = ""


class CheckResult(BaseModel):
    stage: Stage
    code: str
    passed: bool
    reason: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)
    on_fail: OnFail = OnFail.REJECT
    recommendation: str | None = None
    degraded: bool = False
    fallback: Fallback | None = None  # what this check offers instead, when it failed
    found: list[Evidence] = Field(
        default_factory=list, description="what an active lookup of this check found"
    )
    uncertain: bool = False  # the check could not decide; its on_uncertain did
    # In shadow mode (``mode = "shadow"`` in its policy): the on_fail enforcing would give.
    # ``on_fail`` is then ``warn``, which is what the decision used.
    shadow: OnFail | None = None

    @property
    def blocking(self) -> bool:
        """A failure that changes the decision (warn failures are only logged)."""
        return not self.passed and self.on_fail is not OnFail.WARN


class ShadowVerdict(BaseModel):
    """What the decision would have been with the shadow checks enforcing (same run)."""

    decision: Decision
    codes: list[str] = Field(default_factory=list)  # shadow checks that failed and would block
    reason: str = ""


class VerificationResult(BaseModel):
    id: str
    assertion_id: str | None = None
    decision: Decision
    reason: str
    checks: list[CheckResult]
    recommendation: str | None = None
    fallback: Fallback | None = None
    latency_ms: float = 0.0
    policy_version: str = ""  # the version of the policy snapshot that decided
    member: str | None = None  # the canonical id of the member that decided (None: unknown)
    # The steps that changed the content before the checks (lingyi.text): the log keeps the
    # original and records these, so a reviewer sees that the text was normalised.
    normalization: list[str] = Field(default_factory=list)
    # What a kind adds after the decision (a conclusion's route, an answer's sources).
    outputs: dict[str, Any] = Field(default_factory=dict)
    # Set only when a check in shadow mode ran: the decision enforcing it would have made.
    shadow: ShadowVerdict | None = None

    @property
    def failed_codes(self) -> list[str]:
        return [c.code for c in self.checks if not c.passed]

    @property
    def found(self) -> list[Evidence]:
        """What passing checks looked up themselves (active verification): session evidence."""
        return [e for c in self.checks if c.passed for e in c.found]
