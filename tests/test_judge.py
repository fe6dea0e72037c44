"""The judge: the real ``anthropic`` client (async) against a Messages API on loopback.

The model itself cannot run here; ``tests/messages_api.py`` answers as the Messages API would,
with tool use, by a script. Every request the tests count reached that server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lingyi.judge._memory import VerdictCache
from lingyi.models import Evidence
from lingyi.policy import PolicySet
from tests import messages_api as api
from tests.judge_kit import FAKE_KEY, SUPPORTED, Rig, closed_port_url, judged, rig, trace


@pytest.fixture
def model() -> Iterator[tuple[api.FakeModel, str]]:
    with api.messages_api() as served:
        yield served


@pytest.fixture
def make(policies: PolicySet, model: tuple[api.FakeModel, str]) -> Iterator[Any]:
    """Build rigs against the loopback model; every judge is closed after the test."""
    made: list[Rig] = []

    def build(url: str | None = None, **settings: Any) -> Rig:
        made.append(rig(policies, url or model[1], **settings))
        return made[-1]

    yield build
    for r in made:
        r.close()


# --------------------------------------------------------------------------- verdicts


def test_satisfied_approves_with_its_cost_on_record(model: Any, make: Any) -> None:
    """Every criterion met: approved; the trace has model, tokens, cost and latency."""
    state, _ = model
    result = make().verify()
    assert result.decision == "approved"
    check, record = judged(result), trace(result)
    assert check.code == "judge.llm" and check.passed and not check.degraded
    assert record["outcome"] == "satisfied" and record["called"] and not record["cached"]
    assert (record["input_tokens"], record["output_tokens"]) == (1200, 150)
    assert record["cost_usd"] == pytest.approx((1200 * 1.0 + 150 * 5.0) / 1e6)
    assert record["model"] == "claude-haiku-4-5" and record["latency_ms"] > 0
    assert [c["passed"] for c in record["criteria"]] == [True, True, True]
    request = state.requests[0]
    assert request["tool_choice"] == {
        "type": "tool",
        "name": "record_verdict",
        "disable_parallel_tool_use": True,
    }
    sent = state.headers[0]
    assert FAKE_KEY in (sent.get("x-api-key") or sent.get("authorization") or "")
    assert sent["x-stainless-async"].startswith("async:")  # AsyncAnthropic, on our loop


SECRETS = [
    # (where the secret is, the assertion's fields)
    ("content", {"content": "The deploy key AKIAQ3EXAMPLE7KEYQ4Z is rotated; " + SUPPORTED}),
    ("attached context", {"content": SUPPORTED, "context": {"api_key": "s3cr3t-v@lue-991"}}),
]  # fmt: skip


@pytest.mark.parametrize(("where", "fields"), SECRETS, ids=[s[0] for s in SECRETS])
def test_secrets_are_redacted_before_they_reach_the_model(
    model: Any, make: Any, where: str, fields: dict[str, Any]
) -> None:
    """The judge is a third party: a key in the content or under a secret's name in what the
    caller attached is replaced by its marker in the request the model receives."""
    state, _ = model
    make().verify(**fields)
    sent = json.dumps(state.requests, ensure_ascii=False)
    assert "AKIAQ3EXAMPLE7KEYQ4Z" not in sent and "s3cr3t-v@lue-991" not in sent
    assert "[REDACTED:" in sent


def test_needs_revision_lists_every_gap(model: Any, make: Any) -> None:
    """needs_revision: rejected, and the recommendation names each failed criterion's gap."""
    state, _ = model
    gaps = {"c1": "no evidence that the minutes were sent", "c3": "states a plan as done"}
    state.script = lambda req: api.tool_use(req, api.verdict(req, gaps))
    result = make().verify()
    check = judged(result)
    assert result.decision == "rejected" and check.detail["outcome"] == "needs_revision"
    hint = result.recommendation or ""
    assert "no evidence that the minutes were sent" in hint and "states a plan as done" in hint
    assert "c1" in hint and "c3" in hint and "c2" not in hint
    assert "revision 1 of 2" in hint
    assert [c["passed"] for c in trace(result)["criteria"]] == [False, True, False]


