"""tool_validation: the member owns the tool, and the arguments fit the tool's schema.

Recommendations name the valid values so a model can correct the call directly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.paths import PathOutsideRoots, resolve_inside

if TYPE_CHECKING:
    from lingyi.policy import ArgSpec

VERSION_RE = re.compile(r"^v\d+\.\d+(\.\d+)?$")


class NoParams(CheckParams):
    pass


@register("tool.owned", NoParams)
def owned(ctx: CheckContext, params: NoParams) -> Outcome:
    """The member may only run the tools its policy owns."""
    call = ctx.assertion.tool_call
    assert call is not None  # the layer runs tool checks only with a tool call
    if call.name in ctx.member.tools:
        return ok(
            ctx.t(f"{ctx.member.name} 拥有工具 {call.name}", f"{ctx.member.id} owns {call.name}")
        )
    owner = ctx.policies.tool_owner(call.name)
    mine = ", ".join(sorted(ctx.member.tools)) or "-"
    who = (
        ctx.t(f"该工具属于 {owner.name}（{owner.id}）", f"it belongs to {owner.id}")
        if owner
        else ctx.t("没有成员拥有该工具", "no member owns a tool of that name")
    )
    return fail(
        ctx.t(
            f"{ctx.member.name} 无权调用 {call.name}：{who}",
            f"{ctx.member.id} may not run {call.name}: {who}",
        ),
        ctx.t(f"只能调用：{mine}", f"use one of your tools: {mine}")
        + (ctx.t(f"；或请 {owner.id} 执行", f"; or ask {owner.id} to run it") if owner else ""),
        tool=call.name,
        owner=owner.id if owner else None,
    )


@register("tool.args_schema", NoParams)
def args_schema(ctx: CheckContext, params: NoParams) -> Outcome:
    """Arguments are known, required ones present, and each value fits its type."""
    call, tool = ctx.assertion.tool_call, ctx.tool
    if call is None or tool is None:
        return ok(ctx.t("无需校验参数", "no arguments to check"))
    problems = [p for p in _unknown(call.arguments, tool.args)]
    for name, spec in tool.args.items():
        problems += _arg_problems(ctx, name, spec, call.arguments.get(name))
    if not problems:
        return ok(ctx.t("参数符合工具定义", "arguments fit the tool's schema"))
    fields = [p[0] for p in problems]
    return fail(
        ctx.t("参数不符合工具定义：", "arguments do not fit the tool's schema: ")
        + "; ".join(f"{n}: {why}" for n, why, _ in problems),
        "; ".join(hint for _, _, hint in problems if hint) or None,
        fields=fields,
    )


Problem = tuple[str, str, str]


def _unknown(args: dict[str, Any], specs: dict[str, ArgSpec]) -> list[Problem]:
    valid = ", ".join(specs) or "-"
    return [(n, "unknown argument", f"valid arguments: {valid}") for n in args if n not in specs]


def _arg_problems(ctx: CheckContext, name: str, spec: ArgSpec, value: Any) -> list[Problem]:
    if value is None or (isinstance(value, str) and not value.strip() and spec.type != "string"):
        return (
            [(name, ctx.t("缺少必填参数", "required"), f"{name}: {spec.description or spec.type}")]
            if spec.required
            else []
        )
    why = _type_problem(ctx, spec, value)
    return [(name, why, _hint(ctx, name, spec))] if why else []


def _type_problem(ctx: CheckContext, spec: ArgSpec, value: Any) -> str | None:
    match spec.type:
        case "string" | "path":
            return _string_problem(ctx, spec, value)
        case "enum":
            return None if value in (spec.values or []) else f"{value!r} is not a valid value"
        case "integer" | "number":
            return _number_problem(spec, value)
        case "boolean":
            return None if isinstance(value, bool) else "must be true or false"
        case "version":
            ok_ = isinstance(value, str) and VERSION_RE.match(value)
            return None if ok_ else f"{value!r} is not a version of the form vX.Y or vX.Y.Z"
        case "data_source":
            return (
                None
                if value in ctx.services.data_sources
                else f"{value!r} is not a registered data source"
            )
        case "list":
            return (
                None
                if isinstance(value, list) and all(isinstance(v, str) for v in value)
                else "must be a list of strings"
            )
    return None


def _string_problem(ctx: CheckContext, spec: ArgSpec, value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    size = len(value.strip())
    if spec.min_length is not None and size < spec.min_length:
        return (
            ctx.t("不能为空", "must not be empty")
            if spec.min_length == 1
            else f"shorter than {spec.min_length}"
        )
    if spec.max_length is not None and size > spec.max_length:
        return f"longer than {spec.max_length} characters"
    if spec.pattern and not re.fullmatch(spec.pattern, value):
        return f"does not match {spec.pattern}"
    return None


def _number_problem(spec: ArgSpec, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be a number"
    if spec.type == "integer" and not isinstance(value, int):
        return "must be an integer"
    if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
        return f"must be between {spec.min} and {spec.max}"
    return None


def _hint(ctx: CheckContext, name: str, spec: ArgSpec) -> str:
    match spec.type:
        case "enum":
            return f"{name} must be one of: {', '.join(spec.values or [])}"
        case "version":
            return f"{name} must look like v0.16 or v0.16.1"
        case "data_source":
            return f"{name} must be one of: {', '.join(ctx.services.data_sources) or '-'}"
    return f"{name}: {spec.description}" if spec.description else ""


@register("tool.path_allowed", NoParams)
def path_allowed(ctx: CheckContext, params: NoParams) -> Outcome:
    """Path arguments resolve inside the configured roots (.., absolute, symlinks) and exist."""
    call, tool = ctx.assertion.tool_call, ctx.tool
    if call is None or tool is None:
        return ok(ctx.t("无路径参数", "no path arguments"))
    problems = [
        p
        for name, spec in tool.args.items()
        if spec.type == "path" and isinstance(call.arguments.get(name), str)
        for p in [_path_problem(ctx, spec, str(call.arguments[name]))]
        if p
    ]
    if not problems:
        return ok(ctx.t("路径都在允许的根目录内", "paths are inside the allowed roots"))
    roots = _roots(ctx, tool.args)
    return fail(
        "; ".join(problems),
        ctx.t(f"请使用这些根目录下的路径：{roots}", f"use a path under: {roots}"),
    )


def _roots(ctx: CheckContext, args: dict[str, ArgSpec]) -> str:
    kinds = {spec.roots for spec in args.values() if spec.type == "path"}
    found = [
        r
        for k in kinds
        for r in (ctx.services.repo_roots if k == "repos" else ctx.services.data_roots)
    ]
    return ", ".join(str(r) for r in found) or ctx.t("（未配置根目录）", "(no roots configured)")


def _path_problem(ctx: CheckContext, spec: ArgSpec, value: str) -> str | None:
    roots = ctx.services.repo_roots if spec.roots == "repos" else ctx.services.data_roots
    try:
        real = resolve_inside(value, roots)
    except PathOutsideRoots:
        return ctx.t(
            f"路径 {value} 不在允许的根目录内", f"path {value} is outside the allowed roots"
        )
    if spec.must_exist and not real.exists():
        return ctx.t(f"路径 {value} 不存在", f"path {value} does not exist")
    if spec.git_repo and not (Path(real) / ".git").exists():
        return ctx.t(f"{value} 不是 git 仓库", f"{value} is not a git repository")
    return None
