"""MCP resources: a member's policy, the recent verification log, the weekly report.

They read the live state (the current policy set, the log on disk), so a client sees what
the guard decides with right now. ``lingyi://policy/{member}`` completes member names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import Completion, ResourceTemplateReference

from lingyi import messages
from lingyi.log import limit_record, tail_records
from lingyi.policy import MemberPolicy
from lingyi.redact import redact_value
from lingyi.server.app import ConnectionScope, GuardApp

RECENT_LOG_RECORDS = 50
RECENT_FIELD_BYTES = 16384  # how much of a value the resource shows when the log has no limit


def add_resources(server: MCPServer[ConnectionScope], app: GuardApp) -> None:
    @server.resource(
        "lingyi://policy/{member}",
        name="member-policy",
        description="A member's policy: the tools it owns (with argument schemas) and its checks.",
        mime_type="application/json",
    )
    def member_policy(member: str) -> str:
        policies = app.policies
        policy = policies.resolve(member)
        if policy is None:
            known = ", ".join(policies.members)
            text = messages.text(
                app.config.language, "server.unknown_member", member=repr(member), members=known
            )
            raise ResourceError(text)
        return json.dumps(
            redact_value(policy_view(policy), keys=False), ensure_ascii=False, indent=2
        )

    @server.resource(
        "lingyi://log/recent",
        name="recent-verifications",
        description=f"The last {RECENT_LOG_RECORDS} verification records of the log.",
        mime_type="application/json",
    )
    def recent_log() -> str:
        limit = app.config.raw.log.max_field_bytes or RECENT_FIELD_BYTES
        records = recent_records(app.config.log_path, max_field_bytes=limit)
        return json.dumps(records, ensure_ascii=False, indent=2)

    @server.resource(
        "lingyi://report/weekly",
        name="weekly-report",
        description="The weekly verification report of the last full week (Markdown).",
        mime_type="text/markdown",
    )
    def weekly_report() -> str:
        from lingyi.report import weekly_report_markdown  # the report loads only when read

        return weekly_report_markdown(app.config)  # from stats, which are redacted

    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        """Member names for lingyi://policy/{member}: ids, display names and aliases."""
        if not isinstance(ref, ResourceTemplateReference) or argument.name != "member":
            return None
        names = [n for m in app.policies.members.values() for n in m.names]
        return Completion(values=[n for n in names if n.lower().startswith(argument.value.lower())])

    server.completion()(complete)  # type: ignore[no-untyped-call]  # the SDK leaves it untyped


def policy_view(policy: MemberPolicy) -> dict[str, Any]:
    return {
        "member": policy.id,
        "name": policy.name,
        "aliases": policy.aliases,
        "description": policy.description,
        "tools": {n: t.model_dump(exclude_none=True) for n, t in policy.tools.items()},
        "checks": [c.model_dump(mode="json", exclude_none=True) for c in policy.checks],
    }


def recent_records(
    path: Path, count: int = RECENT_LOG_RECORDS, *, max_field_bytes: int = RECENT_FIELD_BYTES
) -> list[dict[str, Any]]:
    """The last ``count`` readable records, oldest first, read backwards (any record size).

    A record written before the size limit, or with none, can be megabytes; it is shown cut
    as the writer would store it (:func:`~lingyi.log.limit_record`), so one big record
    cannot make the resource too big to send or to read. Redacted again first: a record
    written before redaction covered a format may still hold it.
    """
    return [limit_record(redact_value(r), max_field_bytes) for r in tail_records(path, count)]
