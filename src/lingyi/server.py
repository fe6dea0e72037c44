"""The MCP server: every real tool behind the constraint layer.

A guarded tool call runs, in this order: verify (the constraint layer) and append the
verification record to the log → execute only if approved, or run the fallback variant
the verdict offers (a dry-run push) → record the evidence the tool produced in the
session's ledger → return. The log record is written before anything touches the world,
so an interrupted server never has done work the log does not show. A rejection is a
tool result with ``isError`` and the structured verdict, so the calling model can correct
itself; the tool never runs.

Identity: the member whose policy applies is the owner of the tool. ``verify_assertion``
and the council tools take the member from the caller; over HTTP with tokens configured a
token may only speak for the members it is bound to.

Sessions: one ledger session per MCP client session. On stdio and in-process the server's
lifespan runs once per client connection, so it carries the session id. Over Streamable
HTTP the lifespan is shared, so the ``mcp-session-id`` header names the session (stateful
clients); a stateless (2026-07-28) client has no session, and its token name does.

Transports: stdio (stdout carries nothing but protocol; logs go to stderr) and
Streamable HTTP on loopback by default, with bearer tokens and Host/Origin checks.
"""

from __future__ import annotations

import hmac
import importlib
import ipaddress
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

import anyio
import structlog
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolResult,
    Completion,
    ResourceTemplateReference,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from lingyi._ids import new_id
from lingyi.backends import git as gitb
from lingyi.backends.data import AccessResult, Analysis, DataRegistry, DataSource
from lingyi.backends.kb import KBHit, KnowledgeBase
from lingyi.config import Config, TokenEntry
from lingyi.council import CouncilMessage, FileCouncil
from lingyi.errors import BackendError, ConfigError
from lingyi.guard import Guard, kb_lookup
from lingyi.ledger import Ledger
from lingyi.models import (
    Assertion,
    AssertionType,
    Decision,
    Evidence,
    Fallback,
    Principal,
    ToolCall,
    VerificationResult,
)
from lingyi.policy import MemberPolicy, PolicySet

log = structlog.get_logger()

SOURCE = "server"
BENCH_ENV = "LINGYI_BENCH"
RECENT_LOG_RECORDS = 50
_TAIL_BYTES = 512 * 1024  # enough for the last records; never read a large log whole
DRAIN_TIMEOUT_S = 30.0  # how long a signal waits for running tool calls
T = TypeVar("T")


# --- what tools return -----------------------------------------------------------------


class CheckBrief(BaseModel):
    stage: str
    code: str
    passed: bool
    reason: str


class Verdict(BaseModel):
    """The guard's decision as the calling model sees it (also the payload of a rejection)."""

    verification_id: str
    member: str
    decision: Literal["approved", "rejected", "fallback"]
    codes: list[str] = Field(description="codes of the checks that failed")
    reason: str
    recommendation: str | None = None
    fallback: Fallback | None = None
    executed: Literal["original", "fallback"] | None = Field(
        None, description="which call ran: the one asked for, or the fallback variant"
    )
    error: str | None = Field(
        None, description="the backend's refusal, when an approved call failed"
    )
    checks: list[CheckBrief] = Field(
        default_factory=list,
        description="every check, when not approved (an approval's checks are in the log)",
    )


R = TypeVar("R", bound=BaseModel)


class Guarded(BaseModel, Generic[R]):
    """A guarded tool's result: the verdict, then what the tool really returned.

    ``result`` is null when the tool did not run (a rejection, or the backend refused), so
    an error result still conforms to the tool's output schema.
    """

    verdict: Verdict
    result: R | None = None


class SearchHits(BaseModel):
    hits: list[KBHit]


class PostedMessage(BaseModel):
    id: str
    sender: str
    content: str
    ts: str


# --- identity and sessions --------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who is calling: the ledger session, and the HTTP token when there is one."""

    session: str
    token: AccessToken | None = None


@dataclass
class ConnectionScope:
    """What the lifespan yields per client connection (stdio, in-process) or per app (HTTP)."""

    app: GuardApp
    session: str = field(default_factory=lambda: f"mcp-{new_id()}")


