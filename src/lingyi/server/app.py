"""The runtime shared by every tool: the guard, the ledger, the council record, the backends.

A guarded tool call runs, in this order, in one worker thread: verify (the constraint layer)
and append the verification record to the log → execute only if approved, or run the fallback
variant the verdict offers (a dry-run push) → record the evidence the tool produced in the
session's ledger → return. The log record is written before anything touches the world, so an
interrupted server never has done work the log does not show. The guard owns verify → log on
every path; nothing here decides or writes the log itself.

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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import LoggingLevel
from pydantic import BaseModel

from lingyi import messages
from lingyi._ids import new_id
from lingyi._logging import get_logger
from lingyi.backends.data import DataRegistry, DataSource
from lingyi.backends.kb import KnowledgeBase
from lingyi.backends.traces import TraceBackend
from lingyi.config import Config
from lingyi.council import CouncilMessage, FileCouncil
from lingyi.errors import BackendError, ConfigError, LogError
from lingyi.guard import Guard, kb_lookups, open_kb
from lingyi.ledger import Ledger, LedgerLimits
from lingyi.log.records import OutcomeRecord
from lingyi.models import (
    Assertion,
    AssertionType,
    Decision,
    Evidence,
    Principal,
    ToolCall,
    VerificationResult,
)
from lingyi.policy import MemberPolicy, PolicySet
from lingyi.redact import clip, redact_text
from lingyi.server.auth import check_members, principal_of
from lingyi.server.sessions import http_session
from lingyi.server.wire import (
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
NO_OWNER = "(no owner)"  # the member of a call to a tool no policy owns: member.known rejects it
T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    """Who is calling: the ledger session, and the principal when a token was presented.

    ``once``: the session is this request's alone (stateless HTTP), dropped when it is answered.
    """

    session: str
    principal: Principal | None = None
    once: bool = False


@dataclass
class ConnectionScope:
    """What the lifespan yields per client connection (stdio, in-process) or per app (HTTP)."""

    app: GuardApp
    session: str = field(default_factory=lambda: f"mcp-{new_id()}")


Ctx = Context[ConnectionScope, Any]
Request = ServerRequestContext[ConnectionScope, Any]


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
class Done:
    """Which call an outcome record is about: the verification it follows, and by whom."""

    session: str
    member: str
    tool: str
    verification_id: str
    executed: Executed


OutcomeStatus = Literal["failed", "held", "refused"]
ERROR_CHARS = 2000  # an outcome's error, redacted then clipped (an upstream's text is long)


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
        from lingyi.approvals import ApprovalGate  # imports the wire, which imports us

        self.approvals = ApprovalGate(config, self.guard.log)
        self.log_levels: dict[str, LoggingLevel] = {}  # MCP logging/setLevel, per session
        self.on_tools_changed: list[Callable[[], None]] = []  # the servers built over this app
        self._kb: KnowledgeBase | None = None
        self._kb_lock = threading.Lock()
        self._idle = threading.Condition()
        self._inflight = 0
        self.closing = False

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
    async def lifespan(self, _server: MCPServer[ConnectionScope]) -> AsyncIterator[ConnectionScope]:
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
        """verify → execute (or its fallback) → record evidence; the log is already written."""
        policies = self.policies  # one snapshot for the whole request
        owner = policies.tool_owner(name)
        call = ToolCall(name=name, arguments=args)
        assertion = Assertion(
            member=_member_of(policies, name), type=AssertionType.ACTION, tool_call=call
        )
        result = self.check(caller, assertion, policies)
        runnable = runnable_call(result, call)
        if runnable is None or owner is None:
            return refusal(Guarded(verdict=verdict_of(result, assertion.member)))
        executed: Executed = "original" if runnable is call else "fallback"
        done = Done(caller.session, owner.id, name, result.id, executed)
        if (waits := self.approvals.hold(caller, owner, runnable, result)) is not None:
            self.outcome(done, held_status(waits), approval_id=held_id(waits))
            return waits  # a person approves first (lingyi.approvals); nothing ran
        try:
            payload, evidence = execute(Run(self, owner, runnable.arguments))
        except BackendError as exc:
            self.outcome(done, "failed", error=str(exc))
            verdict = verdict_of(result, owner.id, executed, error=str(exc))
            return refusal(Guarded(verdict=verdict))
        except Exception as exc:  # a bug in an executor: still on the record, then raised
            self.outcome(done, "failed", error=f"{type(exc).__name__}: {exc}")
            raise
        self.ledger.record(caller.session, owner.id, name, runnable.arguments, evidence)
        return success(Guarded(verdict=verdict_of(result, owner.id, executed), result=payload))

    def outcome(
        self,
        done: Done,
        status: OutcomeStatus,
        *,
        error: str | None = None,
        approval_id: str | None = None,
    ) -> None:
        """Append the outcome of a call that was let through but did not run to its end.

        The verification is already in the log; a log that fails now leaves it there and
        the reply unchanged (said on stderr), since the call's fate is already decided.
        """
        record = OutcomeRecord(
            verification_id=done.verification_id,
            session=done.session,
            member=done.member,
            tool=done.tool,
            status=status,
            executed=done.executed,
            error=clip(redact_text(error), ERROR_CHARS) if error is not None else None,
            approval_id=approval_id,
        )
        try:
            self.guard.log.append(record)
        except LogError as exc:
            log.error("outcome not logged", tool=done.tool, status=status, error=str(exc))

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


def _member_of(policies: PolicySet, tool: str) -> str:
    """Whose policy judges a call: the tool's owner; for an upstream tool not served now, the
    owner its policy names (tool.owned then says why it is not served)."""
    if (owner := policies.tool_owner(tool)) is not None:
        return owner.id
    unserved = policies.unserved.get(tool)
    return unserved.owner if unserved else NO_OWNER


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


def held_status(reply: Reply) -> OutcomeStatus:
    """A call the approval gate answered: still waiting for a person, or refused by one."""
    brief = reply.verdict.approval
    return "held" if brief is None or brief.status == "pending" else "refused"


def held_id(reply: Reply) -> str | None:
    brief = reply.verdict.approval
    return brief.id if brief is not None else None


def runnable_call(result: VerificationResult, call: ToolCall) -> ToolCall | None:
    """The call to execute: the original if approved, the fallback's variant of the same tool."""
    if result.decision is Decision.APPROVED:
        return call
    fallback = result.fallback
    if result.decision is Decision.FALLBACK and fallback and fallback.tool_call:
        return fallback.tool_call if fallback.tool_call.name == call.name else None
    return None


def fallback_text(result: VerificationResult) -> str | None:
    """The safe wording a fallback offers for a message (e.g. labelled as inference)."""
    fallback = result.fallback
    ok = result.decision is Decision.FALLBACK and fallback is not None
    return fallback.content if ok and fallback is not None else None
