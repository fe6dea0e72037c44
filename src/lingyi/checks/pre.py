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
        return fail(ctx.msg("empty"), ctx.msg("empty_hint"))
    if len(text) > params.max_length:
        return fail(
            ctx.msg("too_long", length=len(text), limit=params.max_length),
            ctx.msg("too_long_hint"),
        )
    return ok(ctx.msg("ok"))


class ToolRequiredParams(CheckParams):
    pass


@register("pre.action_has_tool", ToolRequiredParams)
def action_has_tool(ctx: CheckContext, params: ToolRequiredParams) -> Outcome:
    """An action names the tool it runs, so the tool stage can check it."""
    if ctx.assertion.type is AssertionType.ACTION and ctx.assertion.tool_call is None:
        tools = ", ".join(sorted(ctx.member.tools)) or "-"
        return fail(ctx.msg("fail"), ctx.msg("hint", tools=tools))
    return ok(ctx.msg("ok"))


class ObfuscationParams(CheckParams):
    fields: list[str] = []  # text arguments of tool calls to inspect too


@register("pre.obfuscation", ObfuscationParams)
def obfuscation(ctx: CheckContext, params: ObfuscationParams) -> Outcome:
    """Invisible characters inside words, or look-alike letters inside Latin words.

    Every check already decides on the canonical text, so this changes no decision by itself;
    a policy runs it with ``on_fail = "warn"`` so that reviewers see who writes this way.
    """
    texts = ctx.canonical_texts(params.fields)
    hidden = sum(t.hidden for t in texts)
    mixed = [w for t in texts for w in t.mixed]
    if not hidden and not mixed:
        return ok(ctx.msg("ok"))
    return fail(
        ctx.msg("fail", hidden=hidden, mixed=", ".join(mixed) or "-"),
        ctx.msg("hint"),
        hidden=hidden,
        mixed=mixed,
        steps=sorted({s for t in texts for s in t.changes}),
    )