Ctx = Context[ConnectionScope, Any]


def caller_of(ctx: Ctx) -> Caller:
    """The ledger session of this request and the token it carried."""
    scope = ctx.request_context.lifespan_context
    headers = ctx.headers
    if headers is None:  # stdio or in-process: one lifespan per client connection
        return Caller(scope.session)
    token = get_access_token()
    if sid := headers.get("mcp-session-id"):
        return Caller(f"http-{sid}", token)
    # Stateless HTTP has no session; the token is the closest stable identity.
    return Caller(f"http-token-{token.client_id}" if token else "http-anonymous", token)


class StaticTokens:
    """Bearer tokens from config; each is bound to the members it may speak for."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self._tokens = [(e.name, v, e.members) for e in entries if (v := e.value())]
        for entry in entries:
            if not entry.value():
                log.warning("server token has no value; it is disabled", token=entry.name)

    def __bool__(self) -> bool:
        return bool(self._tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        for name, value, members in self._tokens:
            if hmac.compare_digest(value.encode(), token.encode()):
                return AccessToken(
                    token=token, client_id=name, scopes=[], claims={"members": members}
                )
        return None


# --- the runtime shared by every tool ----------------------------------------------------


Executor = Callable[["GuardApp", dict[str, Any]], tuple[BaseModel, list[Evidence]]]


class GuardApp:
    """The guard, the ledger, the council record and the real backends of one server."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.council = FileCouncil(config.council_path)
        self.guard = Guard.from_config(
            config,
            source=SOURCE,
            council=self.council,
            lookups={"knowledge_base": kb_lookup(lambda: self.kb)},  # active verification
        )
        self.ledger = Ledger()
        self.data = DataRegistry(_data_sources(config), config.data_roots)
        self._kb: KnowledgeBase | None = None
        self._kb_lock = threading.Lock()
        self._idle = threading.Condition()
        self._inflight = 0
        self.closing = False

    @property
    def policies(self) -> PolicySet:
        return self.guard.layer.policies

    @property
    def kb(self) -> KnowledgeBase:
        """Indexed on first use, so a missing KB fails its tool, not the server."""
        with self._kb_lock:
            if self._kb is None:
                self._kb = KnowledgeBase(self.config.kb_dir)
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
                raise RuntimeError("the server is shutting down")
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
        self.guard.close()
        if self._kb is not None:
            self._kb.close()

    @asynccontextmanager
    async def lifespan(self, _server: MCPServer[ConnectionScope]) -> AsyncIterator[ConnectionScope]:
        scope = ConnectionScope(self)
        log.info("mcp connection opened", session=scope.session)
        yield scope

    def check(self, caller: Caller, assertion: Assertion) -> VerificationResult:
        """Verify and log; a token speaking for a member it is not bound to is rejected."""
        return self.guard.check(assertion, self.ledger, principal=principal_of(caller.token))

    def run_tool(
        self, caller: Caller, name: str, args: dict[str, Any], execute: Executor
    ) -> CallToolResult:
        """verify → execute (or its fallback) → record evidence; the log is already written."""
        owner = self.policies.tool_owner(name)
        member = owner.id if owner else "(no owner)"
        call = ToolCall(name=name, arguments=args)
        assertion = Assertion(
            member=member, type=AssertionType.ACTION, tool_call=call, session=caller.session
        )
        result = self.check(caller, assertion)
        runnable = runnable_call(result, call)
        if runnable is None:
            return refusal(Guarded(verdict=verdict_of(result, member)))
        executed: Literal["original", "fallback"] = "original" if runnable is call else "fallback"
        try:
            payload, evidence = execute(self, runnable.arguments)
        except BackendError as exc:
            return refusal(Guarded(verdict=verdict_of(result, member, executed, error=str(exc))))
        self.ledger.record(caller.session, member, name, runnable.arguments, evidence)
        return success(Guarded(verdict=verdict_of(result, member, executed), result=payload))


def principal_of(token: AccessToken | None) -> Principal | None:
    if token is None:
        return None
    members = tuple(str(m) for m in (token.claims or {}).get("members", []))
    return Principal(name=token.client_id, members=members)


