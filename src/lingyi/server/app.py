"""The runtime shared by every tool: the guard, the ledger, the council record, the backends.

A guarded tool call runs through :mod:`lingyi.pipeline` in one worker thread: verify (the
constraint layer) and log → approvals → execute (or the fallback the verdict offers) → audit →
record evidence → reply. The guard owns verify → log on every path; nothing here decides or
writes the log itself.

Identity: the member whose policy applies is the owner of the tool. ``verify_assertion`` and
the council tools take the member from the caller; over HTTP with tokens a token may only
speak for the members it is bound to (``auth.member_bound``, checked by the layer).

Sessions: one ledger session per MCP client connection (:mod:`.sessions`). On stdio and
in-process the server's lifespan runs once per connection, carries the session and drops it
when the connection ends. Over Streamable HTTP the lifespan is shared: the ``mcp-session-id``
names the session (dropped on ``DELETE`` or after the idle time), a stateless (2026-07-28)
request is a session of its own, and ``Lingyi-Session: NAME`` shares one on purpose.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp_types import CallToolRequestParams, InputResponses, LoggingLevel
from pydantic import BaseModel

from lingyi import messages
from lingyi._ids import new_id
from lingyi._logging import get_logger
from lingyi.approvals import ApprovalGate
from lingyi.backends.data import DataRegistry, DataSource
from lingyi.backends.kb import KnowledgeBase
from lingyi.backends.traces import TraceBackend
from lingyi.config import Config
from lingyi.council import CouncilMessage, FileCouncil
from lingyi.errors import ConfigError
from lingyi.guard import Guard, kb_lookups, open_kb
from lingyi.ledger import Ledger, LedgerLimits
from lingyi.models import (
    Assertion,
    AssertionType,
    Decision,
    Evidence,
    VerificationResult,
)
from lingyi.pipeline import Call, Pipeline
from lingyi.pipeline import Caller as Caller  # what the tools and the gate are told
from lingyi.policy import MemberPolicy, PolicySet
from lingyi.server.auth import check_members, principal_of
from lingyi.server.sessions import http_session
from lingyi.verdict import (
    Executed,
    Guarded,
    PostedMessage,
    Reply,
    refusal,
    success,
    verdict_of,
)

if TYPE_CHECKING:
    from lingyi.gateway import Gateway, Listing

log = get_logger()

SOURCE = "server"
T = TypeVar("T")


@dataclass
class ConnectionScope:
    """What the lifespan yields per client connection (stdio, in-process) or per app (HTTP)."""

    app: GuardApp
    session: str = field(default_factory=lambda: f"mcp-{new_id()}")


Request = ServerRequestContext[ConnectionScope, Any]


@dataclass(frozen=True)
class Ctx:
    """One tools/call as a tool reads it: the SDK's request context and the call's params."""

    request_context: Request
    params: CallToolRequestParams

    @property
    def protocol_version(self) -> str:
        return self.request_context.protocol_version

    @property
    def input_responses(self) -> InputResponses | None:
        """The client's answers to what an earlier round asked (2026-07-28)."""
        return self.params.input_responses

    @property
    def request_state(self) -> str | None:
        return self.params.request_state


def caller_of(request: Request) -> Caller:
    """The ledger session of this request and the principal of the token it carried."""
    scope = request.lifespan_context
    headers = getattr(request.request, "headers", None)
    if headers is None:  # stdio or in-process: one lifespan per client connection
        return Caller(scope.session)
    token = get_access_token()
    found = http_session(headers, token.client_id if token else None)
    return Caller(found.name, principal_of(token), found.once)


def ledger_limits(config: Config) -> LedgerLimits:
    """The ledger's bounds from the config's ``[ledger]`` (a max_age_s of 0: no age limit)."""
    section = config.raw.ledger
    return LedgerLimits(
        max_entries=section.max_entries,
        max_age_s=section.max_age_s or None,
        idle_s=section.idle_s,
        max_sessions=section.max_sessions,
    )


def _ends_once(method: Callable[..., T]) -> Callable[..., T]:
    """A request whose session is its own (stateless HTTP): drop the session when answered."""

    @functools.wraps(method)
    def run(app: GuardApp, caller: Caller, *args: Any) -> T:
        try:
            return method(app, caller, *args)
        finally:
            if caller.once:
                app.end_session(caller.session, "request")

    return run


