"""Pydantic's validation errors in our own words: the key, what is wrong, what would be valid.

Users write TOML and JSON, not Python: an error says ``checks[2].on_fail: "maybe" is not
allowed; valid values: reject, fallback, warn`` rather than pydantic's "Input should be …"
with a help link. The valid keys and values are read from the model itself, so a new field or
enum value shows up in the errors without anyone editing this module.
"""

from __future__ import annotations

import difflib
import json
import types
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one key of a document."""

    key: str
    message: str


def key_of(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as the user writes it: ``checks[2].params.fields``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "-"


def problems(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> list[Problem]:
    """Every error of ``exc`` (raised validating ``model``), each naming its key."""
    found = []
    for err in exc.errors(include_url=False):
        key = key_of(tuple(err["loc"]))
        if prefix:
            key = prefix if key == "-" else f"{prefix}.{key}"
        found.append(Problem(key, describe(err, model)))
    return found


_TYPES = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
_BOUNDS = {
    "greater_than": "greater than {gt}",
    "greater_than_equal": "at least {ge}",
    "less_than": "less than {lt}",
    "less_than_equal": "at most {le}",
    "string_too_short": "at least {min_length} character(s) long",
    "string_too_long": "at most {max_length} character(s) long",
    "too_short": "at least {min_length} item(s) long",
    "too_long": "at most {max_length} item(s) long",
}


def describe(err: ErrorDetails, model: type[BaseModel]) -> str:
    """One error as a sentence, with the valid keys or values where the model knows them."""
    kind, loc, ctx = err["type"], tuple(err["loc"]), err.get("ctx") or {}
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return _unknown_key(str(loc[-1]), valid_keys(model, loc[:-1]))
    if kind in ("literal_error", "enum"):
        values = valid_values(model, loc) or [str(ctx.get("expected", ""))]
        return f"{show(err['input'])} is not allowed; valid values: {', '.join(values)}"
    if kind in _TYPES:
        return f"must be {_TYPES[kind]}, not {show(err['input'])}"
    if kind in _BOUNDS:
        return "must be " + _BOUNDS[kind].format(**ctx)
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    return str(err["msg"])


def _unknown_key(key: str, valid: list[str]) -> str:
    if not valid:
        return f"unknown key {key!r}: this table takes no keys"
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; valid keys here: {', '.join(valid)}"


def show(value: Any, limit: int = 60) -> str:
    """A value as it looks in the user's file (JSON/TOML spelling), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def valid_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at ``loc`` accepts (empty when it is not a known model)."""
    found = _model_in(annotation_at(model, loc))
    return list(found.model_fields) if found else []


def valid_values(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The values an enum or literal field at ``loc`` accepts."""
    values: list[str] = []
    for option in _options(annotation_at(model, loc)):
        if get_origin(option) is Literal:
            values += [str(v) for v in get_args(option)]
        elif isinstance(option, type) and issubclass(option, Enum):
            values += [str(m.value) for m in option]
    return values


def annotation_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> Any:
    """The type declared at ``loc`` inside ``model``, or None when the path leaves the model.

    Parts that are not keys (pydantic's union tags such as ``str``) are skipped.
    """
    current: Any = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    return current


def _step(annotation: Any, part: int | str) -> Any:
    for option in _options(annotation):
        found = _model_in(option)
        if found is not None and isinstance(part, str) and part in found.model_fields:
            return found.model_fields[part].annotation
        origin, args = get_origin(option), get_args(option)
        if origin is dict and len(args) == 2 and isinstance(part, str):
            return args[1]
        if origin in (list, tuple, set) and args and isinstance(part, int):
            return args[0]
    return annotation  # a union tag or an unknown part: stay where we are


def _options(annotation: Any) -> list[Any]:
    """The members of a union (``X | None`` → [X]), or the annotation itself."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not type(None)]
    return [annotation]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None