def _data_sources(config: Config) -> dict[str, DataSource]:
    return {
        name: DataSource(name=name, **entry.model_dump())
        for name, entry in config.raw.data_sources.items()
    }


def runnable_call(result: VerificationResult, call: ToolCall) -> ToolCall | None:
    """The call to execute: the original if approved, the fallback's variant of the same tool."""
    if result.decision is Decision.APPROVED:
        return call
    fallback = result.fallback
    if result.decision is Decision.FALLBACK and fallback and fallback.tool_call:
        return fallback.tool_call if fallback.tool_call.name == call.name else None
    return None


def verdict_of(
    result: VerificationResult,
    member: str,
    executed: Literal["original", "fallback"] | None = None,
    *,
    error: str | None = None,
) -> Verdict:
    return Verdict(
        verification_id=result.id,
        member=member,
        decision=result.decision.value,
        codes=[c.code for c in result.checks if c.blocking],
        reason=result.reason,
        recommendation=result.recommendation,
        fallback=result.fallback,
        executed=executed,
        error=error,
        checks=[
            CheckBrief(stage=c.stage.value, code=c.code, passed=c.passed, reason=c.reason)
            for c in result.checks
            if result.decision is not Decision.APPROVED  # keep approvals light on the wire
        ],
    )


def _text(payload: BaseModel) -> list[TextContent]:
    return [TextContent(type="text", text=payload.model_dump_json(exclude_none=True))]


def success(payload: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=_text(payload), structured_content=payload.model_dump(mode="json")
    )


def refusal(verdict: Verdict | Guarded[Any]) -> CallToolResult:
    """isError with the structured verdict: the model reads why and what to do instead."""
    return CallToolResult(
        content=_text(verdict), structured_content=verdict.model_dump(mode="json"), is_error=True
    )


# --- backends: the real work of each tool ----------------------------------------------


def _search(app: GuardApp, args: dict[str, Any]) -> tuple[SearchHits, list[Evidence]]:
    limit = int(args.get("limit") or 5)
    domains: list[str | None] = list(args.get("domains") or []) or [None]
    hits = [h for d in domains for h in app.kb.search(str(args["query"]), limit, domain=d)]
    best = sorted(hits, key=lambda h: -h.score)[:limit]
    return SearchHits(hits=best), [h.to_evidence() for h in best]


def _repo(app: GuardApp, args: dict[str, Any]) -> Any:
    roots = app.config.repo_roots
    if not roots:
        raise BackendError("no repo_roots are configured; no repository is reachable")
    return gitb.open_repo(args.get("repo_path") or roots[0], roots)


def _commit(app: GuardApp, args: dict[str, Any]) -> tuple[gitb.CommitResult, list[Evidence]]:
    with _repo(app, args) as repo:
        done = gitb.commit(
            repo, args["message"], paths=args.get("paths"), add_all=bool(args.get("add_all"))
        )
    return done, [done.to_evidence()]


def _branch(app: GuardApp, args: dict[str, Any]) -> tuple[gitb.BranchResult, list[Evidence]]:
    with _repo(app, args) as repo:
        done = gitb.branch(repo, args["name"], start_point=args.get("start_point"))
    return done, [done.to_evidence()]


def _push(app: GuardApp, args: dict[str, Any]) -> tuple[gitb.PushResult, list[Evidence]]:
    with _repo(app, args) as repo:
        done = gitb.push(
            repo,
            args["remote"],
            args["branch"],
            force=bool(args.get("force")),
            dry_run=bool(args.get("dry_run")),
        )
    return done, [done.to_evidence()]


def _audit(app: GuardApp, args: dict[str, Any]) -> tuple[gitb.AuditReport, list[Evidence]]:
    with _repo(app, args) as repo:
        report = gitb.audit_report(repo, args["version"])
    return report, [report.to_evidence()]


def _access(app: GuardApp, args: dict[str, Any]) -> tuple[AccessResult, list[Evidence]]:
    done = app.data.access(args["source"])
    return done, [done.to_evidence()]


