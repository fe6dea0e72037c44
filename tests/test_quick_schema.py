"""The quick yes of an argument schema never accepts what jsonschema refuses.

``lingyi.policy._quick`` lets ``tool.args_schema`` skip the full validation of arguments that
plainly fit; these tests hold it to jsonschema (the real validator, Draft 2020-12): on the
schemas of every shipped tool and of the guard's own tools, on hand-made schemas with the
edges of each keyword, and on many random values, quick ⇒ valid. And it does say yes to the
common valid calls, or it would save nothing.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lingyi.policy import load_policies
from lingyi.policy._quick import compile_quick
from lingyi.policy.schema import Registries, arg_problems, input_schema
from lingyi.server.tools import own_tools
from tests.conftest import SHIPPED_POLICIES

STRING = {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^(?:[a-z气功]+)$"}
OBJECT = {
    "type": "object",
    "properties": {
        "q": STRING,
        "n": {"type": "integer", "minimum": 1, "maximum": 20},
        "x": {"type": "number", "maximum": 0.5},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["儒", "道"]}},
        "on": {"type": "boolean", "description": "an annotation"},
        "day": {"type": "string", "format": "date"},
        "free": {"type": "object"},
    },
    "additionalProperties": False,
    "required": ["q"],
}

# (schema, value, jsonschema's answer, the quick check's): both sides of every keyword,
# Chinese and English text; the quick check leaves the odd valid values to jsonschema
CASES: list[tuple[dict[str, Any], Any, bool, bool]] = [
    (STRING, "气功", True, True),
    (STRING, "abcd", True, True),
    (STRING, "a", False, False),  # too short
    (STRING, "abcde", False, False),  # too long
    (STRING, "ab1", False, False),  # pattern
    (STRING, 12, False, False),
    (OBJECT, {"q": "气功"}, True, True),
    (OBJECT, {"q": "qi", "n": 20, "x": -1.5, "tags": ["儒"], "on": False}, True, True),
    (OBJECT, {"q": "qi", "day": "not a date", "free": {"any": [1, None]}}, True, True),
    (OBJECT, {}, False, False),  # required
    (OBJECT, {"q": "qi", "other": 1}, False, False),  # no extras
    (OBJECT, {"q": "qi", "n": 0}, False, False),  # minimum
    (OBJECT, {"q": "qi", "n": True}, False, False),  # a boolean is no integer
    (OBJECT, {"q": "qi", "n": 2.0}, True, False),  # an integral float is one: jsonschema says
    (OBJECT, {"q": "qi", "x": float("nan")}, True, False),
    (OBJECT, {"q": "qi", "tags": ["佛"]}, False, False),  # enum
    (OBJECT, {"q": "qi", "tags": "儒"}, False, False),
    (OBJECT, {"q": "qi", "on": 1}, False, False),
    (OBJECT, {"q": "qi", "free": []}, False, False),
]


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return not list(Draft202012Validator(schema).iter_errors(value))


@pytest.mark.parametrize(("schema", "value", "valid", "quick"), CASES)
def test_quick_agrees_or_defers(
    schema: dict[str, Any], value: Any, valid: bool, quick: bool
) -> None:
    """jsonschema's answer is the table's; the quick check says yes to the plain valid values
    only, and never to an invalid one."""
    check = compile_quick(schema)
    assert check is not None
    assert _valid(schema, value) is valid
    assert check(value) is quick


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "const": "x"},  # a keyword it does not know
        {"type": ["string", "null"]},
        {"anyOf": [{"type": "string"}]},
        {"type": "object", "properties": {"a": {"$ref": "#/x"}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "string", "enum": ["a", 1]},
        {"type": "string", "minLength": 1.5},
    ],
)
def test_what_it_does_not_know_goes_to_jsonschema(schema: dict[str, Any]) -> None:
    """A schema with anything beyond the keywords it knows (an upstream's own) gets no quick
    check: jsonschema validates as before."""
    assert compile_quick(schema) is None


def _schemas() -> list[dict[str, Any]]:
    policies = load_policies(SHIPPED_POLICIES)
    registries = Registries.of(policies, ["qigong_sessions"])
    tools = [t for m in policies.members.values() for t in m.tools.values()]
    tools += list(own_tools(policies).values())
    return [input_schema(tool, registries) for tool in tools]


def _value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(9 if depth < 2 else 6)
    if pick == 0:
        return rng.choice(["", " ", "气功", "qi", "v1.2", "2030-01-01", "lingzhi", "x" * 300])
    if pick == 1:
        return rng.choice([0, 1, -3, 5, 20, 21, 10**20])
    if pick == 2:
        return rng.choice([0.5, 2.0, -1e9, float("inf"), float("nan")])
    if pick == 3:
        return rng.choice([True, False])
    if pick in (4, 5):
        return None
    if pick in (6, 7):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["query", "limit", "x"]): _value(rng, depth + 1) for _ in range(2)}


def test_shipped_tool_schemas_never_say_yes_to_what_jsonschema_refuses() -> None:
    """Every shipped tool's and guard tool's schema has a quick check; on thousands of random
    arguments (right names with random values, and unknown ones) quick ⇒ jsonschema valid."""
    rng = random.Random(19)
    for schema in _schemas():
        quick = compile_quick(schema)
        assert quick is not None, schema
        names = [*schema.get("properties", {}), "unknown"]
        for _ in range(300):
            args = {rng.choice(names): _value(rng) for _ in range(rng.randrange(4))}
            if quick(args):
                assert _valid(schema, args), (schema, args)


def test_arg_problems_unchanged_for_a_valid_and_an_invalid_call() -> None:
    """The problems found are the same with the quick path: none for a valid search, the
    same detailed ones (through jsonschema) for an invalid one."""
    policies = load_policies(SHIPPED_POLICIES)
    owner = policies.tool_owner("search_knowledge")
    assert owner is not None
    tool = owner.tools["search_knowledge"]
    validator = Draft202012Validator(input_schema(tool, Registries.of(policies, [])))
    assert arg_problems(validator, {"query": "气功"}, tool) == []
    bad = arg_problems(validator, {"query": "气功", "limit": "many", "extra": 1}, tool)
    assert {(p.field, p.kind) for p in bad} == {("limit", "type"), ("extra", "unknown")}
