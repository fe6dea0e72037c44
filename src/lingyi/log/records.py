"""What a line of the verification log holds: typed records, and helpers on raw records.

Six kinds of record share the log: a ``verification`` (one per verdict), an ``appeal``
against one, its ``appeal_resolution``, a ``key_rotation`` (the writer's own: the chain's
key changes), an ``approval`` event (a person's approval of one call, lingyi.approvals), and
an ``outcome`` (a call the guard let through that did not run: it failed, or waits for a
person). Writers build them as the models below, so a field cannot be misspelt or
forgotten; the writer adds the envelope (``v``, ``id``, ``ts``, ``prev``, ``seq``, ``key_id``,
``hash``, and ``truncated`` when a value was cut to the size limit). Readers on the hot path (stats, query) keep the parsed JSON as a dict,
because validating a model per line would cost more than reading it, and because old
records (no ``kind``, no ``v``) must still be counted; :func:`parse_record` gives the typed
view to readers that want it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from lingyi.models import Assertion, CheckResult, Fallback, Stage, ToolCall, VerificationResult

SCHEMA_VERSION = 1
KINDS = ("verification", "appeal", "appeal_resolution", "key_rotation", "approval", "outcome")
APPROVAL_EVENTS = ("requested", "approved", "refused", "expired", "used")
OUTCOMES = ("upheld", "overturned")
CALL_OUTCOMES = ("failed", "held", "refused")  # an ``outcome`` record's status (stable)
# The writers build verification records as dicts (verification_record) and most commands
# never validate one: each model is built on its first use (pydantic's defer_build), not at
# import, which spares ``lingyi verify`` and ``lingyi serve`` building the 14 of them.
_LAZY = ConfigDict(defer_build=True)


class Truncation(BaseModel):
    """A value stored cut to the size limit: where it was, how big, and its hash."""

    model_config = _LAZY

    field: str
    bytes: int
    sha256: str


ENVELOPE = ("id", "v", "ts", "prev", "seq", "key_id", "hash", "truncated")


class RecordModel(BaseModel):
    """Fields every record may carry; the envelope is filled in by the writer."""

    # A misspelt field is an error, not a new key; built on first use (see _LAZY).
    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str | None = None
    v: int | None = None
    ts: str | None = None
    prev: str | None = None
    seq: int | None = None  # the record's number in the chain, from 1
    key_id: str | None = None  # the key of the MAC in ``hash`` (absent: a plain sha256)
    hash: str | None = None
    # Values cut to the size limit: each one's path, full size in bytes and sha256.
    truncated: list[Truncation] | None = None

    def to_log(self) -> dict[str, Any]:
        """The JSON object to append (envelope fields left to the writer are omitted)."""
        data = self.model_dump(mode="json", by_alias=True)
        for name in (*ENVELOPE, *self.OMIT_IF_NONE):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    # Optional fields that are left out rather than written as null (older readers and the
    # hashes of records already written expect them absent).
    OMIT_IF_NONE: ClassVar[tuple[str, ...]] = ()


class KeyRotationRecord(RecordModel):
    """The chain's key changes here (``from`` None: the chain starts being keyed)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kind: Literal["key_rotation"] = "key_rotation"
    from_key: str | None = Field(None, alias="from")
    to: str


class CheckEntry(BaseModel):
    """One check of a verification, as logged (``detail`` stays out: it can be large)."""

    model_config = _LAZY

    stage: str
    code: str
    passed: bool
    on_fail: str
    reason: str = ""
    degraded: bool = False
    shadow: str | None = None  # in shadow mode: the on_fail enforcing would give (else absent)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("shadow") is None:
            data.pop("shadow", None)  # written only for checks in shadow mode
        return data


class ShadowEntry(BaseModel):
    """What a verification would have decided with its shadow checks enforcing."""

    model_config = _LAZY

    decision: str
    codes: list[str] = Field(default_factory=list)
    reason: str = ""


class JudgeCriterion(BaseModel):
    """One criterion of the rubric (the policy's wording) and the judge's verdict on it."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    criterion: str
    passed: bool


class JudgeSignal(BaseModel):
    """One scored signal: the judge's score, the policy's threshold, and whether it passed."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    signal: str
    score: float
    min: float | None
    max: float | None
    passed: bool
    threshold_from: str  # the policy file whose threshold applied (a member's override)


class JudgeTrace(BaseModel):
    """What the judge did for one verification: written only when it ran or was consulted.

    ``outcome`` is stable (satisfied, needs_revision, max_iterations_reached, failed,
    malformed, grader_error, unavailable); ``why`` says what went wrong when there is no
    verdict (no_api_key, budget_session, budget_day, busy, timeout, connection, http_429, …).
    ``called``: a request was sent; ``cached``: the verdict was reused. Costs are estimates
    from the config's price table (``price_assumed``: the model was not in it).
    """

    model_config = ConfigDict(defer_build=True, extra="forbid")

    rule: str
    kind: str
    model: str
    subject: str
    outcome: str
    why: str | None
    called: bool
    cached: bool
    revision: int
    max_revisions: int
    criteria: list[JudgeCriterion]
    signals: list[JudgeSignal] = Field(default_factory=list)  # scored criteria (older: none)
    input_tokens: int
    output_tokens: int
    cost_usd: float
    price_assumed: bool
    latency_ms: float