@dataclass(frozen=True)
class Run:
    """What an executor gets: the runtime, the tool's owner, the arguments the guard approved.

    The arguments are the caller's own (or the fallback's), already validated against the
    tool's schema by ``tool.args_schema``: executors read them as they are, never coerce.
    """

    app: GuardApp
    owner: MemberPolicy
    args: dict[str, Any]


Executor = Callable[[Run], tuple[BaseModel, list[Evidence]]]


class GuardApp:
    """The guard, the ledger, the council record and the real backends of one server."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.council = FileCouncil(config.council_path)
        base = config.raw.evidence.kb_url_base  # KB results carry a URL that answers cite
        self.guard = Guard.from_config(
            config,
            source=SOURCE,
            council=self.council,
            lookups=kb_lookups(lambda: self.kb, url_base=base),  # active, cited documents
        )
        self.ledger = Ledger(ledger_limits(config))
        try:
            check_members(config, self.policies)  # before any upstream starts
        except ConfigError:
            self.guard.close()
            raise
        self.gateway = _gateway(self, config)
        self.data = DataRegistry(_data_sources(config), config.data_roots)
        self.approvals = ApprovalGate(config, self.guard.log)
        self.pipeline = Pipeline(self.guard, self.ledger, self.approvals)
        self.log_levels: dict[str, LoggingLevel] = {}  # MCP logging/setLevel, per session
        self.on_tools_changed: list[Callable[[], None]] = []  # the servers built over this app
        self.on_session_end: list[Callable[[str], None]] = []  # their channels to the client
        self._kb: KnowledgeBase | None = None
        self._kb_lock = threading.Lock()
        self._idle = threading.Condition()
        self._inflight = 0
        self.closing = False
        self.drained = True  # False: a stop's wait for running tool work timed out

    def upstream_changed(self, listing: Listing) -> None:
        """An upstream's tools changed (in the re-listing's thread): merge the new listing
        into the policies, log each added tool once with whether it is served, tell the
        servers (which tell their clients when what they serve changed)."""
        gateway = self.gateway
        if gateway is None:  # cannot happen: only a gateway calls this
            return
        self.guard.layer.extend_policies(gateway.extend)
        policies = self.policies  # merged with the new listing
        for name in listing.added:
            _log_added(gateway, policies, name)
        for hook in self.on_tools_changed:
            hook()

    @property
    def policies(self) -> PolicySet:
        """The current policy set; take it once per request and pass that snapshot on."""
        return self.guard.layer.policies

    @property
    def traces(self) -> TraceBackend | None:
        """The trace API the checks look ids up in (one cache, one bounded pool)."""
        backend = self.guard.layer.services.traces
        return backend if isinstance(backend, TraceBackend) else None

    @property
    def kb(self) -> KnowledgeBase:
        """Indexed on first use, so a missing KB fails its tool, not the server."""
        with self._kb_lock:
            if self._kb is None:
                self._kb = open_kb(self.config, self.policies)
            return self._kb

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run tool work in a worker thread, counted so a shutdown can wait for it.

        A cancelled request (client gone) still waits for the thread: verify → execute →
        record is never cut in half.
        """
        return await anyio.to_thread.run_sync(self._counted, fn, *args)

    def _counted(self, fn: Callable[..., T], *args: Any) -> T:
        with self._idle:
            if self.closing:
                raise RuntimeError(messages.text(self.config.language, "server.shutting_down"))
            self._inflight += 1
        try:
            return fn(*args)
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def drain(self, timeout_s: float) -> bool:
        """Refuse new tool work and wait for the running work; True when none is left."""
        with self._idle:
            self.closing = True
            return self._idle.wait_for(lambda: self._inflight == 0, timeout_s)

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()
        self.approvals.close()
        self.guard.close()
        if self._kb is not None:
            self._kb.close()

    @asynccontextmanager
    async def lifespan(self, _server: object) -> AsyncIterator[ConnectionScope]:
        """Once per stdio or in-process connection (once per app over HTTP): the connection's
        session, dropped from the ledger when the connection ends."""
        scope = ConnectionScope(self)
        log.info("mcp connection opened", session=scope.session)
        try:
            yield scope
        finally:
            self.end_session(scope.session, "ended")
            log.info("mcp connection closed", session=scope.session)

    def end_session(self, session: str, reason: str) -> None:
        """Forget a session that ended: its evidence and the log level its client chose."""
        self.ledger.drop(session, reason)
        self.log_levels.pop(session, None)
        for hook in self.on_session_end:
            hook(session)

    def check(
        self, caller: Caller, assertion: Assertion, policies: PolicySet | None = None
    ) -> VerificationResult:
        """Verify and log through the guard, with the caller's principal and session."""
        assertion.session = caller.session
        return self.guard.check(
            assertion, self.ledger, policies=policies, principal=caller.principal
        )

    @_ends_once
    def run_tool(self, caller: Caller, name: str, args: dict[str, Any], execute: Executor) -> Reply:
        """A guarded tool call through the pipeline (lingyi.pipeline): verify and log →
        approvals → execute → audit → record evidence → reply."""

        def work(owner: MemberPolicy, approved: dict[str, Any]) -> tuple[BaseModel, list[Evidence]]:
            return execute(Run(self, owner, approved))

        return self.pipeline.run(Call(caller, name, args, work, self.policies))

    @_ends_once
    def verify_only(self, caller: Caller, assertion: Assertion) -> Reply:
        """Verify and log an assertion; only a rejection is an error result."""
        result = self.check(caller, assertion)
        verdict = verdict_of(result, assertion.member)
        return refusal(verdict) if result.decision is Decision.REJECTED else success(verdict)

    @_ends_once
    def post(self, caller: Caller, member: str, content: str) -> Reply:
        """Screen a council message, then post it (or its safe variant) to the record."""
        assertion = Assertion(member=member, type=AssertionType.COMMUNICATION, content=content)
        result = self.check(caller, assertion)
        text = content if result.decision is Decision.APPROVED else fallback_text(result)
        if text is None or result.member is None:
            return refusal(Guarded(verdict=verdict_of(result, member)))
        message = CouncilMessage(sender=result.member, content=text)
        self.council.append(message)
        evidence = Evidence(
            id=message.id, title=f"council message from {message.sender}", snippet=text
        )
        self.ledger.record(caller.session, message.sender, "post_council_message", {}, [evidence])
        executed: Executed = "original" if text == content else "fallback"
        posted = PostedMessage(id=message.id, sender=message.sender, content=text, ts=message.ts)
        return success(Guarded(verdict=verdict_of(result, member, executed), result=posted))


