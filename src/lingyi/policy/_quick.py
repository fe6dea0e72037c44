"""A quick yes for the common case: arguments that plainly fit a tool's argument schema.

``tool.args_schema`` validates every call's arguments with jsonschema, which costs most of
that check (about 80 µs for one short argument), and nearly every call is valid.
:func:`compile_quick` turns a schema made of the keywords the policies' schemas use (types,
lengths, ranges, patterns, enums, items, properties, no extras, required) into a plain
function that answers True only when a value certainly validates. Anything it does not know
(a keyword of an upstream's own schema, a value of a type it does not handle) makes it give
no function, or False: then jsonschema decides, as before. So the quick path only skips the
full validation of a valid value; it never accepts what jsonschema would refuse
(tests/test_quick_schema.py compares the two on generated schemas and values).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Quick = Callable[[Any], bool]

# Keywords that assert nothing in Draft202012Validator as the layer builds it (no format
# checker: "format" is an annotation there).
_ANNOTATIONS = frozenset({"description", "title", "format"})
_KEYWORDS = {
    "string": frozenset({"minLength", "maxLength", "pattern", "enum"}),
    "integer": frozenset({"minimum", "maximum"}),
    "number": frozenset({"minimum", "maximum"}),
    "boolean": frozenset(),
    "array": frozenset({"items"}),
    "object": frozenset({"properties", "additionalProperties", "required"}),
}


def compile_quick(schema: Any) -> Quick | None:
    """A function true only for values that validate against ``schema``; None when the
    schema uses anything this module does not know."""
    if not isinstance(schema, dict) or not isinstance(kind := schema.get("type"), str):
        return None
    known = _KEYWORDS.get(kind)
    if known is None or set(schema) - known - _ANNOTATIONS - {"type"}:
        return None
    try:
        return _BUILD[kind](schema)
    except (TypeError, ValueError, re.error):  # a keyword of an unexpected form
        return None


def _count(schema: dict[str, Any], key: str) -> int | None:
    value = schema.get(key)
    if value is not None and type(value) is not int:
        raise TypeError(key)
    return value


def _string(schema: dict[str, Any]) -> Quick | None:
    lo, hi = _count(schema, "minLength"), _count(schema, "maxLength")
    rx = re.compile(schema["pattern"]) if "pattern" in schema else None
    values = schema.get("enum")
    if values is not None and not all(type(v) is str for v in values):
        return None
    allowed = frozenset(values) if values is not None else None

    def check(value: Any) -> bool:
        return (
            type(value) is str
            and (lo is None or len(value) >= lo)
            and (hi is None or len(value) <= hi)
            and (rx is None or rx.search(value) is not None)
            and (allowed is None or value in allowed)
        )

    return check


def _bound(schema: dict[str, Any], key: str) -> float | None:
    value = schema.get(key)
    if value is not None and type(value) not in (int, float):
        raise TypeError(key)
    return value


def _number(schema: dict[str, Any]) -> Quick | None:
    lo, hi = _bound(schema, "minimum"), _bound(schema, "maximum")
    types = (int,) if schema["type"] == "integer" else (int, float)

    def check(value: Any) -> bool:
        return (
            type(value) in types
            and value == value  # NaN: let jsonschema say
            and (lo is None or value >= lo)
            and (hi is None or value <= hi)
        )

    return check


def _boolean(_schema: dict[str, Any]) -> Quick | None:
    return lambda value: type(value) is bool


def _array(schema: dict[str, Any]) -> Quick | None:
    item = compile_quick(schema["items"]) if "items" in schema else (lambda _v: True)
    if item is None:
        return None
    return lambda value: type(value) is list and all(item(v) for v in value)


def _object(schema: dict[str, Any]) -> Quick | None:
    extra = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    if extra not in (True, False) or not all(type(r) is str for r in required):
        return None
    props = {name: compile_quick(sub) for name, sub in schema.get("properties", {}).items()}
    if any(check is None for check in props.values()):
        return None
    checks: dict[str, Quick] = {k: v for k, v in props.items() if v is not None}

    def check(value: Any) -> bool:
        if type(value) is not dict or not all(name in value for name in required):
            return False
        for name, given in value.items():
            sub = checks.get(name)
            if sub is None:
                if extra is False or type(name) is not str:
                    return False
            elif not sub(given):
                return False
        return True

    return check


_BUILD: dict[str, Callable[[dict[str, Any]], Quick | None]] = {
    "string": _string,
    "integer": _number,
    "number": _number,
    "boolean": _boolean,
    "array": _array,
    "object": _object,
}