class VerificationRecord(RecordModel):
    kind: Literal["verification"] = "verification"
    source: str
    session: str
    member: str
    member_as_given: str | None = None  # the name the caller used, when not the canonical id
    type: str
    assertion_id: str | None = None
    content: str
    tool_call: ToolCall | None = None
    evidence_ids: list[str] = Field(default_factory=list)
    decision: str
    reason: str
    recommendation: str | None = None
    fallback: Fallback | None = None
    checks: list[CheckEntry]
    latency_ms: float
    policy_version: str
    # Written only when there is something to say (records stay compact, older ones valid):
    uncertain: list[str] | None = None  # codes of checks that could not decide
    normalized: list[str] | None = None  # steps that changed the content before the checks
    outputs: dict[str, Any] | None = None  # what a conclusion or an answer adds (lingyi.kinds)
    payload: dict[str, Any] | None = None  # the structured input of a conclusion or an answer
    judge: JudgeTrace | None = None  # when the judge ran or was consulted
    shadow: ShadowEntry | None = None  # when a check in shadow mode ran

    OMIT_IF_NONE = (
        "member_as_given", "uncertain", "normalized", "outputs", "payload", "judge", "shadow",
    )  # fmt: skip


class Subject(BaseModel):
    """What stats and query need of an appealed verification, copied into the appeal.

    With it, stats attribute appeals per member and code in one pass without keeping every
    verification in memory.
    """

    model_config = _LAZY

    ts: str | None = None
    member: str | None = None
    type: str | None = None
    decision: str | None = None
    session: str | None = None
    tool: str | None = None
    codes: list[str] = Field(default_factory=list)


class AppealRecord(RecordModel):
    kind: Literal["appeal"] = "appeal"
    appeal_of: str
    reason: str
    by: str
    subject: Subject


class AppealResolutionRecord(RecordModel):
    kind: Literal["appeal_resolution"] = "appeal_resolution"
    appeal_of: str | None
    appeal_id: str | None
    outcome: Literal["upheld", "overturned"]
    note: str
    by: str
    subject: Subject | None = None

    OMIT_IF_NONE = ("subject",)


class ApprovalRecord(RecordModel):
    """One event in the life of a human approval of one call (lingyi.approvals).

    ``requested`` carries what the approval is bound to (member, principal, tool, the digest
    of the canonical JSON arguments, policy version, expiry) and the arguments redacted; the
    later events (``approved``, ``refused``, ``expired``, ``used``) name the ``approval_id``
    and repeat the binding, so each record reads on its own in ``log tail``.
    """

    kind: Literal["approval"] = "approval"
    event: Literal["requested", "approved", "refused", "expired", "used"]
    approval_id: str
    session: str
    member: str
    principal: str | None = None  # the token the call came with (None: stdio, no token)
    tool: str
    args_digest: str
    args: dict[str, Any] = Field(default_factory=dict)  # redacted, for the person who decides
    policy_version: str
    expires: str
    via: Literal["pending", "elicitation"] = "pending"
    why: Literal["required", "uncertain", "destructive"] = "required"
    verification_id: str | None = None  # the verification the request (or use) followed
    by: str | None = None  # who approved or refused: a login name, a token, "elicitation"
    reason: str | None = None

    OMIT_IF_NONE = ("principal", "verification_id", "by", "reason")


class OutcomeRecord(RecordModel):
    """What became of a call the guard let through (approved, or its fallback) when it did
    not simply run: ``failed`` (the tool or upstream raised, crashed, timed out or answered
    malformed; ``error`` says how, redacted), ``held`` (it waits for a person's approval,
    ``approval_id``) or ``refused`` (a person refused it). A call that ran and returned has
    no outcome record: its verification says so, and a success costs no second append.

    Written after the verification it follows (``verification_id``), in the same chain, so
    ``log verify`` proves it and a reviewer sees that an "approved" call never happened.
    """

    kind: Literal["outcome"] = "outcome"
    verification_id: str
    session: str
    member: str
    tool: str
    status: Literal["failed", "held", "refused"]
    executed: Literal["original", "fallback"] = "original"
    error: str | None = None
    approval_id: str | None = None

    OMIT_IF_NONE = ("error", "approval_id")


LogRecord = (
    VerificationRecord
    | AppealRecord
    | AppealResolutionRecord
    | KeyRotationRecord
    | ApprovalRecord
    | OutcomeRecord
)
_MODELS: dict[str, type[LogRecord]] = {
    "verification": VerificationRecord,
    "appeal": AppealRecord,
    "appeal_resolution": AppealResolutionRecord,
    "key_rotation": KeyRotationRecord,
    "approval": ApprovalRecord,
    "outcome": OutcomeRecord,
}


