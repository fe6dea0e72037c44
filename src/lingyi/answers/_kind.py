"""The answer kind: input → assertion, and after the decision the source gate and the retries.

The answer's Markdown is the assertion's content, so every content check (medical advice,
relays, predictions, URLs) runs on it; the question, intent and attempt are the payload that
the ``answer.*`` checks read. After the layer decided, :meth:`AnswerKind.finish`:

* counts the attempt at this question in the session (:func:`attempts_key`);
* **degrades** a failed answer at the policy's last attempt, and any answer past it: the
  decision becomes ``fallback`` with an answer that cites nothing;
* opens or closes the **source gate**. ``sources`` (URL and title as the tool returned them)
  are shown only when the session holds search results (``no_results``), the answer's
  validation passed (``validation``) and the critic did not fail (``critic``); otherwise they
  are empty and ``gate`` names the first gate that closed (``gates_closed`` all of them). The
  decision on the text and the gate are separate fields: with the critic's rule at ``warn``,
  an answer is accepted while its sources stay hidden;
* lists the **gaps** of a failed attempt (unknown URLs, missing sources, the critic's failed
  criteria and the signals outside their thresholds) so the member can search again and
  rewrite;
* carries the critic's **signals** (confidence, relevance, intent alignment, drift, ungrounded
  claims in the shipped policy): each score with its threshold and whether it passed. Empty
  when the critic did not score (``critic`` says why: ``skipped``, ``not_run``, or a verdict
  that was malformed or missing).
"""

from __future__ import annotations

from typing import Any

from lingyi import messages
from lingyi.answers.checks import attempts_key, urls_cited
from lingyi.ledger import SessionLedger
from lingyi.log.records import JUDGE_TRACE, judge_trace
from lingyi.models import (
    Assertion,
    AssertionType,
    CheckResult,
    Decision,
    Fallback,
    Stage,
    VerificationResult,
)
from lingyi.text import normalize_url

INTENTS = ("general", "catalog")
DEFAULT_MAX_ATTEMPTS = 3  # when no policy runs answer.attempts
# Detail keys a gap carries over from its check: what the member needs to fix the answer.
GAP_KEYS = (
    "unknown_urls", "unknown_images", "broken", "unclosed", "problems", "have", "need",
    "fabricated", "outcome",
)  # fmt: skip


class AnswerKind:
    name = "answer"

    def assertion(self, given: dict[str, Any]) -> Assertion:
        """The answer as an assertion; raises ValueError naming the field that is wrong."""
        for field in ("member", "answer"):
            if not isinstance(given.get(field), str) or not given[field].strip():
                raise ValueError(f"{field}: a non-empty text is required")
        question = given.get("question", "")
        intent = given.get("intent") or "general"
        if not isinstance(question, str):
            raise ValueError("question: must be a text")
        if intent not in INTENTS:
            raise ValueError(f"intent: {intent!r} is not allowed; valid values: general, catalog")
        attempt = given.get("attempt")
        if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool)):
            raise ValueError("attempt: must be an integer")
        payload = {"question": question, "intent": intent, "attempt_given": attempt}
        return Assertion(
            id=given.get("id"),
            member=given["member"],
            type=AssertionType.ANSWER,
            content=given["answer"],
            session=str(given.get("session") or "default"),
            payload={k: v for k, v in payload.items() if v is not None},
            # What the critic (the judge) sees beside the answer: relevance needs the question.
            context={"question": question, "intent": intent},
        )

    def finish(
        self, assertion: Assertion, result: VerificationResult, session: SessionLedger
    ) -> dict[str, Any]:
        """The outputs; a failed last attempt (or one past the limit) is degraded in place."""
        key = attempts_key(result.member or assertion.member, assertion.payload.get("question", ""))
        attempt = session.state[key] = int(session.state.get(key, 0)) + 1
        limit = _detail(result, "answer.attempts", "max_attempts") or DEFAULT_MAX_ATTEMPTS
        degraded = result.decision is not Decision.APPROVED and attempt >= limit
        degraded = degraded or attempt > limit
        if degraded:
            _degrade(result)
        _degrade_shadow(result, attempt, limit)
        closed = gates_closed(result, session)
        return {
            "sources": [] if closed or degraded else sources(assertion, session),
            "gate": closed[0] if closed else "open",
            "gates_closed": closed,
            "critic": critic_state(result),
            "signals": signals(result),
            "intent": _detail(result, "answer.catalog_sources", "intent")
            or assertion.payload.get("intent", "general"),
            "attempt": attempt,
            "max_attempts": limit,
            "gaps": gaps(result),
            "degraded": degraded,
            "fallback_answer": result.fallback.content if degraded and result.fallback else None,
        }


