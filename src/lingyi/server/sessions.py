"""Which ledger session a request belongs to, and when a session ends.

Every MCP client connection is its own session, so one conversation's evidence never backs
another's assertions:

- stdio and in-process: the server's lifespan runs once per connection and names it; the
  session is dropped when the connection ends;
- Streamable HTTP with a session (``mcp-session-id``): that session; dropped when the client
  ends it (``DELETE``, seen by :class:`EndedSessions`) or after the idle time;
- stateless HTTP (2026-07-28, no session at all): each request is its own session, dropped
  when the request is answered.

A client that wants its connections (or its stateless requests) to share evidence asks for it
by sending ``Lingyi-Session: NAME``; the name is scoped to its token, so only a client with
the same token and the same name shares it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lingyi._ids import new_id

if TYPE_CHECKING:
    from lingyi.server.app import GuardApp

SHARE_HEADER = "lingyi-session"
_PLAIN = re.compile(r"[A-Za-z0-9._:-]{1,64}")


@dataclass(frozen=True)
class HttpSession:
    """The ledger session of one HTTP request; ``once``: it ends with the request."""

    name: str
    once: bool = False


def http_session(headers: Mapping[str, str], token: str | None) -> HttpSession:
    """The session of an HTTP request: the one asked for, the MCP session, or this request."""
    owner = token or "anonymous"
    if asked := headers.get(SHARE_HEADER):
        return HttpSession(f"http-shared-{owner}-{_plain(asked)}")
    if sid := headers.get("mcp-session-id"):
        return HttpSession(mcp_session(sid))
    return HttpSession(f"http-request-{new_id()}", once=True)


def mcp_session(sid: str) -> str:
    return f"http-{sid}"


def _plain(name: str) -> str:
    """A name fit for the log as it is, or a short hash of it."""
    if _PLAIN.fullmatch(name):
        return name
    return "h" + hashlib.sha256(name.encode()).hexdigest()[:16]


class EndedSessions:
    """ASGI middleware: a ``DELETE`` that ended an MCP session drops its ledger session."""

    def __init__(self, app: ASGIApp, guard: GuardApp) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, receive, watch)
        sid = headers.get("mcp-session-id")
        if sid and status and status[0] < 400:
            self.guard.end_session(mcp_session(sid), "ended")