def _analyze(app: GuardApp, args: dict[str, Any]) -> tuple[Analysis, list[Evidence]]:
    done = app.data.analyze(
        args["source"], columns=args.get("columns"), group_by=args.get("group_by")
    )
    return done, [done.to_evidence()]


# --- the tools (what the model calls) ----------------------------------------------------


def _given(args: dict[str, Any]) -> dict[str, Any]:
    """Only the arguments the caller gave: the guard checks what was asked, not defaults."""
    return {k: v for k, v in args.items() if v is not None}


async def _guarded(ctx: Ctx, tool: str, execute: Executor, args: dict[str, Any]) -> CallToolResult:
    app = ctx.request_context.lifespan_context.app
    # One worker thread runs verify → execute → record: a cancelled request (client gone,
    # SIGTERM) waits for it, so nothing is half done and no written record is lost.
    return await app.in_thread(app.run_tool, caller_of(ctx), tool, _given(args), execute)


async def search_knowledge(
    ctx: Ctx, query: str, domains: list[str] | None = None, limit: int | None = None
) -> Annotated[CallToolResult, Guarded[SearchHits]]:
    args = {"query": query, "domains": domains, "limit": limit}
    return await _guarded(ctx, "search_knowledge", _search, args)


async def git_commit(
    ctx: Ctx,
    repo_path: str,
    message: str,
    paths: list[str] | None = None,
    add_all: bool | None = None,
) -> Annotated[CallToolResult, Guarded[gitb.CommitResult]]:
    args = {"repo_path": repo_path, "message": message, "paths": paths, "add_all": add_all}
    return await _guarded(ctx, "git_commit", _commit, args)


async def git_branch(
    ctx: Ctx, repo_path: str, name: str, start_point: str | None = None
) -> Annotated[CallToolResult, Guarded[gitb.BranchResult]]:
    args = {"repo_path": repo_path, "name": name, "start_point": start_point}
    return await _guarded(ctx, "git_branch", _branch, args)


async def git_push(
    ctx: Ctx,
    repo_path: str,
    remote: str,
    branch: str,
    force: bool | None = None,
    dry_run: bool | None = None,
) -> Annotated[CallToolResult, Guarded[gitb.PushResult]]:
    args = {"repo_path": repo_path, "remote": remote, "branch": branch}
    return await _guarded(ctx, "git_push", _push, args | {"force": force, "dry_run": dry_run})


async def generate_audit_report(
    ctx: Ctx, version: str, repo_path: str | None = None
) -> Annotated[CallToolResult, Guarded[gitb.AuditReport]]:
    args = {"version": version, "repo_path": repo_path}
    return await _guarded(ctx, "generate_audit_report", _audit, args)


async def access_data_source(
    ctx: Ctx, source: str
) -> Annotated[CallToolResult, Guarded[AccessResult]]:
    return await _guarded(ctx, "access_data_source", _access, {"source": source})


async def analyze_data(
    ctx: Ctx, source: str, columns: list[str] | None = None, group_by: str | None = None
) -> Annotated[CallToolResult, Guarded[Analysis]]:
    args = {"source": source, "columns": columns, "group_by": group_by}
    return await _guarded(ctx, "analyze_data", _analyze, args)


async def verify_assertion(
    ctx: Ctx,
    member: str,
    type: Literal["fact", "action", "communication"],
    content: str = "",
    evidence_ids: list[str] | None = None,
    tool_name: str | None = None,
    tool_arguments: dict[str, Any] | None = None,
) -> Annotated[CallToolResult, Verdict]:
    """Verify what a member is about to state: a fact, an action or a communication.

    Cite the evidence ids tools returned in this session. A rejection comes back as an
    error with the verdict; a fallback offers a safe rewording (e.g. labelled inference).
    """
    call = ToolCall(name=tool_name, arguments=tool_arguments or {}) if tool_name else None
    assertion = Assertion(
        member=member,
        type=AssertionType(type),
        content=content,
        evidence_ids=evidence_ids or [],
        tool_call=call,
    )
    return await _verify_only(ctx, assertion)


