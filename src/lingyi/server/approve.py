"""``approve_call``: an approver's token decides a waiting call over MCP.

Refused for a caller without a token or whose token is not in ``[approvals] approvers``, and
for a request the approver's own token made or whose member that token may speak for (an
approver must not approve itself). The decision is an ``approval`` record like one made with
``lingyi approve``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from lingyi import messages
from lingyi.approvals._book import ApprovalError
from lingyi.approvals._state import Approval
from lingyi.errors import LingyiError
from lingyi.models import Principal
from lingyi.server.app import Ctx, GuardApp, caller_of
from lingyi.verdict import ApprovalBrief

if TYPE_CHECKING:
    from lingyi.server.tools import ToolFn, ToolTable


class ApprovalAnswer(BaseModel):
    """What approve_call did: the approval's new status, or why nothing was decided."""

    ok: bool
    code: str | None = None
    reason: str
    approval: ApprovalBrief | None = None


def approve_tool(table: ToolTable) -> ToolFn:
    async def call(ctx: Ctx, arguments: dict[str, Any]) -> CallToolResult:
        app = table.app
        _, problems = table.problems("approve_call", arguments)
        if problems:
            reason = "; ".join(f"{p.field}: {p.kind}" for p in problems)
            return _result(ApprovalAnswer(ok=False, code="tool.args_schema", reason=reason))
        principal = caller_of(ctx.request_context).principal
        try:
            answer = await app.in_thread(decide, app, principal, arguments)
        except LingyiError as exc:  # the log cannot be read or written: nothing was decided
            answer = ApprovalAnswer(ok=False, code="log.unwritable", reason=str(exc))
        return _result(answer)

    return call


def decide(app: GuardApp, principal: Principal | None, args: dict[str, Any]) -> ApprovalAnswer:
    """Approve or refuse ``args["id"]`` as ``principal``, if it is an approver."""
    lang = app.config.language
    approvers = app.config.raw.approvals.approvers
    if principal is None or principal.name not in approvers:
        token = principal.name if principal else "(no token)"
        reason = messages.text(lang, "approval.not_approver.fail", token=token)
        return ApprovalAnswer(ok=False, code="approval.not_approver", reason=reason)

    def not_own(approval: Approval) -> None:
        if _own(app, principal, approval):
            text = messages.text(
                lang, "approval.own_request.fail", token=principal.name, id=approval.id
            )
            raise ApprovalError("approval.own_request", text)

    refuse = bool(args.get("refuse"))
    try:
        record = app.approvals.book.decide(
            str(args["id"]),
            f"token:{principal.name}",
            refuse=refuse,
            reason=args.get("reason"),
            guard=not_own,
        )
    except ApprovalError as exc:
        return ApprovalAnswer(ok=False, code=exc.code, reason=str(exc))
    return ApprovalAnswer(
        ok=True, reason=f"{record['event']} {record['approval_id']}", approval=brief(record)
    )


def _own(app: GuardApp, principal: Principal, approval: Approval) -> bool:
    """The approver's token made the request, or is bound to (may speak for) its member."""
    if approval.binding.principal == principal.name:
        return True
    bound = {m.id for n in principal.members if (m := app.policies.resolve(n))}
    return approval.binding.member in bound


def brief(record: dict[str, Any]) -> ApprovalBrief:
    status = {"requested": "pending"}.get(record["event"], record["event"])
    return ApprovalBrief(
        id=record["approval_id"],
        status=status,
        tool=record["tool"],
        expires=record["expires"],
        why=record.get("why", "required"),
        command=f"lingyi approve {record['approval_id']}",
    )


def _result(answer: ApprovalAnswer) -> CallToolResult:
    data = answer.model_dump(mode="json")
    text = [TextContent(type="text", text=answer.model_dump_json(exclude_none=True))]
    return CallToolResult(content=text, structured_content=data, is_error=not answer.ok)
