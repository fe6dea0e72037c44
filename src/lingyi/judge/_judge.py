"""The judge the layer calls: plan, remember, pay, ask, read, decide — cheapest first.

For one verification: the plan (which rule; none → the judge is not consulted), a subject
already sent back too often (a final rejection, no call), a cached verdict (no call), no API
key or a spent budget (unavailable, no call), then the call itself on the judge's loop. What
comes back is a verdict, or a problem with a stable outcome:

=========================  ===========================================  ==================
outcome                    when                                         effect
=========================  ===========================================  ==================
``satisfied``              every criterion passed                       passes
``needs_revision``         a criterion failed; revisions left           ``on_fail``, gaps
``max_iterations_reached`` needs_revision past ``max_revisions``        ``on_fail``, final
``failed``                 the rubric cannot be evaluated on it         ``on_fail``
``malformed``              the answer does not fit the schema           fails (degraded)
``grader_error``           the call raised (timeout, HTTP, connection)  ``on_error``
``unavailable``            no key, budget spent, too busy               ``on_error``
=========================  ===========================================  ==================

A destructive call's pre-flight review is the exception: without a verdict (``grader_error``
or ``unavailable``) the call is refused, code ``judge.unavailable``, whatever ``on_error`` and
the rule's ``on_fail`` say, with what would let the review happen (retry later, raise
``max_in_flight``, set the key): a busy or broken judge must not wave a push through.

A rule's scored signals are passed or failed by the policy's thresholds, not by the model: a
``satisfied`` verdict with a score outside its threshold is ``needs_revision``, and a
``needs_revision`` whose criteria and scores all pass is ``satisfied``. The scores, thresholds
and results are in the trace's ``signals``.

``failed`` and ``malformed`` never pass, whatever ``on_error`` says: the content under review
can steer what the model answers, so an answer that is not a positive verdict must not open
the gate. Only the judge's absence (``grader_error``, ``unavailable``) follows ``on_error``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic

from lingyi import messages
from lingyi.checks import CheckContext
from lingyi.config import JudgeSection
from lingyi.judge._budget import Budget, cost_usd, price_of, worst_case_usd
from lingyi.judge._memory import Revisions, VerdictCache
from lingyi.judge._plan import Plan, Signal, plan_for
from lingyi.judge._prompt import Request, build_request
from lingyi.judge._runner import Busy, JudgeLoop
from lingyi.judge._verdict import Malformed, Verdict, parse
from lingyi.log.records import JUDGE_TRACE as TRACE
from lingyi.models import Assertion, CheckResult, OnFail, Stage

UNAVAILABLE = "judge.unavailable"  # a destructive call refused for want of a verdict
_PREFLIGHT_FIXES = ("busy", "no_api_key", "budget_session", "budget_day", "timeout")


@dataclass(frozen=True)
class Problem:
    """No verdict: the outcome (malformed, grader_error, unavailable) and why."""

    outcome: str
    why: str
    code: str | None = None  # malformed: which rule of the schema the answer broke


@dataclass
class Run:
    """One consultation of the judge as it goes: what the log record's ``judge`` field says."""

    ctx: CheckContext
    plan: Plan
    subject: str
    started: float
    called: bool = False  # a request was sent (and paid for, if it got an answer)
    cached: bool = False  # the verdict came from the cache
    revision: int = 0
    why: str | None = None
    criteria: list[dict[str, Any]] = field(default_factory=list)
    signals: list[dict[str, Any]] = field(default_factory=list)  # score, threshold, passed
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    price_assumed: bool = False

    def trace(self, outcome: str) -> dict[str, Any]:
        """Every key, always (the log's ``JudgeTrace``): a stable shape for stats and people."""
        plan = self.plan
        return {
            "rule": plan.source,
            "kind": plan.kind,
            "model": plan.model,
            "subject": self.subject,
            "outcome": outcome,
            "why": self.why,
            "called": self.called,
            "cached": self.cached,
            "revision": self.revision,
            "max_revisions": plan.max_revisions,
            "criteria": self.criteria,
            "signals": self.signals,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "price_assumed": self.price_assumed,
            "latency_ms": round((time.perf_counter() - self.started) * 1000, 3),
        }


def subject_of(assertion: Assertion) -> str:
    """What revisions are counted against: the assertion id, else the tool, else the content."""
    if assertion.id:
        return f"id:{assertion.id}"
    if assertion.tool_call is not None:
        return f"tool:{assertion.tool_call.name}"
    return "sha256:" + hashlib.sha256(assertion.content.encode()).hexdigest()[:16]


