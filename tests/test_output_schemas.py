"""The output schemas the server publishes are pydantic's, flattened: no ``$ref``, nullable
types as type lists, and exactly the same values accepted and refused."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata

from lingyi.backends.kb import KBHit
from lingyi.models import Fallback, ToolCall
from lingyi.server.executors import IMPLEMENTATIONS
from lingyi.server.schemas import flat_schema
from lingyi.server.tools import _OWN
from lingyi.verdict import CheckBrief, Guarded, SearchHits, Verdict

MODELS = [impl.output for impl in IMPLEMENTATIONS.values()] + [out for _, out in _OWN.values()]


def _derived(model: Any) -> dict[str, Any]:
    return FuncMetadata(arg_model=ArgModelBase, output_model=model).output_schema or {}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        yield from ([node["$ref"]] if "$ref" in node else [])
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@pytest.mark.parametrize("model", MODELS, ids=str)
def test_published_schemas_hold_no_reference(model: Any) -> None:
    """Every tool's published schema is self-contained: no $ref, no $defs left."""
    flat = flat_schema(_derived(model))
    assert not list(_refs(flat)) and "$defs" not in flat
    Draft202012Validator.check_schema(flat)


def _results() -> list[dict[str, Any]]:
    """Real shapes: an approval with hits (Chinese), a rejection with checks and argument
    problems (English), a fallback offering a restricted call, and no result at all."""
    hits = SearchHits(
        hits=[
            KBHit(
                id="kb:qg-007",
                title="气功与呼吸",
                domain="气",
                tags=["气功"],
                snippet="调息",
                score=4.6,
                url="https://kb.lingyi.local/qg-007",
            )
        ]
    )
    brief = CheckBrief(stage="boundary", code="domain.scope", passed=False, reason="out of scope")
    call = ToolCall(name="search_knowledge", arguments={"query": "x", "domains": ["气"]})
    verdicts = [
        Verdict(
            verification_id="01J",
            member="lingzhi",
            decision="approved",
            codes=[],
            reason="全部 14 项检查通过",
            executed="original",
        ),
        Verdict(
            verification_id=None,
            member="lingzhi",
            decision="rejected",
            codes=["tool.args_schema"],
            reason="bad",
            recommendation="fix",
            checks=[brief],
            argument_problems=[{"field": "limit", "kind": "range"}],
        ),
        Verdict(
            verification_id="01K",
            member="lingzhi",
            decision="fallback",
            codes=["domain.scope"],
            reason="r",
            fallback=Fallback(kind="restrict_domains", tool_call=call),
            outputs={"route": "revise"},
        ),
    ]
    out = [Guarded(verdict=v, result=hits).model_dump(mode="json") for v in verdicts]
    return [*out, Guarded[SearchHits](verdict=verdicts[1]).model_dump(mode="json")]


BAD_VALUES = [None, 1, 2.5, "x", True, [], ["x"], {}, {"kind": "x"}]


def _mutations(value: Any) -> Iterator[Any]:
    """``value`` with each field, item and key in turn replaced by each bad value, or
    removed, or given an extra key."""
    yield value
    if isinstance(value, dict):
        for key in value:
            for bad in BAD_VALUES:
                yield {**value, key: bad}
            yield {k: v for k, v in value.items() if k != key}
            for changed in _mutations(value[key]):
                yield {**value, key: changed}
        yield {**value, "unexpected": 1}
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for changed in _mutations(item):
                yield [*value[:i], changed, *value[i + 1 :]]


def test_flat_and_derived_schemas_accept_and_refuse_the_same_values() -> None:
    """For thousands of results (real shapes and every one-field mutation of them, nulls,
    wrong types, missing and extra keys), the flat schema and pydantic's give the same
    verdict, and both accept the real results."""
    model = Guarded[SearchHits]
    derived = Draft202012Validator(_derived(model))
    flat = Draft202012Validator(flat_schema(_derived(model)))
    cases = [copy.deepcopy(m) for r in _results() for m in _mutations(r)]
    assert len(cases) > 1000
    assert all(derived.is_valid(r) for r in _results())
    disagree = [c for c in cases if derived.is_valid(c) != flat.is_valid(c)]
    assert disagree == []
    assert any(not derived.is_valid(c) for c in cases)  # the mutations do refuse some


def test_a_schema_that_refers_to_itself_is_published_as_it_was() -> None:
    """A reference cycle (no model of ours has one) is not inlined forever: kept as given."""
    cyclic = {
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node",
    }
    assert flat_schema(cyclic) == cyclic
