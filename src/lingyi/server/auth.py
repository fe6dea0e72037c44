"""Who may call over HTTP: bearer tokens bound to members, and the Host/Origin allow-lists.

A token names the members it may speak for; the guard checks that binding for every call
(``auth.member_bound``, a check of the layer like any other), given the caller's
:class:`~lingyi.models.Principal`. Over stdio there is no token and no principal.

Beyond loopback the server refuses to start without tokens; the Host and Origin checks
(DNS-rebinding protection) name our own addresses with our port unless the config lists them.
"""

from __future__ import annotations

import hmac
import ipaddress

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings

from lingyi._logging import get_logger
from lingyi.config import Config, TokenEntry
from lingyi.models import Principal

log = get_logger()


class StaticTokens:
    """Bearer tokens from config; each is bound to the members it may speak for."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self._tokens = [(e.name, v, e.members) for e in entries if (v := e.value())]
        for entry in entries:
            if not entry.value():
                log.warning("server token has no value; it is disabled", token=entry.name)

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        for name, value, members in self._tokens:
            if hmac.compare_digest(value.encode(), token.encode()):
                return AccessToken(
                    token=token, client_id=name, scopes=[], claims={"members": members}
                )
        return None


def principal_of(token: AccessToken | None) -> Principal | None:
    """The caller the guard checks the binding of; None when no token was presented."""
    if token is None:
        return None
    members = tuple(str(m) for m in (token.claims or {}).get("members", []))
    return Principal(name=token.client_id, members=members)


def auth_settings(config: Config) -> AuthSettings:
    server = config.raw.server
    host = server.host if ":" not in server.host else f"[{server.host}]"
    return AuthSettings(issuer_url=f"http://{host}:{server.port}", resource_server_url=None)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def transport_security(config: Config, host: str, port: int) -> TransportSecuritySettings:
    """Host and Origin allow-lists: config's, or the loopback names with the port."""
    server = config.raw.server
    suffix = "*" if port == 0 else str(port)
    names = ["127.0.0.1", "localhost", "[::1]"]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.append(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=server.allowed_hosts or [f"{n}:{suffix}" for n in names],
        allowed_origins=server.allowed_origins or [f"http://{n}:{suffix}" for n in names],
    )