class Judge:
    """The second layer. The layer calls it after every deterministic check passed (or for
    checks waiting on it); it returns one ``CheckResult``, or None when no rule applies."""

    def __init__(self, config: JudgeSection, *, api_key: str | None = None) -> None:
        self.config = config
        key = os.environ.get(config.api_key_env, "") if api_key is None else api_key
        self._key = key.strip() or None  # never logged, never in a result
        self.cache = VerdictCache(config.cache_ttl_s, config.cache_entries)
        self.budget = Budget(config.budget_session_usd, config.budget_day_usd)
        self.revisions = Revisions()
        self.loop = JudgeLoop(self._client, config.max_in_flight, config.max_waiting)

    def _client(self) -> anthropic.AsyncAnthropic:
        # An explicit key: the SDK then reads no other credential from the environment or disk.
        return anthropic.AsyncAnthropic(
            api_key=self._key,
            base_url=self.config.base_url,
            timeout=self.config.timeout_s,
            max_retries=self.config.max_retries,
        )

    def close(self) -> None:
        self.loop.close()

    def __call__(
        self, ctx: CheckContext, uncertain: Sequence[CheckResult] = ()
    ) -> CheckResult | None:
        plan = plan_for(ctx, self.config)
        if plan is None:
            return None
        run = Run(ctx, plan, subject_of(ctx.assertion), time.perf_counter())
        run.revision = self.revisions.count(ctx.assertion.session, run.subject)
        if run.revision > plan.max_revisions:  # closed: no more calls for this subject
            return self._final(run)
        signals = [(s.name, s.criterion) for s in plan.signals]
        request = build_request(
            ctx,
            plan.kind,
            list(plan.criteria),
            plan.model,
            plan.max_tokens,
            list(uncertain),
            signals,
        )
        answer: Verdict | Problem | None = self.cache.get(request.key)
        run.cached = answer is not None
        if answer is None:
            answer = self._ask(request, run)
        return self._judged(run, answer)

    # -- asking ------------------------------------------------------------------------

    def _ask(self, request: Request, run: Run) -> Verdict | Problem:
        if self._key is None:
            return Problem("unavailable", "no_api_key")
        params = request.params()
        price, run.price_assumed = price_of(self.config.prices, run.plan.model)
        held = self.budget.reserve(run.ctx.assertion.session, worst_case_usd(price, params))
        if isinstance(held, str):
            return Problem("unavailable", held)
        reply = self._call(params, run.plan.timeout_s)
        run.called = not (isinstance(reply, Problem) and reply.outcome == "unavailable")
        if not isinstance(reply, Problem):
            run.input_tokens, run.output_tokens = _tokens(reply)
            run.cost_usd = cost_usd(price, run.input_tokens, run.output_tokens)
        self.budget.settle(held, run.cost_usd)
        if isinstance(reply, Problem):
            return reply
        try:
            blocks = [block.model_dump() for block in reply.content]
            verdict = parse(blocks, request.criteria, [name for name, _ in request.signals])
        except Malformed as exc:
            # The log keeps the trace's why, not the check's detail: a score problem leads
            # with its code there too (score_out_of_range: …).
            why = str(exc) if exc.code == "schema" else f"{exc.code}: {exc}"
            return Problem("malformed", why, exc.code)
        self.cache.put(request.key, verdict)
        return verdict

    def _call(self, params: dict[str, Any], timeout_s: float) -> Any:
        """The Messages API call on the judge's loop, or the Problem it raised."""
        try:
            return self.loop.run(
                lambda client: client.messages.create(**params, timeout=timeout_s), timeout_s
            )
        except Busy:
            return Problem("unavailable", "busy")
        except (TimeoutError, anthropic.APITimeoutError):
            return Problem("grader_error", "timeout")
        except anthropic.APIStatusError as exc:
            return Problem("grader_error", f"http_{exc.status_code}")
        except anthropic.APIConnectionError:
            return Problem("grader_error", "connection")
        except Exception as exc:  # anything else the client raised: still no verdict
            return Problem("grader_error", type(exc).__name__)

    # -- what the answer means -----------------------------------------------------------

    def _judged(self, run: Run, answer: Verdict | Problem) -> CheckResult:
        if isinstance(answer, Problem):
            return self._problem(run, answer)
        run.criteria = [{"criterion": c.text, "passed": c.passed} for c in answer.criteria]
        run.signals = scored(run.plan.signals, answer)
        wording = {s.name: s.criterion for s in run.plan.signals}
        run.criteria += [
            {"criterion": wording[s["signal"]], "passed": s["passed"]} for s in run.signals
        ]
        missed = [s for s in run.signals if not s["passed"]]
        if answer.verdict != "failed" and (answer.gaps or missed):
            return self._revision(run, answer, missed)
        passed = answer.verdict != "failed"
        outcome = "satisfied" if passed else "failed"
        reason = _text(run, outcome, explanation=answer.explanation)
        return _finish(run, outcome, passed, reason, None if passed else _text(run, "failed_hint"))

    def _revision(self, run: Run, verdict: Verdict, missed: list[dict[str, Any]]) -> CheckResult:
        run.revision = self.revisions.bump(run.ctx.assertion.session, run.subject)
        if run.revision > run.plan.max_revisions:
            return self._final(run)
        found = [_text(run, "gap", id=c.id, criterion=c.text, gap=c.gap) for c in verdict.gaps]
        said = {s.name: s.gap for s in verdict.scores}
        found += [_signal_gap(run, s, said[s["signal"]]) for s in missed]
        gaps = _text(run, "gap_join").join(found)
        hint = _text(run, "revise", gaps=gaps, revision=run.revision, max=run.plan.max_revisions)
        reason = _text(run, "needs_revision", explanation=verdict.explanation)
        if missed:  # the policy's thresholds decided, whatever the model's overall verdict
            listed = ", ".join(f"{s['signal']} {s['score']:g}" for s in missed)
            reason = _text(run, "missed", signals=listed, explanation=verdict.explanation)
        return _finish(run, "needs_revision", False, reason, hint)

    def _final(self, run: Run) -> CheckResult:
        reason = _text(run, "final", subject=run.subject, max=run.plan.max_revisions)
        return _finish(run, "max_iterations_reached", False, reason, _text(run, "final_hint"))

    def _problem(self, run: Run, problem: Problem) -> CheckResult:
        run.why = problem.why
        if problem.outcome == "malformed":  # fails closed: an answer is never guessed
            reason = _text(run, "malformed", problem=problem.why)
            redo = _text(run, "malformed_hint")
            return _finish(run, "malformed", False, reason, redo, True, malformed=problem.code)
        why = self._why(run, problem.why)
        if run.plan.kind == "destructive":  # never on_error: the review is the safeguard
            return self._no_preflight(run, problem, why)
        passed = run.plan.on_error == "pass"
        reason = _text(run, problem.outcome, why=why)
        hint = None if passed else _text(run, "unavailable_hint")
        return _finish(run, problem.outcome, passed, reason, hint, True)

    def _no_preflight(self, run: Run, problem: Problem, why: str) -> CheckResult:
        """A destructive call the judge could not review is refused, whatever ``on_error``
        and the rule's ``on_fail`` say, with what would let the review happen."""
        reason = _text(run, "preflight_unavailable", why=why)
        fix = problem.why if problem.why in _PREFLIGHT_FIXES else "other"
        hint = _text(run, f"preflight_fix.{fix}", env=self.config.api_key_env)
        result = _finish(run, problem.outcome, False, reason, hint, True)
        return result.model_copy(update={"code": UNAVAILABLE, "on_fail": OnFail.REJECT})

    def _why(self, run: Run, why: str) -> str:
        if why.startswith("http_"):
            return _text(run, "why.http", status=why.removeprefix("http_"))
        known = ("no_api_key", "budget_session", "budget_day", "busy", "timeout", "connection")
        if why not in known:
            return _text(run, "why.error", error=why)
        limits = {
            "budget_session": self.config.budget_session_usd,
            "budget_day": self.config.budget_day_usd,
        }
        return _text(
            run,
            f"why.{why}",
            env=self.config.api_key_env,
            usd=limits.get(why, 0),
            s=run.plan.timeout_s,
        )