def test_the_revision_limit_ends_in_a_final_rejection(model: Any, make: Any) -> None:
    """Past max_revisions, needs_revision is final; after that the subject costs no call."""
    state, _ = model
    state.script = lambda req: api.tool_use(req, api.verdict(req, {"c2": "contradicts an-3"}))
    judge = make(max_revisions=1)
    revised = [f"会议纪要（第{i}稿）已发送给所有成员" for i in range(4)]  # each a new question
    outcomes = [judged(judge.verify(text, id="a-7")).detail["outcome"] for text in revised]
    assert outcomes == [
        "needs_revision",
        "max_iterations_reached",
        "max_iterations_reached",
        "max_iterations_reached",
    ]
    assert len(state.requests) == 2  # the third and fourth were settled without a call
    other = judge.verify(id="a-8")  # another subject has its own count
    assert judged(other).detail["outcome"] == "needs_revision"


def test_failed_rubric_never_passes_even_fail_open(model: Any, make: Any) -> None:
    """failed (the rubric cannot be evaluated) rejects, whatever on_error says."""
    state, _ = model
    state.script = lambda req: api.tool_use(req, api.verdict(req, kind="failed"))
    result = make(on_error="pass").verify()
    assert result.decision == "rejected" and judged(result).detail["outcome"] == "failed"


def _payload(req: dict[str, Any], **change: Any) -> dict[str, Any]:
    body = api.verdict(req)
    body.update(change)
    return body


def _items(req: dict[str, Any], edit: Any) -> dict[str, Any]:
    body = api.verdict(req)
    body["criteria"] = edit(body["criteria"])
    return body


def _fenced(req: dict[str, Any]) -> str:
    import json

    return "Here is my verdict:\n```json\n" + json.dumps(api.verdict(req)) + "\n```"


ANSWERS = [
    # (case, reply, outcome)
    ("tool input", lambda r: api.tool_use(r, api.verdict(r)), "satisfied"),
    ("plain JSON text", lambda r: api.text(r, __import__("json").dumps(api.verdict(r))), "satisfied"),
    ("fenced block", lambda r: api.text(r, _fenced(r)), "satisfied"),
    ("prose only", lambda r: api.text(r, "Looks supported to me."), "malformed"),
    ("broken fence", lambda r: api.text(r, "```json\n{nope\n```"), "malformed"),
    ("no verdict field", lambda r: api.tool_use(r, {k: v for k, v in api.verdict(r).items() if k != "verdict"}), "malformed"),
    ("no explanation", lambda r: api.tool_use(r, {k: v for k, v in api.verdict(r).items() if k != "explanation"}), "malformed"),
    ("extra field", lambda r: api.tool_use(r, _payload(r, approved=True)), "malformed"),
    ("unknown verdict", lambda r: api.tool_use(r, _payload(r, verdict="supported")), "malformed"),
    ("invented criterion", lambda r: api.tool_use(r, _items(r, lambda c: [*c, {"criterion": "c9", "passed": True, "gap": ""}])), "malformed"),
    ("dropped criterion", lambda r: api.tool_use(r, _items(r, lambda c: c[:-1])), "malformed"),
    ("criterion twice", lambda r: api.tool_use(r, _items(r, lambda c: [*c[:-1], c[0]])), "malformed"),
    ("item without gap", lambda r: api.tool_use(r, _items(r, lambda c: [{"criterion": i["criterion"], "passed": True} for i in c])), "malformed"),
    ("passed as a string", lambda r: api.tool_use(r, _items(r, lambda c: [{**i, "passed": "true"} for i in c])), "malformed"),
    ("satisfied but a criterion failed", lambda r: api.tool_use(r, _items(r, lambda c: [{**c[0], "passed": False, "gap": "x"}, *c[1:]])), "malformed"),
    ("needs_revision but all passed", lambda r: api.tool_use(r, _payload(r, verdict="needs_revision")), "malformed"),
    ("two verdicts", lambda r: api.message(r, [{"type": "tool_use", "id": f"t{i}", "name": "record_verdict", "input": api.verdict(r)} for i in (1, 2)], (10, 10)), "malformed"),
    ("another tool", lambda r: api.message(r, [{"type": "tool_use", "id": "t", "name": "approve", "input": {}}], (10, 10)), "malformed"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "reply", "outcome"), ANSWERS, ids=[a[0] for a in ANSWERS])
