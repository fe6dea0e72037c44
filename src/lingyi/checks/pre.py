"""pre_check: cheap sanity checks on the assertion itself."""

from __future__ import annotations

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.models import AssertionType


class ContentParams(CheckParams):
    max_length: int = 4000


@register("pre.content", ContentParams)
def content(ctx: CheckContext, params: ContentParams) -> Outcome:
    """The content is present (unless a tool call says what is done) and not too long."""
    text = ctx.assertion.content.strip()
    if not text and ctx.assertion.type is not AssertionType.ACTION:
        return fail(
            ctx.t("断言内容为空", "the assertion has no content"),
            ctx.t("请写出要核验的具体内容", "state the assertion to verify in `content`"),
        )
    if len(text) > params.max_length:
        return fail(
            ctx.t(
                f"内容过长（{len(text)} 字符，上限 {params.max_length}）",
                f"content too long ({len(text)} characters, limit {params.max_length})",
            ),
            ctx.t("请拆成几条较短的断言", "split it into shorter assertions"),
        )
    return ok(ctx.t("内容有效", "content present"))


class ToolRequiredParams(CheckParams):
    pass


@register("pre.action_has_tool", ToolRequiredParams)
def action_has_tool(ctx: CheckContext, params: ToolRequiredParams) -> Outcome:
    """An action names the tool it runs, so the tool stage can check it."""
    if ctx.assertion.type is AssertionType.ACTION and ctx.assertion.tool_call is None:
        tools = ", ".join(sorted(ctx.member.tools)) or "-"
        return fail(
            ctx.t("行动断言没有给出工具调用", "an action assertion must carry its tool_call"),
            ctx.t(f"请在 tool_call 中给出工具，可用：{tools}", f"set tool_call to one of: {tools}"),
        )
    return ok(ctx.t("工具调用已给出", "tool call present"))
