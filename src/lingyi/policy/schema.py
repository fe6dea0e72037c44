"""One argument schema per tool, generated from its policy.

The same JSON Schema (draft 2020-12) is published as the tool's MCP ``inputSchema`` and used by
``tool.args_schema`` to validate the raw arguments inside the guard, so a model can learn the
valid values from ``tools/list`` and every call, valid or not, reaches the layer and the log.
Values that live outside the policy file (registered data sources, member names) come in
through :class:`Registries`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lingyi.policy._model import ArgSpec, ToolSpec
from lingyi.policy.closest import closest

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

    from lingyi.policy._model import PolicySet

VERSION_PATTERN = r"^v\d+\.\d+(?:\.\d+)?$"
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"


@dataclass(frozen=True)
class Registries:
    """Registered names a schema enumerates: data sources, and every name of every member."""

    data_sources: tuple[str, ...] = ()
    members: tuple[str, ...] = ()

    @classmethod
    def of(cls, policies: PolicySet, data_sources: list[str] | tuple[str, ...]) -> Registries:
        names = (n for m in policies.members.values() for n in m.names)
        return cls(tuple(sorted(data_sources)), tuple(dict.fromkeys(names)))


def _bounded(schema: dict[str, Any], low: str, high: str, spec: ArgSpec) -> dict[str, Any]:
    lo, hi = (spec.min_length, spec.max_length) if low == "minLength" else (spec.min, spec.max)
    if lo is not None:
        schema[low] = int(lo) if float(lo).is_integer() else lo
    if hi is not None:
        schema[high] = int(hi) if float(hi).is_integer() else hi
    return schema


def _string(spec: ArgSpec, _: Registries) -> dict[str, Any]:
    schema = _bounded({"type": "string"}, "minLength", "maxLength", spec)
    if spec.pattern:
        schema["pattern"] = f"^(?:{spec.pattern})$"  # the policy's pattern matches whole values
    return schema


def _number(spec: ArgSpec, _: Registries) -> dict[str, Any]:
    return _bounded({"type": spec.type}, "minimum", "maximum", spec)


def _list(spec: ArgSpec, _: Registries) -> dict[str, Any]:
    items: dict[str, Any] = {"type": "string"}
    if spec.values:
        items["enum"] = list(spec.values)
    return {"type": "array", "items": items}


_BUILDERS: dict[str, Callable[[ArgSpec, Registries], dict[str, Any]]] = {
    "string": _string,
    "path": lambda s, r: {"type": "string", "minLength": 1},
    "enum": lambda s, r: {"type": "string", "enum": list(s.values or [])},
    "integer": _number,
    "number": _number,
    "boolean": lambda s, r: {"type": "boolean"},
    "version": lambda s, r: {"type": "string", "pattern": VERSION_PATTERN},
    "data_source": lambda s, r: {"type": "string", "enum": list(r.data_sources)},
    "member": lambda s, r: {"type": "string", "enum": list(r.members)},
    "list": _list,
    "object": lambda s, r: {"type": "object"},  # free-form (a tool call's own arguments)
    "date": lambda s, r: {"type": "string", "format": "date", "pattern": DATE_PATTERN},
}


def arg_schema(spec: ArgSpec, registries: Registries) -> dict[str, Any]:
    if spec.json_schema is not None:  # an upstream's own argument, as it declares it
        return dict(spec.json_schema)
    schema = _BUILDERS[spec.type](spec, registries)
    if spec.description:
        schema["description"] = spec.description
    return schema


def input_schema(tool: ToolSpec, registries: Registries) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments: types, ranges, patterns, enums, no extras."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: arg_schema(spec, registries) for name, spec in tool.args.items()},
        "additionalProperties": False,
    }
    if required := [name for name, spec in tool.args.items() if spec.required]:
        schema["required"] = required
    return schema


@dataclass(frozen=True)
class ArgProblem:
    """One thing wrong with one argument, with what would be valid (data for the verdict)."""

    field: str
    # required | unknown | type | enum | range | length | pattern | blank | items | date |
    # date_past | date_ahead
    kind: str
    value: Any = None
    allowed: list[Any] | None = None
    pattern: str | None = None
    minimum: float | str | None = None  # a number, or the earliest date (ISO)
    maximum: float | str | None = None
    expected: str | None = None  # the JSON type wanted, for kind == "type"
    closest: Any = None  # the valid value nearest the one given, when one is near


_CACHE: dict[tuple[str, str, str, Registries], tuple[dict[str, Any], Draft202012Validator]] = {}
_CACHE_SIZE = 256


def tool_schema(
    policies: PolicySet, member: str, tool: str, registries: Registries
) -> tuple[dict[str, Any], Draft202012Validator]:
    """The schema of ``member``'s ``tool`` and its compiled validator, built once per policy version."""
    key = (policies.version, member, tool, registries)
    if (found := _CACHE.get(key)) is None:
        from jsonschema import Draft202012Validator  # loaded when a tool call is first checked

        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        schema = input_schema(policies.members[member].tools[tool], registries)
        found = _CACHE[key] = (schema, Draft202012Validator(schema))
    return found


