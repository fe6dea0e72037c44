"""MCP logging: the client sets a level, and each verification reaches it as a log message.

The server offers the logging capability (``logging/setLevel``), as the MCP Inspector and the
conformance suite's generic scenarios expect of a server. Every tool call's verdict is sent as
a ``notifications/message`` at a level by decision: an approval is ``info``, a fallback
``notice``, a rejection ``warning``, a backend refusal ``error``. A client that set no level
gets ``notice`` and above on handshake-era connections; on 2026-07-28 connections the client
opts in per request and the SDK applies its level.

The protocol deprecates logging as of 2026-07-28 (SEP-2577), but 2025-11-25 clients use it.
The message goes out as a plain notification on the request's own stream, with the SDK's
per-request gate (:func:`mcp.server.connection.allowed_log_levels`) applied first;
``logging/setLevel`` is registered by :class:`lingyi.server.build.GuardServer`.
"""

from __future__ import annotations

from typing import Any, get_args

from mcp.server.connection import allowed_log_levels
from mcp_types import (
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from lingyi.server.app import Caller, Ctx, Request, caller_of
from lingyi.verdict import Reply

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # least to most severe
DEFAULT_LEVEL: LoggingLevel = "notice"
LOGGER = "lingyi.guard"

BY_DECISION: dict[str, LoggingLevel] = {"approved": "info", "fallback": "notice"}


def level_of(reply: Reply) -> LoggingLevel:
    verdict = reply.verdict
    return "error" if verdict.error else BY_DECISION.get(verdict.decision, "warning")


def message_of(tool: str, reply: Reply) -> dict[str, Any]:
    verdict = reply.verdict
    data = {
        "tool": tool,
        "verification_id": verdict.verification_id,
        "member": verdict.member,
        "decision": verdict.decision,
        "codes": verdict.codes,
        "reason": verdict.reason,
    }
    return {k: v for k, v in data.items() if v not in (None, [])}


def wanted(request: Request, caller: Caller, level: LoggingLevel) -> bool:
    """Whether the client asked for messages at ``level``.

    2026-07-28: the request's own ``_meta`` opt-in decides. Earlier: the level this client's
    session set with logging/setLevel, or :data:`DEFAULT_LEVEL`.
    """
    if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return level in allowed_log_levels(request.protocol_version, request.meta)
    chosen = request.lifespan_context.app.log_levels.get(caller.session, DEFAULT_LEVEL)
    return LEVELS.index(level) >= LEVELS.index(chosen)


async def notify(ctx: Ctx, caller: Caller, tool: str, reply: Reply) -> None:
    """Send the verdict of one tool call to the client's log, if it wants that level."""
    request = ctx.request_context
    level = level_of(reply)
    if not wanted(request, caller, level):
        return
    params = LoggingMessageNotificationParams(
        level=level, logger=LOGGER, data=message_of(tool, reply)
    )
    await request.session.send_notification(
        LoggingMessageNotification(params=params), related_request_id=request.request_id
    )


async def set_level(request: Request, params: SetLevelRequestParams) -> EmptyResult:
    """logging/setLevel: remember the level for this client's session."""
    caller = caller_of(request)
    request.lifespan_context.app.log_levels[caller.session] = params.level
    return EmptyResult()