def parse_record(data: dict[str, Any]) -> LogRecord:
    """The typed view of a record read from the log (raises pydantic's ValidationError).

    A record without ``kind`` is a verification: the first schema had only those. Fields a
    newer lingyi added are left out of the view (the dict still has them).
    """
    kind = record_kind(data)
    model = _MODELS.get(kind)
    if model is None:
        raise ValueError(f"unknown record kind {kind!r} (known: {', '.join(KINDS)})")
    names = {f.alias or n for n, f in model.model_fields.items()}
    known = {k: v for k, v in data.items() if k in names}
    return model.model_validate({**known, "kind": kind})


def verification_record(
    assertion: Assertion, result: VerificationResult, source: str, member: str | None = None
) -> dict[str, Any]:
    """The log record of one verification: the JSON of a :class:`VerificationRecord`.

    ``member`` is the canonical member id (灵研/LingYan → lingresearch) so that stats group by
    member; the name the caller used is kept in ``member_as_given`` when it differs.

    Built as a dict, not through the model: this runs on every guarded call, and validating
    then dumping the model costs about three times as much (~35 µs against ~11 µs). The
    test suite checks that the dict is exactly what the model would write.
    """
    given: dict[str, Any] = {}
    if member and member != assertion.member:
        given["member_as_given"] = assertion.member
    if unsure := [c.code for c in result.checks if c.uncertain]:
        given["uncertain"] = unsure
    if result.normalization:
        given["normalized"] = list(result.normalization)
    if result.outputs:
        given["outputs"] = result.outputs
    if assertion.payload:
        given["payload"] = assertion.payload
    if (trace := judge_trace(result)) is not None:
        given["judge"] = trace
    if result.shadow is not None:
        given["shadow"] = result.shadow.model_dump(mode="json")
    tool, fallback = assertion.tool_call, result.fallback
    return {
        "id": result.id,
        "kind": "verification",
        "source": source,
        "session": assertion.session,
        "member": member or assertion.member,
        **given,
        "type": assertion.type.value,
        "assertion_id": assertion.id,
        "content": assertion.content,
        "tool_call": tool.model_dump(mode="json") if tool else None,
        "evidence_ids": assertion.evidence_ids,
        "decision": result.decision.value,
        "reason": result.reason,
        "recommendation": result.recommendation,
        "fallback": fallback.model_dump(mode="json") if fallback else None,
        "checks": [_check_entry(c) for c in result.checks],
        "latency_ms": result.latency_ms,
        "policy_version": result.policy_version,
    }


JUDGE_TRACE = "judge"  # the key of a judge check's detail that holds its JudgeTrace
JUDGE_OUTCOMES = (  # stable: stats, reports and tests count by these
    "satisfied",
    "needs_revision",
    "max_iterations_reached",
    "failed",
    "malformed",
    "grader_error",
    "unavailable",
)


def judge_trace(result: VerificationResult) -> dict[str, Any] | None:
    """The judge's trace in a result (the judge stage's check carries it), or None."""
    for check in result.checks:
        trace = check.detail.get(JUDGE_TRACE) if check.stage is Stage.JUDGE else None
        if isinstance(trace, dict):
            return trace
    return None


def _check_entry(check: CheckResult) -> dict[str, Any]:
    """The JSON of a :class:`CheckEntry`."""
    entry = {
        "stage": check.stage.value,
        "code": check.code,
        "passed": check.passed,
        "on_fail": check.on_fail.value,
        "reason": check.reason,
        "degraded": check.degraded,
    }
    if check.shadow is not None:
        entry["shadow"] = check.shadow.value
    return entry


# --------------------------------------------------------------------------- raw records


def record_kind(record: dict[str, Any]) -> str:
    """Records without ``kind`` are verifications (the older schema had only those)."""
    kind = record.get("kind", "verification")
    return kind if isinstance(kind, str) else "?"


def failed_codes(record: dict[str, Any]) -> list[str]:
    """Codes of the checks that failed in a verification record (any on_fail)."""
    checks = record.get("checks")
    if not isinstance(checks, list):
        return []
    return [str(c.get("code")) for c in checks if isinstance(c, dict) and c.get("passed") is False]


def subject_of(verification: dict[str, Any]) -> Subject:
    """The snapshot of a verification that its appeals carry."""
    tool = verification.get("tool_call")
    return Subject(
        ts=_text(verification.get("ts")),
        member=_text(verification.get("member")),
        type=_text(verification.get("type")),
        decision=_text(verification.get("decision")),
        session=_text(verification.get("session")),
        tool=_text(tool.get("name")) if isinstance(tool, dict) else None,
        codes=failed_codes(verification),
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


# --------------------------------------------------------------------------- timestamps


def ts_key(moment: datetime) -> str:
    """The log's own timestamp text for ``moment``: comparable as a plain string."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def normalise_ts(value: object) -> str | None:
    """A record's ``ts`` in the canonical form, or None when it is not a timestamp."""
    if not isinstance(value, str):
        return None
    if len(value) == 24 and value[-1] == "Z" and value[10] == "T":
        return value  # the writer's own format: no parsing on the hot path
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts_key(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
