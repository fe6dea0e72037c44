"""tool_validation: the member owns the tool, and the arguments fit the tool's schema.

The schema is the one generated from the policy (``lingyi.policy.schema``), the same one the
MCP server publishes as the tool's ``inputSchema``. Recommendations name the valid values so
a model can correct the call directly; the problems are data in ``detail["problems"]``.
"""

from __future__ import annotations

from dataclasses import asdict
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lingyi import messages
from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.paths import PathOutsideRoots, resolve_inside
from lingyi.policy.closest import closest
from lingyi.policy.schema import ArgProblem, arg_problems, tool_schema

if TYPE_CHECKING:
    from lingyi.policy import ArgSpec, ToolSpec


class NoParams(CheckParams):
    pass


@register("tool.owned", NoParams)
def owned(ctx: CheckContext, params: NoParams) -> Outcome:
    """The member may only run the tools its policy owns."""
    call = ctx.assertion.tool_call
    assert call is not None  # the layer runs tool checks only with a tool call
    if call.name in ctx.member.tools:
        return ok(ctx.msg("ok", member=ctx.member.name, tool=call.name))
    if (unserved := ctx.policies.unserved.get(call.name)) is not None:  # an upstream's tool
        who = ctx.msg(unserved.reason)
        return fail(
            ctx.msg("fail", member=ctx.member.name, tool=call.name, who=who),
            ctx.msg("relist"),
            tool=call.name,
            unserved=unserved.reason,
        )
    owner = ctx.policies.tool_owner(call.name)
    mine = ", ".join(sorted(ctx.member.tools)) or "-"
    who = ctx.msg("owner", owner=owner.id, name=owner.name) if owner else ctx.msg("no_owner")
    hint = ctx.msg("use_yours", tools=mine)
    return fail(
        ctx.msg("fail", member=ctx.member.name, tool=call.name, who=who),
        hint + (ctx.msg("ask_owner", owner=owner.id) if owner else ""),
        tool=call.name,
        owner=owner.id if owner else None,
    )


@register("tool.args_schema", NoParams)
def args_schema(ctx: CheckContext, params: NoParams) -> Outcome:
    """Arguments are known, required ones present, and each value fits the tool's schema."""
    call, tool = ctx.assertion.tool_call, ctx.tool
    if call is None or tool is None:
        return ok(ctx.msg("nothing"))
    _, validator = tool_schema(ctx.policies, ctx.member.id, call.name, ctx.registries)
    problems = arg_problems(validator, call.arguments, tool)
    if not problems:
        return ok(ctx.msg("ok"))
    reason, hint = describe_problems(ctx.lang, problems, tool)
    return fail(
        reason,
        hint,
        fields=[p.field for p in problems],
        problems=[asdict(p) for p in problems],
    )


def describe_problems(
    lang: str, problems: list[ArgProblem], tool: ToolSpec
) -> tuple[str, str | None]:
    """The reason and the hint (the valid values) for argument problems, in ``lang``.

    Also what the server says about the arguments of its own tools (verify_assertion, …).
    """
    hints = [h for p in problems if (h := _hint(lang, p, tool.args.get(p.field)))]
    hints += [_msg(lang, "hint_closest", **_values(p)) for p in problems if p.closest is not None]
    text = "; ".join(_msg(lang, f"problem_{p.kind}", **_values(p)) for p in problems)
    return _msg(lang, "fail", problems=text), "; ".join(dict.fromkeys(hints)) or None


def _msg(lang: str, name: str, /, **values: Any) -> str:
    return messages.text(lang, f"tool.args_schema.{name}", **values)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _values(problem: ArgProblem) -> dict[str, Any]:
    return {
        "field": problem.field,
        "value": _shown(problem.value),
        "allowed": ", ".join(str(v) for v in problem.allowed or []) or "-",
        "pattern": problem.pattern,
        "minimum": "" if problem.minimum is None else problem.minimum,
        "maximum": "" if problem.maximum is None else problem.maximum,
        "expected": problem.expected,
        "closest": _shown(problem.closest),
    }