def arg_problems(
    validator: Draft202012Validator,
    args: Mapping[str, Any],
    tool: ToolSpec,
    today: date | None = None,
) -> list[ArgProblem]:
    """Every problem with ``args``, each naming its field, the valid values or format, and
    the closest valid value where one is near. ``today``: for dates (default: today, UTC)."""
    if not isinstance(args, Mapping):
        return [ArgProblem("", "type", args, expected="object")]
    found = [p for error in validator.iter_errors(dict(args)) for p in _problems(error, tool)]
    found += _blank(args, tool)
    found += _dates(args, tool, today or datetime.now(UTC).date())
    order = {name: i for i, name in enumerate(tool.args)}
    unique = {repr(p): p for p in found}.values()  # values may be lists: not hashable
    return sorted(unique, key=lambda p: (order.get(p.field, len(order)), p.field, p.kind))


def _blank(args: Mapping[str, Any], tool: ToolSpec) -> list[ArgProblem]:
    """A required text argument of spaces says nothing: JSON Schema alone would accept it."""
    return [
        ArgProblem(name, "blank", args[name])
        for name, spec in tool.args.items()
        if spec.type in ("string", "path")
        and (spec.required or (spec.min_length or 0) > 0)
        and isinstance(args.get(name), str)
        and args[name]
        and not args[name].strip()
    ]


def _dates(args: Mapping[str, Any], tool: ToolSpec, today: date) -> list[ArgProblem]:
    """Dates JSON Schema cannot judge: a real day, not past, not too far ahead."""
    found = []
    for name, spec in tool.args.items():
        value = args.get(name)
        if spec.type != "date" or not isinstance(value, str) or not re.match(DATE_PATTERN, value):
            continue
        try:
            day = date.fromisoformat(value)
        except ValueError:
            found.append(ArgProblem(name, "date", value, expected="YYYY-MM-DD"))
            continue
        latest = (
            today + timedelta(days=spec.max_days_ahead) if spec.max_days_ahead is not None else None
        )
        if spec.not_past and day < today:
            found.append(
                ArgProblem(
                    name, "date_past", value, minimum=today.isoformat(), closest=today.isoformat()
                )
            )
        elif latest is not None and day > latest:
            found.append(
                ArgProblem(
                    name,
                    "date_ahead",
                    value,
                    maximum=latest.isoformat(),
                    closest=latest.isoformat(),
                )
            )
    return found


_RANGE = ("range", "minimum", "maximum")
_LENGTH = ("length", "minLength", "maxLength")
_BOUNDS = {"minimum": _RANGE, "maximum": _RANGE, "minLength": _LENGTH, "maxLength": _LENGTH}


def _within(value: Any, low: Any, high: Any) -> Any:
    """A number brought into its range; a text cut to its longest length (too short: none)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(
            max(value, low if low is not None else value), high if high is not None else value
        )
    if isinstance(value, str) and high is not None and len(value) > high:
        return value[: int(high)]
    return None


def _problems(error: ValidationError, tool: ToolSpec) -> list[ArgProblem]:
    path = [str(p) for p in error.absolute_path]
    field = path[0] if path else ""
    value: Any = error.instance  # typed loosely by the library: the argument value
    schema = error.schema if isinstance(error.schema, dict) else {}
    given: Any = error.validator_value  # the SDK types it loosely; it is the schema's value
    match error.validator:
        case "required":
            return [ArgProblem(n, "required") for n in given if n not in value]
        case "additionalProperties":
            extra = [n for n in value if n not in tool.args]
            return [ArgProblem(n, "unknown", value[n], allowed=list(tool.args)) for n in extra]
        case "enum":
            kind = "items" if len(path) > 1 else "enum"
            allowed = [str(v) for v in given]
            return [
                ArgProblem(field, kind, value, allowed=allowed, closest=closest(value, allowed))
            ]
        case "minimum" | "maximum" | "minLength" | "maxLength":
            kind, low, high = _BOUNDS[str(error.validator)]
            lo, hi = schema.get(low), schema.get(high)
            nearest = _within(value, lo, hi)
            return [ArgProblem(field, kind, value, minimum=lo, maximum=hi, closest=nearest)]
        case "pattern":
            return [ArgProblem(field, "pattern", value, pattern=str(given))]
    return [
        ArgProblem(field, "type", value, expected=str(schema.get("type", error.validator_value)))
    ]