async def screen_council_message(
    ctx: Ctx, member: str, content: str
) -> Annotated[CallToolResult, Verdict]:
    """Pre-screen a council message of ``member`` (verified as its communication); posts nothing."""
    assertion = Assertion(member=member, type=AssertionType.COMMUNICATION, content=content)
    return await _verify_only(ctx, assertion)


async def _verify_only(ctx: Ctx, assertion: Assertion) -> CallToolResult:
    app, caller = ctx.request_context.lifespan_context.app, caller_of(ctx)
    assertion.session = caller.session
    result = await app.in_thread(app.check, caller, assertion)
    verdict = verdict_of(result, assertion.member)
    return refusal(verdict) if result.decision is Decision.REJECTED else success(verdict)


async def post_council_message(
    ctx: Ctx, member: str, content: str
) -> Annotated[CallToolResult, Guarded[PostedMessage]]:
    """Screen a council message of ``member``, then post it to the council record if it passes.

    A fallback posts the safe variant (e.g. the message labelled as inference).
    """
    app, caller = ctx.request_context.lifespan_context.app, caller_of(ctx)
    return await app.in_thread(app_post, app, caller, member, content)


def app_post(app: GuardApp, caller: Caller, member: str, content: str) -> CallToolResult:
    assertion = Assertion(
        member=member, type=AssertionType.COMMUNICATION, content=content, session=caller.session
    )
    result = app.check(caller, assertion)
    text = content if result.decision is Decision.APPROVED else _fallback_text(result)
    if text is None:
        return refusal(Guarded(verdict=verdict_of(result, member)))
    resolved = app.policies.resolve(member)
    message = CouncilMessage(sender=resolved.id if resolved else member, content=text)
    app.council.append(message)
    evidence = Evidence(id=message.id, title=f"council message from {message.sender}", snippet=text)
    app.ledger.record(caller.session, message.sender, "post_council_message", {}, [evidence])
    executed: Literal["original", "fallback"] = "original" if text == content else "fallback"
    posted = PostedMessage(id=message.id, sender=message.sender, content=text, ts=message.ts)
    return success(Guarded(verdict=verdict_of(result, member, executed), result=posted))


def _fallback_text(result: VerificationResult) -> str | None:
    fallback = result.fallback
    ok = result.decision is Decision.FALLBACK and fallback is not None
    return fallback.content if ok and fallback is not None else None


async def bench_search_knowledge(
    ctx: Ctx, query: str, limit: int | None = None
) -> Annotated[CallToolResult, Guarded[SearchHits]]:
    """Benchmark only: the same knowledge-base search with no guard, no ledger, no log."""
    app = ctx.request_context.lifespan_context.app
    args = _given({"query": query, "limit": limit})
    hits, _ = await app.in_thread(_search, app, args)
    verdict = Verdict(
        verification_id="-", member="-", decision="approved", codes=[], reason="unguarded"
    )
    return success(Guarded(verdict=verdict, result=hits))


@dataclass(frozen=True)
class ToolDef:
    """One row of the tool table. Policy tools take description and hints from the policy."""

    fn: Callable[..., Awaitable[CallToolResult]]
    title: str
    read_only: bool | None = None  # None: from the owner's policy
    destructive: bool = False


TOOLS: tuple[ToolDef, ...] = (
    ToolDef(search_knowledge, "灵知 · search the knowledge base"),
    ToolDef(git_commit, "灵通 · git commit"),
    ToolDef(git_branch, "灵通 · git branch"),
    ToolDef(git_push, "灵通 · git push"),
    ToolDef(generate_audit_report, "灵通 · release audit report"),
    ToolDef(access_data_source, "灵研 · check a data source"),
    ToolDef(analyze_data, "灵研 · descriptive statistics"),
    ToolDef(verify_assertion, "Verify an assertion", read_only=True),
    ToolDef(screen_council_message, "Pre-screen a council message", read_only=True),
    ToolDef(post_council_message, "Post a council message (screened)", read_only=False),
)