def _gateway(app: GuardApp, config: Config) -> Gateway | None:
    """The upstreams, connected and listed; their schemas merged into every policy set."""
    if not config.raw.upstreams:
        return None
    from lingyi.gateway import Gateway  # with upstreams only: the shipped config has none

    gateway = Gateway(config)
    app.guard.layer.extend_policies(gateway.extend)
    gateway.on_update = app.upstream_changed  # tools/list_changed found a difference
    return gateway


def _log_added(gateway: Gateway, policies: PolicySet, name: str) -> None:
    """One record per tool an upstream added: served (for whom), or why not (default deny)."""
    if (owner := gateway.owner(policies, name)) is not None:
        log.warning("upstream.tool_added", tool=name, served=True, owner=owner.id)
        return
    owned = gateway.loaded is not None and gateway.loaded.tool_owner(name) is not None
    why = "its owner is not one of the upstream's members" if owned else "no policy owns it"
    log.warning("upstream.tool_added", tool=name, served=False, reason=why)


def _data_sources(config: Config) -> dict[str, DataSource]:
    return {
        name: DataSource(name=name, **entry.model_dump())
        for name, entry in config.raw.data_sources.items()
    }


def fallback_text(result: VerificationResult) -> str | None:
    """The safe wording a fallback offers for a message (e.g. labelled as inference)."""
    fallback = result.fallback
    ok = result.decision is Decision.FALLBACK and fallback is not None
    return fallback.content if ok and fallback is not None else None
