"""MCP resources: a member's policy, the recent verification log, the weekly report.

They read the live state (the current policy set, the log on disk), so a client sees what
the guard decides with right now. ``lingyi://policy/{member}`` completes member names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ResourceTemplateReference,
    TextResourceContents,
)

from lingyi import messages
from lingyi.log import limit_record, tail_records
from lingyi.policy import MemberPolicy
from lingyi.redact import redact_value
from lingyi.server.app import GuardApp, Request

RECENT_LOG_RECORDS = 50
RECENT_FIELD_BYTES = 16384  # how much of a value the resource shows when the log has no limit
POLICY = "lingyi://policy/"
JSON, MARKDOWN = "application/json", "text/markdown"
STATIC = [
    Resource(
        uri="lingyi://log/recent",
        name="recent-verifications",
        description=f"The last {RECENT_LOG_RECORDS} verification records of the log.",
        mime_type=JSON,
    ),
    Resource(
        uri="lingyi://report/weekly",
        name="weekly-report",
        description="The weekly verification report of the last full week (Markdown).",
        mime_type=MARKDOWN,
    ),
]
TEMPLATE = ResourceTemplate(
    uri_template=POLICY + "{member}",
    name="member-policy",
    description="A member's policy: the tools it owns (with argument schemas) and its checks.",
    mime_type=JSON,
)


class Resources:
    """The handlers of resources/list, resources/templates/list, resources/read, completion."""

    def __init__(self, app: GuardApp) -> None:
        self.app = app

    async def list(
        self, request: Request, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=STATIC)

    async def templates(
        self, request: Request, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def read(self, request: Request, params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = params.uri
        text, mime = await anyio.to_thread.run_sync(self.text, uri)  # reads the log from disk
        return ReadResourceResult(
            contents=[TextResourceContents(uri=uri, text=text, mime_type=mime)]
        )

    def text(self, uri: str) -> tuple[str, str]:
        if uri == "lingyi://log/recent":
            return self.recent_log(), JSON
        if uri == "lingyi://report/weekly":
            from lingyi.report import weekly_report_markdown  # the report loads only when read

            return weekly_report_markdown(self.app.config), MARKDOWN  # from redacted stats
        member = unquote(uri.removeprefix(POLICY)) if uri.startswith(POLICY) else ""
        if not member or "/" in member:
            raise MCPError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
        return self.member_policy(uri, member), JSON

    def member_policy(self, uri: str, member: str) -> str:
        policies = self.app.policies
        policy = policies.resolve(member)
        if policy is None:
            known = ", ".join(policies.members)
            text = messages.text(
                self.app.config.language,
                "server.unknown_member",
                member=repr(member),
                members=known,
            )
            raise MCPError(INTERNAL_ERROR, f"Error reading resource {uri}: {text}", {"uri": uri})
        view = redact_value(policy_view(policy), keys=False)
        return json.dumps(view, ensure_ascii=False, indent=2)

    def recent_log(self) -> str:
        limit = self.app.config.raw.log.max_field_bytes or RECENT_FIELD_BYTES
        records = recent_records(self.app.config.log_path, max_field_bytes=limit)
        return json.dumps(records, ensure_ascii=False, indent=2)

    async def complete(self, request: Request, params: CompleteRequestParams) -> CompleteResult:
        """Member names for lingyi://policy/{member}: ids, display names and aliases."""
        ref, argument = params.ref, params.argument
        if not isinstance(ref, ResourceTemplateReference) or argument.name != "member":
            return CompleteResult(completion=Completion(values=[]))
        names = [n for m in self.app.policies.members.values() for n in m.names]
        prefix = argument.value.lower()
        return CompleteResult(
            completion=Completion(values=[n for n in names if n.lower().startswith(prefix)])
        )


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
