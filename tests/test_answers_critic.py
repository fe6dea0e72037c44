"""The critic of an answer: the judge's signals close the source gate, apart from the text.

The judge is a real :class:`lingyi.judge.Judge` talking to the loopback Messages API
(``tests/messages_api.py``); only the model is scripted (none can run here). The shipped
critic rule (``_common.toml``, kind ``answer``, ``on_fail = "warn"``) has one criterion per
signal: confidence, relevance, intent alignment, drift, grounding.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lingyi.policy import PolicySet
from tests import messages_api as api
from tests.judge_kit import rig
from tests.test_answers import FOUND, KB, answer, searched

FOUR = "".join(f"- [{e.title}]({e.url})\n" for e in FOUND[:4])
CATALOG = {"question": "有哪些关于气功的文章", "intent": "catalog"}


@pytest.fixture
def model() -> Iterator[tuple[api.FakeModel, str]]:
    with api.messages_api() as served:
        yield served


@pytest.fixture
def critic(policies: PolicySet, model: tuple[api.FakeModel, str]) -> Iterator[Any]:
    made = rig(policies, model[1])
    yield made
    made.close()


def test_a_low_confidence_closes_the_gate_while_the_text_is_accepted(
    model: tuple[api.FakeModel, str], critic: Any
) -> None:
    """A catalog answer that passes validation but fails the critic's confidence signal: the
    text is approved (the rule is a warning), the sources stay hidden, the gap is listed."""
    state, _ = model
    state.script = lambda req: api.tool_use(req, api.verdict(req, {"c1": "states too firmly"}))
    result = answer(critic.layer, searched(), FOUR, **CATALOG)
    assert result.decision == "approved"
    out = result.outputs
    assert (out["gate"], out["critic"], out["sources"]) == ("critic", "failed", [])
    assert out["gaps"][0]["criteria"][0].startswith("Confidence")
    data = api.data_of(state.requests[0])
    assert data["context"]["question"] == "有哪些关于气功的文章"  # relevance needs it


def test_a_satisfied_critic_opens_the_gate(model: tuple[api.FakeModel, str], critic: Any) -> None:
    """Every signal passed: the gate opens and the four sources are shown."""
    result = answer(critic.layer, searched(), FOUR, **CATALOG)
    assert result.outputs["critic"] == "passed" and result.outputs["gate"] == "open"
    assert len(result.outputs["sources"]) == 4


def test_a_malformed_critic_answer_is_a_review_failure(
    model: tuple[api.FakeModel, str], critic: Any
) -> None:
    """A critic answer that does not fit the schema is never guessed: the gate closes."""
    state, _ = model
    state.script = lambda req: api.text(req, "looks fine to me")
    result = answer(critic.layer, searched(), FOUR, **CATALOG)
    judged = next(c for c in result.checks if c.stage.value == "judge")
    assert judged.detail["outcome"] == "malformed" and not judged.passed
    assert result.outputs["gate"] == "critic" and result.outputs["sources"] == []


def test_the_critic_never_runs_after_a_validation_failure(
    model: tuple[api.FakeModel, str], critic: Any
) -> None:
    """A deterministic failure first: no judge call, the critic is reported not_run."""
    state, _ = model
    result = answer(critic.layer, searched(), f"[x]({KB}/qg-404)")
    assert state.requests == [] and result.outputs["critic"] == "not_run"
    assert result.outputs["gate"] == "validation"
