"""The conclusion kind: the input checked for shape, the assertion built, the route decided.

The input (a replay event, the ``verify_conclusion`` tool's arguments, ``lingyi verify
--conclusion``) is ``{id, session, member, conclusion: {summary, confidence, evidence_ids,
hypotheses: [{text, risk_level, actions: [{name, args, verify_first}]}]}, findings:
{<specialist>: {evidence_ids | evidences: [{id, …}], fallback}}}``. Only what no check could
read is refused here (no member, a conclusion or findings that are not objects); everything
else is the checks' to judge, so that a model gets a verdict and feedback it can act on.

The route after the decision: ``passed`` when approved; else ``revise`` while this conclusion's
revisions in this session are under the maximum (``conclusion.schema``'s ``max_revisions``),
with every violation as feedback; else ``final``: an honest end that says so and recommends a
hand-over to a person. The count lives in the session (``SessionLedger.state``).
"""

from __future__ import annotations

import threading
from typing import Any

from lingyi import messages
from lingyi.ledger import SessionLedger
from lingyi.models import Assertion, AssertionType, Decision, VerificationResult

DEFAULT_MAX_REVISIONS = 2
_COUNTING = threading.Lock()
ROUTES = ("passed", "revise", "final")


def _text(value: Any, field: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        what = "a non-empty string" if required else "a string"
        raise ValueError(f"{field}: {what} is required, not {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:80]


def _object(
    value: Any, field: str, shape: str, *, default: dict[str, Any] | None = None
) -> dict[str, Any]:
    if value is None and default is not None:
        return default
    if not isinstance(value, dict):
        raise ValueError(f"{field}: an object {shape} is required, not {_shown(value)}")
    return value


def content_of(conclusion: dict[str, Any]) -> str:
    """What the content checks read: the summary and each hypothesis' text."""
    parts = [conclusion.get("summary")]
    hypotheses = conclusion.get("hypotheses")
    if isinstance(hypotheses, list):
        parts += [h.get("text") for h in hypotheses if isinstance(h, dict)]
    return "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


# A session revises at most this many conclusions' worth (max_revisions each): past that every
# failing conclusion is final, so a model cannot revise forever by changing the id.
SESSION_CONCLUSIONS = 8
_SESSION_KEY = "conclusion.revisions.session"


class ConclusionKind:
    name = "conclusion"

    def assertion(self, given: dict[str, Any]) -> Assertion:
        """The assertion of a conclusion input; ValueError naming the field when unusable."""
        if not isinstance(given, dict):
            raise ValueError(f"a conclusion is a JSON object, not {_shown(given)}")
        member = _text(given.get("member"), "member", required=True)
        conclusion = _object(
            given.get("conclusion"), "conclusion", "{summary, confidence, evidence_ids, hypotheses}"
        )
        findings = _object(
            given.get("findings"),
            "findings",
            "{<specialist>: {evidence_ids | evidences, fallback}}",
            default={},
        )
        return Assertion(
            id=_text(given.get("id"), "id"),
            member=str(member),
            type=AssertionType.CONCLUSION,
            content=content_of(conclusion),
            session=_text(given.get("session"), "session") or "default",
            payload={"conclusion": conclusion, "findings": findings},
        )

    def finish(
        self, assertion: Assertion, result: VerificationResult, session: SessionLedger
    ) -> dict[str, Any]:
        maximum, lang = _route_params(result)
        key = f"conclusion.revisions:{assertion.id or ''}"
        with _COUNTING:  # two submissions of one conclusion at once must not both revise
            done = int(session.state.get(key, 0))
            spent = int(session.state.get(_SESSION_KEY, 0))
            if spent >= maximum * SESSION_CONCLUSIONS:  # a new id each time is no way round
                done = max(done, maximum)
            if result.decision is not Decision.APPROVED and done < maximum:
                session.state[key] = done + 1
                session.state[_SESSION_KEY] = spent + 1
        out: dict[str, Any] = {"max_revisions": maximum}
        if result.decision is Decision.APPROVED:
            return {"route": "passed", "revisions": done, **out}
        out["feedback"] = feedback(result)
        if done < maximum:
            left = maximum - done - 1
            note = messages.text(
                lang, "conclusion.route.revise", count=len(out["feedback"]), left=left
            )
            return {"route": "revise", "revisions": done + 1, **out, "message": note}
        note = messages.text(lang, "conclusion.route.final", max=maximum)
        return {"route": "final", "revisions": done, **out, "message": note}


def _route_params(result: VerificationResult) -> tuple[int, str]:
    """``max_revisions`` and the language, as ``conclusion.schema`` reported them."""
    for check in result.checks:
        route = check.detail.get("route")
        if isinstance(route, dict):
            return int(route.get("max_revisions", DEFAULT_MAX_REVISIONS)), str(
                route.get("lang", "en")
            )
    return DEFAULT_MAX_REVISIONS, "en"


def feedback(result: VerificationResult) -> list[str]:
    """Every violation, with what to do about it: the failed checks, warnings included."""
    lines = []
    for check in result.checks:
        if check.passed:
            continue
        line = f"[{check.code}] {check.reason}"
        lines.append(f"{line} → {check.recommendation}" if check.recommendation else line)
    return lines
