"""``lingyi verify --server URL``: verify through a running ``lingyi serve --http``.

The standard design for a policy engine's callers (OPA's): the server has the policies loaded,
and it holds the session's evidence, so a call here verifies what the server would verify in
that session. It goes through the real MCP client (Streamable HTTP) to the server's ``verify``
tool, with ``Lingyi-Session: <--session>`` (the session named so by that token's earlier
connections) and the bearer token read from the variable ``[cli] token_env`` names.

This module imports the MCP client and nothing of the engine. Whatever goes wrong (no server
there, a refused token, a server error) is an error naming the URL and what to fix: never a
verification in this process instead, which would see none of the session's evidence.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from lingyi.errors import BackendError, LingyiError

TOOL = "verify"
TIMEOUT_S = 60.0  # a verification may wait for the judge
CONNECT_S = 5.0


def verify(url: str, token_env: str, session: str, entered: dict[str, Any]) -> dict[str, Any]:
    """The server's verification of ``entered`` (lingyi.verdict.Verification, as a dict)."""
    # A header is ASCII: a session named in other characters goes percent-encoded (UTF-8).
    headers = {"Lingyi-Session": quote(session, safe=""), **_authorization(token_env)}
    refused: list[int] = []  # HTTP statuses >= 400: the SDK answers them with a bare error
    try:
        structured, is_error = anyio.run(_call, url, headers, entered, refused)
    except Exception as exc:  # every failure becomes one line naming the URL
        raise BackendError(f"{url}: {_why(exc, refused, token_env)}") from exc
    done = structured.get("result") if isinstance(structured, dict) else None
    if isinstance(done, dict):
        return done
    reason = (structured or {}).get("verdict", {}).get("reason") if is_error else None
    raise BackendError(f"{url}: the server did not verify: {reason or structured}")


def _authorization(token_env: str) -> dict[str, str]:
    """The bearer token from the variable ``[cli] token_env`` names; none when it names none."""
    if not token_env:
        return {}
    token = os.environ.get(token_env, "")
    if not token:
        raise LingyiError(
            f"[cli] token_env names ${token_env}, which is not set: export {token_env}=<a token "
            "of that server's [[server.tokens]]>, or empty token_env for a server without tokens"
        )
    return {"Authorization": f"Bearer {token}"}


async def _call(
    url: str, headers: dict[str, str], entered: dict[str, Any], refused: list[int]
) -> tuple[dict[str, Any] | None, bool]:
    async def status(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused.append(response.status_code)

    timeout = httpx2.Timeout(TIMEOUT_S, connect=CONNECT_S)
    hooks = {"response": [status]}
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, raise_exceptions=True) as client:
            result = await client.call_tool(TOOL, {"input": entered})
    return result.structured_content, bool(result.is_error)


def _why(exc: BaseException, refused: list[int], token_env: str) -> str:
    """What went wrong, in a line that says what to fix."""
    found = _innermost(exc)
    if refused:
        status = refused[0]
        if status in (401, 403):
            where = f"${token_env}" if token_env else "no token ([cli] token_env is empty)"
            return (
                f"the server refused the token (HTTP {status}): set {where} to a token of its "
                "[[server.tokens]]"
            )
        return f"the server answered HTTP {status}: is this the /mcp URL of `lingyi serve --http`?"
    if isinstance(found, httpx2.TransportError):
        return (
            f"cannot reach the server ({type(found).__name__}: {found}): start `lingyi serve "
            "--http` there, fix [cli] server or --server, or verify in this process with --local"
        )
    if isinstance(found, MCPError) and "unknown tool" in str(found).lower():
        return f"the server has no {TOOL!r} tool: it runs an older lingyi; upgrade it"
    return f"the server failed: {type(found).__name__}: {found}"


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups wrap what a task raised)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
