"""An upstream tool's policy merged with the upstream's own input schema.

The policy's arguments win (a path inside the roots, a pattern, a range); every other argument
the upstream declares is kept as the upstream declares it, so one schema — published in
``tools/list`` and validated by ``tool.args_schema`` — says both. An argument the upstream
requires stays required; one the upstream does not know is still refused as unknown.
"""

from __future__ import annotations

from typing import Any

from mcp_types import Tool

from lingyi.policy import ArgSpec, ToolSpec


def _upstream_arg(schema: dict[str, Any], required: bool) -> ArgSpec:
    kind = "string" if schema.get("type") == "string" else "object"  # informative only
    description = str(schema.get("description") or schema.get("title") or "")
    return ArgSpec(type=kind, required=required, description=description, json_schema=schema)


def merged_spec(policy: ToolSpec, tool: Tool) -> ToolSpec:
    """The policy's spec with the upstream's arguments the policy leaves unconstrained."""
    schema = tool.input_schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    own = {
        name: spec.model_copy(update={"required": spec.required or name in required})
        for name, spec in policy.args.items()
    }
    theirs = {
        name: _upstream_arg(dict(prop), name in required)
        for name, prop in props.items()
        if name not in own and isinstance(prop, dict)
    }
    return policy.model_copy(
        update={
            "args": own | theirs,
            "title": policy.title or tool.title or tool.name,
            "description": policy.description or tool.description or "",
        }
    )


def unknown_policy_args(policy: ToolSpec, tool: Tool) -> list[str]:
    """Arguments a policy constrains that the upstream does not declare (a typo, or drift)."""
    props = (tool.input_schema or {}).get("properties") or {}
    return sorted(set(policy.args) - set(props))