_HINTED = (
    "unknown",
    "enum",
    "items",
    "range",
    "length",
    "pattern",
    "date",
    "date_past",
    "date_ahead",
)


def _hint(lang: str, problem: ArgProblem, spec: ArgSpec | None) -> str | None:
    """What would be valid: the spec's own format first (a version), else by problem kind."""
    values = _values(problem)
    if spec is not None and spec.type == "version":
        return _msg(lang, "hint_version", **values)
    if problem.kind in _HINTED:
        return _msg(lang, f"hint_{problem.kind}", **values)
    described = spec.description if spec is not None else ""
    return (
        _msg(lang, "hint_described", field=problem.field, description=described or spec.type)
        if spec
        else None
    )


@register("tool.path_allowed", NoParams)
def path_allowed(ctx: CheckContext, params: NoParams) -> Outcome:
    """Path arguments resolve inside the configured roots (.., absolute, symlinks) and exist."""
    call, tool = ctx.assertion.tool_call, ctx.tool
    if call is None or tool is None:
        return ok(ctx.msg("no_paths"))
    problems = [
        (name, value, p)
        for name, spec in tool.args.items()
        if spec.type == "path" and isinstance(value := call.arguments.get(name), str)
        for p in [_path_problem(ctx, spec, value)]
        if p
    ]
    if not problems:
        return ok(ctx.msg("ok"))
    found = [_path_hint(ctx, tool.args[n], n, v) for n, v, _ in problems]
    hint = ctx.msg("hint", roots=_roots(ctx, tool.args))
    hint += "".join(ctx.msg("closest", field=p.field, path=p.closest) for p in found if p.closest)
    return fail("; ".join(p for _, _, p in problems), hint, problems=[asdict(p) for p in found])


MAX_CANDIDATES = 500  # folders looked at for the closest path: a bounded walk of the roots


def _path_hint(ctx: CheckContext, spec: ArgSpec, field: str, value: str) -> ArgProblem:
    """The problem as data, with the existing folder under the roots nearest the one given."""
    roots = ctx.services.repo_roots if spec.roots == "repos" else ctx.services.data_roots
    wanted = value.strip().removeprefix("./").rstrip("/")
    names = _folders(tuple(roots), spec.git_repo)
    return ArgProblem(field, "path", value, allowed=None, closest=closest(wanted, names))


def _folders(roots: tuple[Path, ...], git_repo: bool) -> list[str]:
    """Folders one and two levels under the roots, as paths relative to their root."""
    found: list[str] = []
    for root in roots:
        for depth in ("*", "*/*"):
            for path in sorted(islice(root.glob(depth), MAX_CANDIDATES)):
                if (
                    path.is_dir()
                    and not path.name.startswith(".")
                    and (not git_repo or (path / ".git").exists())
                ):
                    found.append(path.relative_to(root).as_posix())
    return found[:MAX_CANDIDATES]


def _roots(ctx: CheckContext, args: dict[str, ArgSpec]) -> str:
    # In the order of the tool's arguments, not a set's (which follows the hash seed): the
    # hint reads the same in every process.
    kinds = dict.fromkeys(spec.roots for spec in args.values() if spec.type == "path")
    found = [
        r
        for k in kinds
        for r in (ctx.services.repo_roots if k == "repos" else ctx.services.data_roots)
    ]
    return ", ".join(str(r) for r in found) or ctx.msg("no_roots")


def _path_problem(ctx: CheckContext, spec: ArgSpec, value: str) -> str | None:
    roots = ctx.services.repo_roots if spec.roots == "repos" else ctx.services.data_roots
    try:
        real = resolve_inside(value, roots)
    except PathOutsideRoots:
        return ctx.msg("outside", path=value)
    if spec.must_exist and not real.exists():
        return ctx.msg("missing", path=value)
    if spec.git_repo and not (Path(real) / ".git").exists():
        return ctx.msg("not_repo", path=value)
    return None