def test_answers_are_read_defensively(
    model: Any, make: Any, case: str, reply: Any, outcome: str
) -> None:
    """Tool input, then plain JSON, then a fenced block; anything off-schema fails closed
    (rejected, degraded), even with on_error = pass: a missing field is never guessed."""
    state, _ = model
    state.script = reply
    result = make(on_error="pass").verify()
    check = judged(result)
    assert check.detail["outcome"] == outcome, case
    assert result.decision == ("approved" if outcome == "satisfied" else "rejected")
    assert check.degraded is (outcome == "malformed")


# --------------------------------------------------------------------------- outages


OUTAGES = [
    # (reply, on_error, why, decision)
    (api.error(429, "rate_limit_error", **{"retry-after": "30"}), "pass", "http_429", "approved"),
    (api.error(429, "rate_limit_error"), "fail", "http_429", "rejected"),
    (api.error(500, "api_error"), "pass", "http_500", "approved"),
    (api.error(500, "api_error"), "fail", "http_500", "rejected"),
    (api.error(529, "overloaded_error"), "fail", "http_529", "rejected"),
    (api.Reply(b"<html>bad gateway</html>", status=502), "pass", "http_502", "approved"),
]


@pytest.mark.parametrize(("reply", "on_error", "why", "decision"), OUTAGES)
def test_http_errors_follow_on_error(
    model: Any, make: Any, reply: api.Reply, on_error: str, why: str, decision: str
) -> None:
    """429 and 5xx: grader_error, degraded, on_error decides; one request (no retries)."""
    state, _ = model
    state.script = lambda req: reply
    result = make(on_error=on_error).verify()
    check, record = judged(result), trace(result)
    assert result.decision == decision and check.degraded
    assert (record["outcome"], record["why"]) == ("grader_error", why)
    assert len(state.requests) == 1 and record["cost_usd"] == 0


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Held closed by a test while the loopback model must not answer; opened at the end."""
    event = threading.Event()
    yield event
    event.set()


def held(gate: threading.Event) -> Any:
    """A script that answers only once ``gate`` opens (at most 10 s)."""

    def answer(req: dict[str, Any]) -> api.Reply:
        gate.wait(10)
        return api.tool_use(req, api.verdict(req))

    return answer


def wait_until(condition: Any, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.01)


@pytest.mark.parametrize(("on_error", "decision"), [("pass", "approved"), ("fail", "rejected")])
def test_a_timeout_is_a_grader_error(
    model: Any, make: Any, gate: threading.Event, on_error: str, decision: str
) -> None:
    """A model that does not answer within timeout_s: grader_error (timeout), on_error."""
    state, _ = model
    state.script = held(gate)
    result = make(timeout_s=0.3, on_error=on_error).verify()
    assert not gate.is_set()  # it returned while the model was still silent
    assert result.decision == decision
    assert (trace(result)["outcome"], trace(result)["why"]) == ("grader_error", "timeout")


@pytest.mark.parametrize(("on_error", "decision"), [("pass", "approved"), ("fail", "rejected")])
def test_without_an_api_key_the_judge_is_unavailable(
    model: Any, make: Any, on_error: str, decision: str
) -> None:
    """No key: unavailable (no_api_key), no request sent, on_error applies, degraded."""
    state, _ = model
    result = make(key="", on_error=on_error).verify()
    assert result.decision == decision and judged(result).degraded
    assert (trace(result)["outcome"], trace(result)["why"]) == ("unavailable", "no_api_key")
    assert state.requests == [] and "LINGYI_TEST_JUDGE_KEY" in judged(result).reason


def test_an_unreachable_endpoint_is_a_connection_error(make: Any) -> None:
    """Nothing listening: grader_error (connection), on_error applies."""
    result = make(closed_port_url(), on_error="fail").verify()
    assert result.decision == "rejected"
    assert (trace(result)["outcome"], trace(result)["why"]) == ("grader_error", "connection")


# --------------------------------------------------------------------------- cost


def test_verdicts_are_cached_by_their_question(model: Any, make: Any) -> None:
    """The same question twice: one request; the second is cached and costs nothing. New
    evidence in the session is a new question."""
    state, _ = model
    judge = make()
    first, second = judge.verify(), judge.verify()
    assert len(state.requests) == 1
    assert trace(second)["cached"] and not trace(second)["called"]
    assert trace(second)["cost_usd"] == 0 and trace(first)["cost_usd"] > 0
    judge.ledger.record("default", "lingzhi", "search_knowledge", {}, [Evidence(id="kb:x-1")])
    judge.verify()
    assert len(state.requests) == 2


def test_cached_verdicts_expire(model: Any, make: Any) -> None:
    """After cache_ttl_s the question is asked again."""
    state, _ = model
    now = [0.0]
    judge = make()
    judge.judge.cache = VerdictCache(60.0, 100, clock=lambda: now[0])
    judge.verify()
    now[0] = 59.0
    judge.verify()
    now[0] = 61.0
    judge.verify()
    assert len(state.requests) == 2


def test_the_session_budget_stops_the_judge(model: Any, make: Any) -> None:
    """Once a call could take the session past its budget, the judge is unavailable for it
    (on_error applies, no request); what was spent stays within the budget."""
    state, _ = model
    state.script = lambda req: api.tool_use(req, api.verdict(req), usage=(3000, 300))
    judge = make(budget_session_usd=0.03, cache_ttl_s=0, on_error="fail")
    spent, outcomes = 0.0, []
    for i in range(20):
        record = trace(judge.verify(f"第{i}份会议纪要已发送给所有成员", session="s"))
        spent += record["cost_usd"]
        outcomes.append(record["outcome"])
        if record["outcome"] == "unavailable":
            assert record["why"] == "budget_session"
            break
    assert outcomes[0] == "satisfied" and outcomes[-1] == "unavailable"
    assert spent <= 0.03 and len(state.requests) == len(outcomes) - 1
    other = trace(judge.verify("另一份会议纪要已发送", session="t"))
    assert other["outcome"] == "satisfied"  # another session has its own budget


def test_the_day_budget_stops_every_session_until_the_next_day(model: Any, make: Any) -> None:
    """The day budget is shared by sessions and starts again the next UTC day."""
    state, _ = model
    state.script = lambda req: api.tool_use(req, api.verdict(req), usage=(3000, 300))
    judge = make(budget_day_usd=0.02, cache_ttl_s=0)
    day = ["2026-12-01"]
    judge.judge.budget._day = lambda: day[0]
    outcomes = [trace(judge.verify(f"纪要{i}已发送", session=f"s{i}"))["outcome"] for i in range(8)]
    assert "satisfied" in outcomes and outcomes[-1] == "unavailable"
    assert trace(judge.verify("纪要已发送", session="z"))["why"] == "budget_day"
    day[0] = "2026-12-02"
    assert trace(judge.verify("纪要已发送", session="z"))["outcome"] == "satisfied"


def test_an_unknown_model_is_priced_as_the_dearest(model: Any, make: Any) -> None:
    """A model missing from the price table: the estimate is never low, and says so."""
    record = trace(make(model="claude-unknown-9").verify())
    assert record["price_assumed"] and record["cost_usd"] == pytest.approx(
        (1200 * 15.0 + 150 * 75.0) / 1e6
    )


# --------------------------------------------------------------------------- concurrency


def test_judge_calls_in_flight_are_bounded_and_overflow_is_busy(
    model: Any, make: Any, gate: threading.Event
) -> None:
    """At most max_in_flight calls reach the model and max_waiting more wait; the rest are
    busy at once (on_error, nothing sent), so waiting cannot tie up every worker."""
    state, _ = model
    state.script = held(gate)
    judge = make(max_in_flight=2, max_waiting=1, cache_ttl_s=0)
    results: list[Any] = []

    def one(i: int) -> None:
        results.append(trace(judge.verify(f"纪要{i}已发送给所有成员")))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    wait_until(lambda: len(results) == 3 and state.in_flight == 2)
    busy = list(results)  # returned while the model was still silent
    gate.set()
    for t in threads:
        t.join()
    assert all(
        (r["outcome"], r["why"], r["called"]) == ("unavailable", "busy", False) for r in busy
    )
    assert state.most_in_flight == 2 and len(state.requests) == 3
    assert sum(r["outcome"] == "satisfied" for r in results) == 3


def test_other_verifications_are_not_held_up_by_a_slow_judge(
    model: Any, make: Any, gate: threading.Event
) -> None:
    """While a judge call hangs, a verification the rules decide returns."""
    state, _ = model
    state.script = held(gate)
    judge = make(max_in_flight=1, max_waiting=0, cache_ttl_s=0)
    slow = threading.Thread(target=judge.verify)
    slow.start()
    wait_until(lambda: state.in_flight == 1)
    rejected = judge.verify("灵通说v0.17已经发布了", type="communication")
    busy = trace(judge.verify("另一份纪要已发送"))
    assert rejected.decision == "rejected" and not gate.is_set()
    assert busy["why"] == "busy"  # and one that needs the judge does not queue behind it
    gate.set()
    slow.join()


# --------------------------------------------------------------------------- gating


NEVER = [
    # a deterministic failure: the judge is never asked (count the requests)
    {"type": "communication", "content": "灵通说v0.17已经发布了"},  # fabricated relay
    {"type": "fact", "content": "失眠吃什么药比较好"},  # medical boundary
    {"type": "fact", "content": "基于趋势，B方案下周一定会超过0.9"},  # fallback: relabel
    {"type": "fact", "content": "见 kb:qg-404 的结论", "evidence_ids": ["kb:qg-404"]},
    {"member": "nobody", "type": "fact", "content": "hello"},  # unknown member
]


@pytest.mark.parametrize("fields", NEVER)
def test_the_judge_is_never_called_after_a_deterministic_failure(
    model: Any, make: Any, fields: dict[str, Any]
) -> None:
    """Rejections and fallbacks of the rules spend no judge call."""
    state, _ = model
    fields = dict(fields)
    result = make().verify(fields.pop("content"), **fields)
    assert result.decision in ("rejected", "fallback") and state.requests == []
    assert not any(c.stage.value == "judge" for c in result.checks)


def test_a_bare_tool_call_with_no_rule_is_not_judged(model: Any, make: Any) -> None:
    """Nothing to judge (no content, no rule for the tool): no judge check, no request."""
    state, _ = model
    call = {"name": "search_knowledge", "arguments": {"query": "气功"}}
    result = make().verify("", member="lingzhi", type="action", tool_call=call)
    assert result.decision == "approved" and state.requests == []
    assert not any(c.stage.value == "judge" for c in result.checks)


def test_members_outside_the_config_list_are_not_judged(model: Any, make: Any) -> None:
    """[judge] members = [...] limits where the judge runs at all."""
    state, _ = model
    result = make(members=["lingzhi"]).verify()
    assert result.decision == "approved" and state.requests == []


# --------------------------------------------------------------------------- scored signals

MIXED = """[[judge]]
rubric = "Every claim is supported by the session's evidence"
[judge.signals.certainty]
criterion = "How certain the statement is, given the evidence: 1 = fully, 0 = not at all"
min = 0.6
"""
MIXES = [
    # (the criterion passed, the certainty score, outcome)
    (True, 0.8, "satisfied"),
    (True, 0.5, "needs_revision"),  # the threshold fails it
    (False, 0.9, "needs_revision"),  # the pass/fail criterion fails it
]


@pytest.mark.parametrize(("criterion", "score", "outcome"), MIXES)
def test_a_rule_mixes_pass_fail_criteria_and_scored_signals(
    tmp_path: Path, model: Any, criterion: bool, score: float, outcome: str
) -> None:
    """A rule may hold both: the schema asks for the criterion's boolean and the signal's
    number, and the verdict needs both to pass."""
    from lingyi.policy import load_policies
    from tests.conftest import SHIPPED_POLICIES
    from tests.judge_kit import policy_folder

    state, url = model
    failing = {} if criterion else {"c1": "no evidence for the claim"}
    kind = "needs_revision" if failing else "satisfied"
    state.script = lambda req: api.tool_use(
        req, api.verdict(req, failing, kind, scores={"certainty": score})
    )
    folder = policy_folder(tmp_path, SHIPPED_POLICIES, {"lingyi.toml": MIXED})
    made = rig(load_policies(folder), url)
    try:
        result = made.verify()
    finally:
        made.close()
    assert judged(result).detail["outcome"] == outcome
    assert [s["score"] for s in trace(result)["signals"]] == [score]
    assert [c["passed"] for c in trace(result)["criteria"]] == [criterion, score >= 0.6]
    properties = state.requests[0]["tools"][0]["input_schema"]["properties"]
    assert list(properties) == ["criteria", "scores", "verdict", "explanation"]