GUARD_NOTE = (
    "Guarded by LingYi Guard: verified before it runs and logged. A rejection returns an "
    "error whose structured verdict says why (codes, reason) and what to do instead "
    "(recommendation, fallback)."
)


# --- building the server ------------------------------------------------------------------


def build_server(
    app: GuardApp, *, bench: bool | None = None, tokens: StaticTokens | None = None
) -> MCPServer[ConnectionScope]:
    """The MCP server over ``app``: the tool table, the resources, the optional hooks."""
    auth = _auth(app.config) if tokens else None
    server: MCPServer[ConnectionScope] = MCPServer(
        "lingyi-guard",
        instructions="Verify before you assert. " + GUARD_NOTE,
        lifespan=app.lifespan,
        log_level="WARNING",
        token_verifier=tokens if tokens else None,
        auth=auth,
    )
    for tool in TOOLS:
        _add_tool(server, app.policies, tool)
    if bench if bench is not None else os.environ.get(BENCH_ENV) == "1":
        server.add_tool(
            bench_search_knowledge,
            name="bench_search_knowledge",
            annotations=ToolAnnotations(read_only_hint=True),
        )
    _add_resources(server, app)
    _add_optional(server, app)
    return server


def _add_tool(server: MCPServer[ConnectionScope], policies: PolicySet, tool: ToolDef) -> None:
    name = tool.fn.__name__
    owner = policies.tool_owner(name)
    spec = owner.tools[name] if owner else None
    read_only = tool.read_only if tool.read_only is not None else bool(spec and spec.read_only)
    destructive = bool(spec.destructive) if spec else tool.destructive
    described = (
        (spec.description if spec else (tool.fn.__doc__ or "").strip()) + "\n\n" + GUARD_NOTE
    )
    hints = ToolAnnotations(
        title=tool.title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        open_world_hint=name == "git_push",  # the only tool that talks to another machine
    )
    server.add_tool(
        tool.fn,
        name=name,
        title=tool.title,
        description=described,
        annotations=hints,
        structured_output=True,
    )


def _auth(config: Config) -> AuthSettings:
    server = config.raw.server
    host = server.host if ":" not in server.host else f"[{server.host}]"
    return AuthSettings(issuer_url=f"http://{host}:{server.port}", resource_server_url=None)


# --- resources ----------------------------------------------------------------------------


def _add_resources(server: MCPServer[ConnectionScope], app: GuardApp) -> None:
    @server.resource(
        "lingyi://policy/{member}",
        name="member-policy",
        description="A member's policy: the tools it owns (with argument schemas) and its checks.",
        mime_type="application/json",
    )
    def member_policy(member: str) -> str:
        policy = app.policies.resolve(member)
        if policy is None:
            raise ResourceError(
                f"unknown member {member!r}; known: {', '.join(app.policies.members)}"
            )
        return json.dumps(_policy_view(policy), ensure_ascii=False, indent=2)

    @server.resource(
        "lingyi://log/recent",
        name="recent-verifications",
        description=f"The last {RECENT_LOG_RECORDS} verification records of the log.",
        mime_type="application/json",
    )
    def recent_log() -> str:
        return json.dumps(recent_records(app.config.log_path), ensure_ascii=False, indent=2)

    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        """Member names for lingyi://policy/{member}: ids, display names and aliases."""
        if not isinstance(ref, ResourceTemplateReference) or argument.name != "member":
            return None
        names = [n for m in app.policies.members.values() for n in m.names]
        return Completion(values=[n for n in names if n.lower().startswith(argument.value.lower())])

    server.completion()(complete)  # type: ignore[no-untyped-call]  # the SDK leaves it untyped


def _policy_view(policy: MemberPolicy) -> dict[str, Any]:
    return {
        "member": policy.id,
        "name": policy.name,
        "aliases": policy.aliases,
        "description": policy.description,
        "tools": {n: t.model_dump(exclude_none=True) for n, t in policy.tools.items()},
        "checks": [c.model_dump(mode="json", exclude_none=True) for c in policy.checks],
    }


