"""Asking the person at the client through MCP elicitation, from the tool's worker thread.

The tool function (on the event loop) calls :func:`offer` with its context before the
worker hop; the worker thread runs in a copy of that context (anyio copies context
variables), so the gate finds the :class:`Asker` there. It is offered only when the client
declared the elicitation capability (form mode); otherwise the gate answers with a pending
approval id. How the question travels follows the negotiated protocol:

- up to 2025-11-25, a server-to-client ``elicitation/create`` request in the middle of the
  call, sent from the worker thread onto the loop (``anyio.from_thread.run``), bounded by
  ``[approvals] elicit_timeout_s``; a request without a back-channel is not asked;
- from 2026-07-28 (multi round-trip requests), the call answers ``input_required`` with the
  question and the approval id as ``request_state``; the client asks the person and retries
  the same call with the answer, which the gate then reads (:meth:`Asker.answered`). What
  the client echoes back is untrusted: the gate uses the answer only for a live
  elicitation request with this call's own binding.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.from_thread
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least

from lingyi._logging import get_logger

log = get_logger()

Action = Literal["accept", "decline", "cancel", "failed", "input_required"]
KEY = "lingyi-approval"  # the key of our question in input_requests / input_responses
MODERN = "2026-07-28"


@dataclass(frozen=True)
class Answer:
    """What the person answered (``failed``: the question could not be asked;
    ``input_required``: the question went to the client with the call's result)."""

    action: Action
    error: str = ""

    @property
    def approved(self) -> bool:
        return self.action == "accept"


def _schema(label: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": label, "default": True}},
        "required": ["approve"],
    }


class Asker:
    """Asks the client of one request; ``ask`` only from a worker thread of its loop."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.modern = is_version_at_least(str(ctx.protocol_version or ""), MODERN)
        self.input_required: InputRequiredResult | None = None  # what the call answers

    def answered(self) -> tuple[str, Answer] | None:
        """The approval id and answer a retried call carries (2026-07-28), if any."""
        responses, state = self.ctx.input_responses or {}, self.ctx.request_state
        found = responses.get(KEY)
        if not self.modern or not isinstance(found, ElicitResult) or not state:
            return None
        return str(state), _answer(found)

    def ask(self, message: str, label: str, timeout_s: float, approval_id: str) -> Answer:
        if self.modern:
            params = ElicitRequestFormParams(message=message, requested_schema=_schema(label))
            self.input_required = InputRequiredResult(
                input_requests={KEY: ElicitRequest(params=params)}, request_state=approval_id
            )
            return Answer("input_required")
        return self._ask_now(message, label, timeout_s)

    def _ask_now(self, message: str, label: str, timeout_s: float) -> Answer:
        session, related = self.ctx.request_context.session, self.ctx.request_context.request_id

        async def send() -> ElicitResult:
            with anyio.fail_after(timeout_s):
                result: ElicitResult = await session.elicit_form(
                    message, _schema(label), related_request_id=related
                )
                return result

        try:
            result = anyio.from_thread.run(send)
        except TimeoutError:
            return Answer("cancel", f"no answer within {timeout_s:g} s")
        except Exception as exc:  # the client failed or went away: nothing is approved
            log.warning("approval.elicitation_failed", error=str(exc))
            return Answer("failed", str(exc))
        return _answer(result)


def _answer(result: ElicitResult) -> Answer:
    """Accept approves unless the form says ``approve: false`` (then it is a decline)."""
    if result.action == "accept" and (result.content or {}).get("approve") is False:
        return Answer("decline")
    return Answer(result.action)


ASKER: ContextVar[Asker | None] = ContextVar("lingyi_approval_asker", default=None)


def offer(ctx: Any) -> None:
    """Let this request's gate ask its client, if the client can be asked."""
    asker = Asker(ctx)
    ASKER.set(asker if _can_elicit(ctx.request_context.session, asker.modern) else None)


def _can_elicit(session: Any, modern: bool) -> bool:
    caps = getattr(session, "client_capabilities", None)
    elicitation = getattr(caps, "elicitation", None)
    if elicitation is None:
        return False
    if not modern and not getattr(session, "can_send_request", False):
        return False  # a legacy request without a back-channel cannot be asked mid-call
    # Form mode: declared, or implied by an empty capability (clients before 2025-11-25).
    return elicitation.form is not None or elicitation.url is None


def asker() -> Asker | None:
    return ASKER.get()


def input_required() -> InputRequiredResult | None:
    """The question this request's gate sent to the client with the result (2026-07-28)."""
    found = ASKER.get()
    return found.input_required if found is not None else None