def _detail(result: VerificationResult, code: str, key: str) -> Any:
    return next((c.detail.get(key) for c in result.checks if c.code == code), None)


def _degrade(result: VerificationResult) -> None:
    """No attempt left: the answer is replaced by one that cites nothing (worded by
    answer.attempts in the member's language; English when no policy runs it)."""
    result.decision = Decision.FALLBACK
    result.fallback = Fallback(
        kind="answer.degraded",
        content=_detail(result, "answer.attempts", "degraded_answer")
        or messages.text("en", "answer.degraded.content"),
        note=_detail(result, "answer.attempts", "degraded_note")
        or messages.text("en", "answer.degraded.note"),
    )


def _degrade_shadow(result: VerificationResult, attempt: int, limit: int) -> None:
    """The shadow decision degraded as the decision would have been (same attempt count)."""
    shadow = result.shadow
    if shadow is None:
        return
    if attempt > limit or (shadow.decision is not Decision.APPROVED and attempt >= limit):
        shadow.decision = Decision.FALLBACK


def critic_state(result: VerificationResult) -> str:
    """``passed`` / ``failed``: what the judge said; ``not_run``: a deterministic check failed
    first (the judge never runs then); ``skipped``: no judge is configured for this answer."""
    verdict = next((c for c in result.checks if c.stage is Stage.JUDGE), None)
    if verdict is not None:
        return "passed" if verdict.passed else "failed"
    return "not_run" if any(c.blocking for c in result.checks) else "skipped"


def signals(result: VerificationResult) -> list[dict[str, Any]]:
    """The critic's scored signals: value, threshold (``min``/``max``), passed, in policy order."""
    trace = judge_trace(result) or {}
    return [
        {"signal": s["signal"], "value": s["score"], "min": s["min"], "max": s["max"],
         "passed": s["passed"]}
        for s in trace.get("signals") or []
    ]  # fmt: skip


def gates_closed(result: VerificationResult, session: SessionLedger) -> list[str]:
    """The gates that closed, in order: no search results, validation, critic."""
    closed = [] if session.urls else ["no_results"]
    deterministic = [c for c in result.checks if c.stage is not Stage.JUDGE]
    if any(_failed_validation(c) for c in deterministic):
        closed.append("validation")
    if critic_state(result) == "failed":
        closed.append("critic")
    return closed


def _failed_validation(check: CheckResult) -> bool:
    """A blocking failure, or an answer check that failed even at ``warn``."""
    return check.blocking or (not check.passed and check.code.startswith("answer."))


def sources(assertion: Assertion, session: SessionLedger) -> list[dict[str, str]]:
    """The links the answer cites that tools returned, as the tool returned them, each once."""
    links, _ = urls_cited(assertion.content)
    shown: dict[str, dict[str, str]] = {}
    for url in links:
        for item in session.by_url(url)[:1]:
            returned = item.evidence.url or url
            entry = {"url": returned, "title": item.evidence.title}
            shown.setdefault(normalize_url(returned), entry)
    return list(shown.values())


def gaps(result: VerificationResult) -> list[dict[str, Any]]:
    """What a failed attempt lacks, one entry per failed check, for the member's rewrite."""
    out = []
    for check in result.checks:
        if check.passed:
            continue
        gap: dict[str, Any] = {"code": check.code, "reason": check.reason}
        gap |= {k: check.detail[k] for k in GAP_KEYS if check.detail.get(k) not in (None, [])}
        if trace := check.detail.get(JUDGE_TRACE):
            gap["criteria"] = [c["criterion"] for c in trace.get("criteria", []) if not c["passed"]]
            missed = [s for s in trace.get("signals") or [] if not s["passed"]]
            if missed:
                gap["signals"] = [
                    {k: s[k] for k in ("signal", "score", "min", "max")} for s in missed
                ]
        out.append(gap)
    return out


ANSWER = AnswerKind()  # registered through the lingyi.kinds entry point (pyproject.toml)