def recent_records(path: Path, count: int = RECENT_LOG_RECORDS) -> list[dict[str, Any]]:
    """The last ``count`` readable records, oldest first (a torn last line is skipped)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return []
    records = []
    for raw in data.splitlines()[-count - 1 :]:
        try:
            records.append(json.loads(raw))
        except ValueError:  # a partial first line of the window, or a torn last one
            continue
    return [r for r in records if isinstance(r, dict)][-count:]


def _add_optional(server: MCPServer[ConnectionScope], app: GuardApp) -> None:
    """Figures and the weekly report, when the stats and report modules are installed."""
    if stats_for := _optional("lingyi.stats", "stats_for"):
        _add_stats_tool(server, app, stats_for)
    if weekly_report := _optional("lingyi.report", "weekly_report_markdown"):
        _add_report_resource(server, app, weekly_report)


def _optional(module: str, name: str) -> Callable[..., Any] | None:
    """``module.name`` if that module is installed (another part of lingyi may not be yet)."""
    try:
        found: Callable[..., Any] | None = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return found


def _add_stats_tool(
    server: MCPServer[ConnectionScope], app: GuardApp, stats_for: Callable[..., dict[str, Any]]
) -> None:
    async def verification_stats(days: int = 7, member: str | None = None) -> dict[str, Any]:
        """Verification figures over the last ``days`` days (optionally for one member)."""
        return await anyio.to_thread.run_sync(
            lambda: stats_for(app.config, days=days, member=member)
        )

    server.add_tool(
        verification_stats,
        name="verification_stats",
        title="Verification figures",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )


def _add_report_resource(
    server: MCPServer[ConnectionScope], app: GuardApp, report: Callable[..., str]
) -> None:
    @server.resource(
        "lingyi://report/weekly",
        name="weekly-report",
        description="The weekly verification report of the last full week (Markdown).",
        mime_type="text/markdown",
    )
    def weekly_report() -> str:
        return report(app.config)


# --- transports -----------------------------------------------------------------------------


async def _stop_on_signal(app: GuardApp) -> None:
    """On SIGTERM/SIGINT: let running tool work finish (its log record and commit are
    whole), then exit. The SDK's stdin reader blocks in a thread that cancellation cannot
    interrupt, so we leave with ``os._exit``; every log record is already on disk (one
    ``write`` per record), so nothing written is lost."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.warning("signal received; finishing running tool calls", signal=signum)
            drained = await anyio.to_thread.run_sync(app.drain, DRAIN_TIMEOUT_S)
            app.close()
            sys.stderr.flush()
            os._exit(0 if drained else 1)


async def _serve_stdio(app: GuardApp, server: MCPServer[ConnectionScope]) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, app)
        await server.run_stdio_async()  # returns when the client closes stdin
        tg.cancel_scope.cancel()


def serve_stdio(config: Config, *, bench: bool | None = None) -> None:
    """Serve one client over stdio until it leaves or a signal arrives."""
    app = GuardApp(config)
    try:
        anyio.run(_serve_stdio, app, build_server(app, bench=bench))
    finally:
        app.close()


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


def http_app(app: GuardApp, host: str, port: int, *, bench: bool | None = None) -> Starlette:
    """The Starlette app for Streamable HTTP (tokens and Host/Origin checks applied)."""
    tokens = StaticTokens(app.config.raw.server.tokens)
    if not is_loopback(host) and not tokens:
        raise ConfigError(
            f"refusing to serve HTTP on {host}: not loopback and no [[server.tokens]] with a value"
        )
    server = build_server(app, bench=bench, tokens=tokens or None)
    security = transport_security(app.config, host, port)
    return server.streamable_http_app(host=host, transport_security=security)


def serve_http(config: Config, host: str, port: int, *, bench: bool | None = None) -> None:
    """Serve Streamable HTTP at http://host:port/mcp; uvicorn stops cleanly on SIGTERM/SIGINT."""
    import uvicorn

    app = GuardApp(config)
    try:
        asgi = http_app(app, host, port, bench=bench)
        settings = uvicorn.Config(
            asgi, host=host, port=port, log_config=None, access_log=False, log_level="warning"
        )
        uvicorn.Server(settings).run()
    finally:
        app.close()