def scored(signals: Sequence[Signal], verdict: Verdict) -> list[dict[str, Any]]:
    """Each signal's score against its threshold (the trace's ``signals``), in policy order."""
    scores = {s.name: s for s in verdict.scores}
    return [
        {
            "signal": s.name,
            "score": scores[s.name].score,
            "min": s.min,
            "max": s.max,
            "passed": s.passes(scores[s.name].score),
            "threshold_from": s.source,
        }
        for s in signals
    ]


def bound(signal: dict[str, Any]) -> str:
    """A threshold as people read it: ``≥ 0.7``, ``≤ 0.3``, ``0.2–0.8``."""
    low, high = signal["min"], signal["max"]
    if low is not None and high is not None:
        return f"{low:g}–{high:g}"
    return f"≥ {low:g}" if low is not None else f"≤ {high:g}"


def _signal_gap(run: Run, signal: dict[str, Any], gap: str) -> str:
    values = {"signal": signal["signal"], "score": f"{signal['score']:g}", "bound": bound(signal)}
    if gap:
        return _text(run, "signal_gap", gap=gap, **values)
    return _text(run, "signal_gap_bare", **values)


def _tokens(reply: Any) -> tuple[int, int]:
    usage = getattr(reply, "usage", None)
    return int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)


def _text(run: Run, name: str, /, **values: Any) -> str:
    return messages.text(run.ctx.lang, f"judge.{name}", **values)


def _finish(
    run: Run,
    outcome: str,
    passed: bool,
    reason: str,
    hint: str | None,
    degraded: bool = False,
    malformed: str | None = None,
) -> CheckResult:
    detail = {"outcome": outcome, TRACE: run.trace(outcome)}
    if malformed:
        detail["malformed"] = malformed
    return CheckResult(
        stage=Stage.JUDGE,
        code=run.plan.code,
        passed=passed,
        reason=reason,
        detail=detail,
        on_fail=run.plan.on_fail,
        recommendation=None if passed else hint,
        degraded=degraded,
    )
