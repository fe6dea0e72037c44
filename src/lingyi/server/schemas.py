"""The output schemas the tools publish: pydantic's, in a form as cheap to validate as it can be.

A client validates every structured result against the tool's ``outputSchema`` (the MCP
client does, with ``jsonschema``), on every call. Pydantic's schema of ``Guarded[SearchHits]``
reaches each model through ``$ref`` and says "string or null" as an ``anyOf`` of two
schemas; resolving a reference and trying alternatives is most of what that validation costs
(527 against 327 µs per search result on the project's machine: BENCHMARKS.md, "Second
round"). The published schema is the same set of instances written without either:

- every ``$ref`` into ``$defs`` is replaced by the definition (our models are not recursive;
  a schema that refers to itself is published as pydantic made it);
- ``anyOf`` of bare types (``{"type": "string"}``, ``{"type": "null"}``) is one ``type`` list;
- ``anyOf`` of an object schema and ``{"type": "null"}`` is that schema with ``"null"`` added to
  its type, when it uses only keywords that constrain objects alone (``properties``,
  ``required``, ``additionalProperties``) besides annotations: a null is never constrained by
  them, so both forms accept exactly the same values.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

_ANNOTATIONS = frozenset({"title", "description", "default"})
_OBJECT_ONLY = frozenset({"type", "properties", "required", "additionalProperties"})
_DEPTH = 32  # deeper than any of our models nests: a reference cycle


class _Cycle(Exception):
    pass


def flat_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (pydantic's, as the SDK derives it) inlined, nullable types as type lists."""
    defs = schema.get("$defs", {})
    try:
        flat = _flat(schema, defs, 0)
    except _Cycle:
        return schema
    return flat if isinstance(flat, dict) else schema


def _flat(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if depth > _DEPTH:
        raise _Cycle
    if isinstance(node, list):
        return [_flat(v, defs, depth + 1) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _flat(v, defs, depth + 1) for k, v in node.items() if k not in ("$defs", "$ref")}
    if isinstance(ref := node.get("$ref"), str) and ref.startswith("#/$defs/"):
        target = _flat(defs[ref.removeprefix("#/$defs/")], defs, depth + 1)
        out = {**target, **out}  # the referring schema's own keywords (its title) win
    elif "$ref" in node:
        out["$ref"] = node["$ref"]
    return _nullable(out)


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf`` of bare types, or of an object schema and null, as one schema (same values)."""
    alts = node.get("anyOf")
    if not isinstance(alts, list) or not alts or not all(isinstance(a, dict) for a in alts):
        return node
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    if any(k not in _ANNOTATIONS for k in rest):
        return node  # other keywords beside the alternatives: leave it as it is
    if all(set(a) == {"type"} and isinstance(a["type"], str) for a in alts):
        return {**rest, "type": [a["type"] for a in alts]}
    if len(alts) != 2 or alts[1] != {"type": "null"} or alts[0].get("type") != "object":
        return node
    obj = alts[0]
    if any(k not in _OBJECT_ONLY and k not in _ANNOTATIONS for k in obj):
        return node
    annotations = {k: v for k, v in obj.items() if k in _ANNOTATIONS}
    constraints = {k: v for k, v in obj.items() if k in _OBJECT_ONLY}
    return {**annotations, **rest, **constraints, "type": ["object", "null"]}


# --- the shipped schemas -----------------------------------------------------------------
# Deriving the 14 output models' schemas is pydantic's JSON-schema generator, ~80 ms of every
# start (BENCHMARKS.md, "Part S3"); the published schemas depend only on the models, pydantic
# and the SDK's generator, so they are generated once (``python tests/test_docs.py``) and
# shipped. tests/test_docs.py fails when the file differs from what the models derive now.

SHIPPED = "output_schemas.json"


def model_key(model: Any) -> str | None:
    """A stable name for an output model (``lingyi.verdict.Guarded[lingyi...SearchHits]``),
    or ``None`` for one that has none (a class defined inside a function)."""
    meta = getattr(model, "__pydantic_generic_metadata__", None)
    if meta and meta.get("origin") is not None:  # Guarded[X]: named by its origin and X
        parts = [model_key(meta["origin"]), *(model_key(a) for a in meta["args"])]
        names = [p for p in parts if p is not None]
        return f"{names[0]}[{', '.join(names[1:])}]" if len(names) == len(parts) else None
    if isinstance(model, type):
        name = f"{model.__module__}.{model.__qualname__}"
        return None if "<locals>" in name else name
    return repr(model)  # dict[str, typing.Any]


def versions() -> dict[str, str]:
    """What the schemas are derived by: a shipped file made by others is not used."""
    from importlib.metadata import PackageNotFoundError, version

    import pydantic

    try:
        sdk = version("mcp")
    except PackageNotFoundError:  # no metadata (a vendored SDK): no file matches, so derive
        sdk = ""
    return {"pydantic": pydantic.VERSION, "mcp": sdk}


def schema_file(schemas: dict[str, dict[str, Any]]) -> str:
    """The text of the shipped file: the versions it was derived by, and each model's schema
    (flat, as published), in the order the models were given."""
    body = {"generated_by": "python tests/test_docs.py", **versions(), "schemas": schemas}
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


@functools.cache
def _shipped() -> dict[str, Any]:
    try:
        text = (resources.files(__package__) / SHIPPED).read_text(encoding="utf-8")
        body = json.loads(text)
    except (OSError, ValueError):  # not shipped (a partial install): every schema is derived
        return {}
    if not isinstance(body, dict) or any(body.get(k) != v for k, v in versions().items()):
        return {}  # another pydantic or SDK may derive other schemas: derive them all
    schemas = body.get("schemas")
    return schemas if isinstance(schemas, dict) else {}


def shipped_schema(model: Any) -> dict[str, Any] | None:
    """The published schema of ``model`` from the shipped file (a fresh copy), or ``None``
    when the file does not have it: an upstream's or a plugin's model is derived."""
    key = model_key(model)
    found = _shipped().get(key) if key is not None else None
    return _copied(found) if isinstance(found, dict) else None


def _copied(node: Any) -> Any:
    """A copy of parsed JSON (each tool owns its schema, as when each was derived).

    Not ``copy.deepcopy``: its memo and type dispatch make it about 2.5× slower here (0.75
    against 2.0 ms for the 15 shipped schemas), on the start path this file exists to shorten.
    """
    if isinstance(node, dict):
        return {k: _copied(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copied(v) for v in node]
    return node
