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

from lingyi._validation import Problem
from lingyi.config import Config, ConfigFileError, TokenEntry, token_problems
from lingyi.models import Principal
from lingyi.policy import PolicySet
from lingyi.policy.closest import closest


class StaticTokens:
    """Bearer tokens from config; each is bound to the members it may speak for.

    Every configured token must be usable: one whose variable is unset or too short stops
    the start (:func:`tokens_of`), never quietly leaves fewer tokens, or none, in force."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self._tokens = [(e.name, e.value() or "", e.members) for e in entries]

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


def tokens_of(config: Config) -> StaticTokens:
    """The config's tokens, or a ConfigFileError naming each token that cannot be used."""
    if found := token_problems(config.raw):
        raise ConfigFileError(config.source, found)
    return StaticTokens(config.raw.server.tokens)


def tokens_line(config: Config) -> str:
    """What the start line says about authentication."""
    count = len(config.raw.server.tokens)
    if count:
        return f"{count} (every call needs a bearer token)"
    return "none configured: loopback only, every member served with no authentication"


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


def member_problems(config: Config, policies: PolicySet) -> list[Problem]:
    """Each name in a token's or an upstream's ``members`` that no policy knows (a typo
    there silently unserves every tool it was meant to grant), with the closest member."""
    known = policies.names
    named = [(f"server.tokens[{i}]", t.members) for i, t in enumerate(config.raw.server.tokens)]
    named += [(f"upstreams[{i}]", u.members) for i, u in enumerate(config.raw.upstreams)]
    found = []
    for where, members in named:
        for j, name in enumerate(members):
            if policies.resolve(name) is None:
                guess = closest(name, known)
                hint = f" (did you mean {guess!r}?)" if guess else ""
                listed = ", ".join(sorted(policies.members))
                message = f"no member is named {name!r}{hint}; members: {listed}"
                found.append(Problem(f"{where}.members[{j}]", message))
    return found


def check_members(config: Config, policies: PolicySet) -> None:
    """Refuse to start on an unknown member in a token or an upstream (file and key)."""
    if found := member_problems(config, policies):
        raise ConfigFileError(config.source, found)
