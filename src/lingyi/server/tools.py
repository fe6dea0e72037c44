"""The tool table, built from the policies (the real work is in :mod:`.executors`).

Every guarded tool is published with its policy's title, description, hints and argument
schema (:func:`lingyi.policy.input_schema`: enums of data sources, domains and members, ranges,
patterns, ``additionalProperties: false``). The SDK does not validate or coerce the arguments:
each tool is registered with :class:`RawArguments`, so the raw arguments reach the guard, whose
``tool.args_schema`` validates them with the same schema. ``limit: "lots"``, ``limit: 500`` and
an unknown argument are therefore verified, logged and answered with a verdict like any call.

The guard's own tools (``verify_assertion``, the council tools, ``verification_stats``) are
described as :class:`~lingyi.policy.ToolSpec` here, so their schemas come from the same
generator; arguments that cannot form an assertion are refused with the same wording, and the
member (and tool) named are judged by the guard itself (``member.known``, ``tool.owned``).

At start-up the policies' tools and the implemented tools must match (:func:`tool_problems`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import tomllib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from importlib import resources
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, ValidationError

from lingyi import approvals
from lingyi._logging import get_logger
from lingyi._validation import problems
from lingyi.approvals.tool import ApprovalAnswer, approve_tool
from lingyi.checks.tool import describe_problems
from lingyi.errors import BackendError, ConfigError, LingyiError, LogError
from lingyi.kinds import input_assertion, kind_of
from lingyi.models import Assertion, AssertionType, Decision, Evidence, ToolCall
from lingyi.policy import (
    ArgProblem,
    PolicySet,
    Registries,
    ToolSpec,
    arg_problems,
    input_schema,
)
from lingyi.server.app import Caller, Ctx, Executor, GuardApp, Run, caller_of
from lingyi.server.executors import IMPLEMENTATIONS, Implementation
from lingyi.server.notifications import notify
from lingyi.server.schemas import flat_schema, model_key, schema_file, shipped_schema
from lingyi.server.wire import (
    AnswerOutputs,
    Guarded,
    PostedMessage,
    Reply,
    TaskOutputs,
    Verdict,
    Verification,
    log_failure,
    refusal,
    success,
    verdict_of,
)

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

    from lingyi.gateway import Gateway, ServedTool, UpstreamResult

log = get_logger()

GUARD_NOTE = (
    "Guarded by LingYi Guard: verified before it runs and logged. A rejection returns an "
    "error whose structured verdict says why (codes, reason) and what to do instead "
    "(recommendation, fallback)."
)
ARGS_CODE = "tool.args_schema"
# Named in the guard's own tools, judged (and logged) by the guard: member.known, tool.owned.
GUARD_JUDGES = ("member", "tool_name")

ToolFn = Callable[[Ctx, dict[str, Any]], Awaitable[CallToolResult | InputRequiredResult]]


class RawArguments(ArgModelBase):
    """The SDK's argument model for every tool here: it takes the arguments as given.

    No field is declared, so the SDK neither pre-parses, validates nor coerces anything; every
    argument is an extra, and the tool function receives them all as ``arguments``.
    """

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.model_extra or {})}


# --- the guard's own tools ------------------------------------------------------------------


@functools.cache
def _own_specs() -> dict[str, ToolSpec]:
    text = (resources.files(__package__) / "guard_tools.toml").read_text(encoding="utf-8")
    return {name: ToolSpec.model_validate(raw) for name, raw in tomllib.loads(text).items()}


def own_tools(policies: PolicySet) -> dict[str, ToolSpec]:
    """The guard's own tools (``guard_tools.toml``); ``tool_name`` lists the policies' tools."""
    specs = _own_specs()
    names = sorted({t for m in policies.members.values() for t in m.tools})
    verify = specs["verify_assertion"]
    tool_name = verify.args["tool_name"].model_copy(update={"values": names})
    args = verify.args | {"tool_name": tool_name}
    return specs | {"verify_assertion": verify.model_copy(update={"args": args})}


def _refused_arguments(
    app: GuardApp, spec: ToolSpec, problems: list[ArgProblem], arguments: dict[str, Any]
) -> Verdict:
    """A verdict for arguments that form no assertion: nothing was verified or logged."""
    reason, hint = describe_problems(app.config.language, problems, spec)
    return Verdict(
        verification_id=None,
        member=str(arguments.get("member", "")),
        decision="rejected",
        codes=[ARGS_CODE],
        reason=f"[{ARGS_CODE}] {reason}",  # worded as the guard words a failed check
        recommendation=hint,
        argument_problems=[{k: v for k, v in asdict(p).items() if v is not None} for p in problems],
    )


class ToolTable:
    """The served tools, built from the current policies and refreshed when they change."""

    def __init__(self, app: GuardApp) -> None:
        self.app = app
        self._version = ""
        self._tools: dict[str, Tool] = {}
        self._validators: dict[tuple[str, str], Draft202012Validator] = {}
        self._generation = 0  # the gateway's listing the table has entries for
        self._build()

    @property
    def registries(self) -> Registries:
        return Registries.of(self.app.policies, sorted(self.app.config.raw.data_sources))

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def _build(self) -> None:
        policies = self.app.policies
        for name, impl in IMPLEMENTATIONS.items():
            owner = policies.tool_owner(name)
            spec = owner.tools[name] if owner else ToolSpec()
            self._tools[name] = self._tool(name, spec, _guarded(name, impl.execute), impl.output)
        for name, spec in own_tools(policies).items():
            bind, output = _OWN[name]
            self._tools[name] = self._tool(name, spec, bind(self), output, own=True)
        self._add_upstream_tools(policies)

        self._version = policies.version

    def _add_upstream_tools(self, policies: PolicySet) -> None:
        """Every listed upstream tool gets an entry; tools/list shows only the served ones
        (a policy owns it, for a member the upstream allows, bound to the caller's token)."""
        gateway = self.app.gateway
        self._generation = gateway.generation if gateway else 0
        for name, served in (gateway.listing() if gateway else {}).items():
            self._tools[name] = self._upstream_tool(policies, name, served)

    def _upstream_tool(self, policies: PolicySet, name: str, served: ServedTool) -> Tool:
        from lingyi.gateway import UpstreamResult  # loaded with the gateway (upstreams only)
        from lingyi.gateway.merge import merged_spec

        owner = policies.tool_owner(name)
        spec = owner.tools[name] if owner else merged_spec(ToolSpec(), served.tool)
        return self._tool(name, spec, _guarded(name, _upstream(name)), Guarded[UpstreamResult])

    def sync(self) -> list[Tool]:
        """Entries for the upstream tools listed since the table last looked (the new ones).

        A tool an upstream removed keeps its entry: a call to it reaches the guard, which
        rejects it (and logs that) like a call to any tool no one owns. Cheap when nothing
        changed (one counter), so every tools/list and tools/call may ask.
        """
        gateway = self.app.gateway
        if gateway is None or gateway.generation == self._generation:
            return []
        self._generation = gateway.generation
        policies, new = self.app.policies, []
        for name, served in gateway.listing().items():
            if name not in self._tools:
                self._tools[name] = self._upstream_tool(policies, name, served)
                new.append(self._tools[name])
        return new

    def served(self) -> str:
        """A digest of what a caller with no token is served: the names and what tools/list
        shows of each. It changes exactly when the list the clients see changes."""
        self.refresh()
        parts = []
        for name in sorted(self.listed(None)):
            tool = self._tools[name]
            hints = tool.annotations.model_dump() if tool.annotations else None
            parts.append([name, tool.title, tool.description, tool.parameters, hints])
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def listed(self, members: tuple[str, ...] | None) -> set[str]:
        """The tools a caller sees: everything but upstream tools not served, and tools
        owned by members its token is not bound to (``None``: no token, every member)."""
        policies, gateway = self.app.policies, self.app.gateway
        bound = {m.id for n in members or () if (m := policies.resolve(n))}
        shown = set()
        for name in self._tools:
            owner = policies.tool_owner(name)
            if gateway and gateway.is_upstream(name) and gateway.owner(policies, name) is None:
                continue
            if members and owner is not None and owner.id not in bound:
                continue
            shown.add(name)
        return shown

    def _tool(
        self, name: str, spec: ToolSpec, fn: ToolFn, output: Any, *, own: bool = False
    ) -> Tool:
        # Published flat (cheaper for every client to validate), and not validated again by the
        # SDK: the result was built from these very models (lingyi.server.wire).
        meta = FuncMetadata(arg_model=RawArguments, output_schema=output_schema(output))
        return Tool(
            fn=fn,
            name=name,
            fn_metadata=meta,
            is_async=True,
            context_kwarg="ctx",
            **self._described(name, spec, own=own),
        )

    def _described(self, name: str, spec: ToolSpec, *, own: bool) -> dict[str, Any]:
        """What tools/list shows of a tool, all of it from its spec (the policy's, or ours)."""
        hints = ToolAnnotations(
            title=spec.title or name,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            open_world_hint=spec.open_world,
        )
        return {
            "title": spec.title or name,
            "description": spec.description if own else f"{spec.description}\n\n{GUARD_NOTE}",
            "parameters": input_schema(spec, self.registries),
            "annotations": hints,
        }

    def refresh(self) -> None:
        """After a policy reload, publish the reloaded titles, hints and schemas."""
        policies = self.app.policies
        if policies.version == self._version:
            return
        own = own_tools(policies)
        for name, tool in self._tools.items():
            owner = policies.tool_owner(name)
            spec = own.get(name) or (owner.tools[name] if owner else None)
            if spec is not None:
                for key, value in self._described(name, spec, own=name in own).items():
                    setattr(tool, key, value)
        self._validators.clear()
        self._version = policies.version

    def problems(self, name: str, arguments: dict[str, Any]) -> tuple[ToolSpec, list[ArgProblem]]:
        """What is wrong with the arguments of one of the guard's own tools."""
        policies = self.app.policies
        spec = own_tools(policies)[name]
        key = (policies.version, name)
        if (validator := self._validators.get(key)) is None:
            from jsonschema import Draft202012Validator  # ~50 ms: on the first call, not start

            validator = self._validators[key] = Draft202012Validator(
                input_schema(spec, self.registries)
            )
        found = arg_problems(validator, arguments, spec)
        return spec, [p for p in found if not (p.field in GUARD_JUDGES and p.kind == "enum")]


def _upstream(name: str) -> Executor:
    """An upstream tool's work: forward the approved call through the gateway."""

    def execute(run: Run) -> tuple[UpstreamResult, list[Evidence]]:
        if run.app.gateway is None:  # cannot happen: the tool is only built with a gateway
            raise BackendError(f"{name}: no gateway")
        return run.app.gateway.call(run.app.policies, name, run.owner.id, run.args)

    return execute


def _guarded(name: str, execute: Executor) -> ToolFn:
    async def call(ctx: Ctx, arguments: dict[str, Any]) -> CallToolResult | InputRequiredResult:
        app = ctx.request_context.lifespan_context.app
        caller = caller_of(ctx.request_context)
        approvals.offer(ctx)  # the gate may ask the person (elicitation)
        # One worker thread runs verify → execute → record: a cancelled request (client gone,
        # SIGTERM) waits for it, so nothing is half done and no written record is lost.
        try:
            reply = await app.in_thread(app.run_tool, caller, name, arguments, execute)
        except LogError as exc:  # nothing ran: the record comes first
            reply = _unlogged(app, name, arguments, exc, wrap=True)
        await notify(ctx, caller, name, reply)
        return approvals.input_required() or reply.result  # the person is asked (2026-07-28)

    return call


Work = Callable[[GuardApp, Caller, dict[str, Any]], Reply]


def _own_tool(name: str, work: Work, wrap: bool) -> Callable[[ToolTable], ToolFn]:
    """One of the guard's own tools: check its arguments, then verify (and log) in a thread."""

    def bind(table: ToolTable) -> ToolFn:
        async def call(ctx: Ctx, arguments: dict[str, Any]) -> CallToolResult:
            app, caller = table.app, caller_of(ctx.request_context)
            spec, problems = table.problems(name, arguments)
            if problems:
                verdict = _refused_arguments(app, spec, problems, arguments)
                reply = refusal(Guarded(verdict=verdict) if wrap else verdict)
            else:
                try:
                    reply = await app.in_thread(work, app, caller, arguments)
                except LogError as exc:  # nothing was posted: the record comes first
                    reply = _unlogged(app, name, arguments, exc, wrap=wrap)
            await notify(ctx, caller, name, reply)
            return reply.result

        return call

    return bind


def _unlogged(
    app: GuardApp, tool: str, arguments: dict[str, Any], exc: LogError, *, wrap: bool
) -> Reply:
    """The answer when a verification could not be logged: the operator is told on stderr,
    the client gets an error result naming the log; the server goes on serving."""
    log.error("log.unwritable", tool=tool, error=str(exc))
    owner = app.policies.tool_owner(tool)
    member = owner.id if owner else str(arguments.get("member", ""))
    return log_failure(app.config.language, member, str(exc), wrap=wrap)


def _verify(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
    tool = args.get("tool_name")
    call = ToolCall(name=tool, arguments=args.get("tool_arguments") or {}) if tool else None
    assertion = Assertion(
        member=args["member"],
        type=AssertionType(args["type"]),
        content=args.get("content", ""),
        evidence_ids=args.get("evidence_ids") or [],
        tool_call=call,
    )
    return app.verify_only(caller, assertion)


def _conclude(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
    """A conclusion through the one layer; its route and feedback ride on the verdict."""
    kind = kind_of(AssertionType.CONCLUSION.value)
    if kind is None:  # the package is part of lingyi: only a broken install gets here
        raise LingyiError("the conclusion kind is not installed")
    try:
        assertion = kind.assertion(args)
    except ValueError as exc:  # only a shape no check could read: refused, nothing verified
        return refusal(_input_refused(app, args, str(exc)))
    return app.verify_only(caller, assertion)


def _input_refused(app: GuardApp, args: dict[str, Any], problem: str) -> Verdict:
    return Verdict(
        verification_id=None,
        member=str(args.get("member", "")),
        decision="rejected",
        codes=[ARGS_CODE],
        reason=f"[{ARGS_CODE}] {problem}",
        recommendation=_own_specs()["verify_conclusion"].args["conclusion"].description,
    )


def _screen(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
    assertion = Assertion(
        member=args["member"], type=AssertionType.COMMUNICATION, content=args["content"]
    )
    return app.verify_only(caller, assertion)


def _answer(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
    """verify_answer: the answer kind's outputs (sources, gate, gaps) are the tool's result."""
    from lingyi.answers import ANSWER

    try:
        assertion = ANSWER.assertion(args)
    except ValueError as exc:  # what the schema cannot say (a member named by spaces)
        return _unformed(args, exc)
    result = app.check(caller, assertion)
    verdict = verdict_of(result, str(args["member"]))
    outputs = AnswerOutputs.model_validate(result.outputs)
    answered = Guarded[AnswerOutputs](verdict=verdict, result=outputs)
    return refusal(answered) if result.decision is Decision.REJECTED else success(answered)


def _task(event: str) -> Work:
    """begin_task / end_task: the task's outputs (intent, complete, missing) are the result."""

    def work(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
        from lingyi.tasks._kind import task_assertion

        try:
            assertion = task_assertion(args, event)
        except ValueError as exc:
            return _unformed(args, exc)
        result = app.check(caller, assertion)
        done = Guarded[TaskOutputs](
            verdict=verdict_of(result, str(args["member"])),
            result=TaskOutputs.model_validate(result.outputs),
        )
        return refusal(done) if result.decision is Decision.REJECTED else success(done)

    return work


def _unformed(args: dict[str, Any], exc: ValueError) -> Reply:
    """Arguments that form no input of their kind: refused in our words, nothing verified."""
    verdict = Verdict(
        verification_id=None,
        member=str(args.get("member", "")),
        decision="rejected",
        codes=[ARGS_CODE],
        reason=f"[{ARGS_CODE}] {exc}",
    )
    return refusal(Guarded(verdict=verdict))


def _verify_input(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
    """verify: one input as ``lingyi verify`` takes it; the whole verification is the result."""
    given = args["input"]
    try:
        assertion = input_assertion(given)
    except ValidationError as exc:  # worded as `lingyi verify --stdin` words it
        found = "; ".join(f"input.{p.key}: {p.message}" for p in problems(exc, Assertion))
        return _unformed(given, ValueError(found))
    except ValueError as exc:  # an input no kind can read: refused, nothing verified
        return _unformed(given, exc)
    try:
        result = app.check(caller, assertion)
    finally:
        if caller.once:  # a stateless request is a session of its own
            app.end_session(caller.session, "request")
    verdict = verdict_of(result, assertion.member)
    done = Guarded[Verification](verdict=verdict, result=Verification.of(result))
    return refusal(done) if result.decision is Decision.REJECTED else success(done)


def _post(app: GuardApp, caller: Caller, args: dict[str, Any]) -> Reply:
    return app.post(caller, args["member"], args["content"])


def _stats_tool(table: ToolTable) -> ToolFn:
    async def call(ctx: Ctx, arguments: dict[str, Any]) -> CallToolResult:
        from lingyi.report import weekly_stats  # the figures load only when asked for
        from lingyi.stats import stats_for

        app = table.app
        spec, problems = table.problems("verification_stats", arguments)
        if problems:
            reason, hint = describe_problems(app.config.language, problems, spec)
            return _error({"error": reason, "recommendation": hint})
        member = app.policies.resolve(arguments.get("member") or "")
        days, week = arguments.get("days", 7), arguments.get("week")
        who = member.id if member else None
        try:
            figures = await app.in_thread(
                lambda: (
                    weekly_stats(app.config, week, member=who)
                    if week
                    else stats_for(app.config, days=days, member=who)  # the index: cheap
                )
            )
        except LingyiError as exc:  # the log cannot be read: say so, keep serving
            return _error({"error": str(exc)})
        figures = {**figures, "ledger": app.ledger.stats()}  # this server's, not the log's
        return CallToolResult(content=_json_text(figures), structured_content=figures)

    return call


# The guard's own tools: how each binds to the table, and the model of its result.
_OWN: dict[str, tuple[Callable[[ToolTable], ToolFn], Any]] = {
    "verify_assertion": (_own_tool("verify_assertion", _verify, wrap=False), Verdict),
    "screen_council_message": (_own_tool("screen_council_message", _screen, wrap=False), Verdict),
    "verify_conclusion": (_own_tool("verify_conclusion", _conclude, wrap=False), Verdict),
    "post_council_message": (
        _own_tool("post_council_message", _post, wrap=True),
        Guarded[PostedMessage],
    ),
    "verification_stats": (_stats_tool, dict[str, Any]),
    "verify_answer": (_own_tool("verify_answer", _answer, wrap=True), Guarded[AnswerOutputs]),
    "begin_task": (_own_tool("begin_task", _task("begin"), wrap=True), Guarded[TaskOutputs]),
    "end_task": (_own_tool("end_task", _task("end"), wrap=True), Guarded[TaskOutputs]),
    "approve_call": (approve_tool, ApprovalAnswer),
    "verify": (_own_tool("verify", _verify_input, wrap=True), Guarded[Verification]),
}


def _json_text(data: Mapping[str, Any]) -> list[TextContent]:
    return [TextContent(type="text", text=json.dumps(data, ensure_ascii=False))]


def _error(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=_json_text(data), structured_content=data, is_error=True)


# --- output schemas: shipped, derived only for a model the shipped file does not have -----


def output_schema(model: Any) -> dict[str, Any]:
    """The schema published for results of ``model``: the shipped one, else derived now."""
    shipped = shipped_schema(model)
    return shipped if shipped is not None else derived_schema(model)


def derived_schema(model: Any) -> dict[str, Any]:
    """What the SDK derives for ``model`` (pydantic's generator), published flat."""
    derived = FuncMetadata(arg_model=RawArguments, output_model=model).output_schema
    return flat_schema(derived or {})


def output_models() -> list[Any]:
    """The output model of every tool the guard itself serves (each once): what is shipped.
    An upstream's tools have ``Guarded[UpstreamResult]``."""
    from lingyi.gateway import UpstreamResult

    models = [i.output for i in IMPLEMENTATIONS.values()]
    models += [out for _, out in _OWN.values()] + [Guarded[UpstreamResult]]
    return list(dict.fromkeys(models))


def schemas_file() -> str:
    """The shipped file's text as the models derive it now (``python tests/test_docs.py``)."""
    return schema_file({str(model_key(m)): derived_schema(m) for m in output_models()})


# --- served tools and policy tools must match --------------------------------------------


def tool_problems(policies: PolicySet, upstreams: tuple[str, ...] = ()) -> list[str]:
    """Every mismatch between the policies' tools and the implemented ones, naming both.

    ``upstreams``: the configured upstream names; their tools (``<name>.<tool>``) are
    served by the gateway, which reports its own mismatches (:func:`upstream_problems`).
    """
    own = own_tools(policies)
    problems: list[str] = []
    for member in policies.members.values():
        for name, spec in member.tools.items():
            where = f"{member.source}: tools.{name}"
            impl = IMPLEMENTATIONS.get(name)
            if name.split(".", 1)[0] in upstreams and "." in name:
                continue
            if name in own:
                problems.append(
                    f"{where}: {name} is one of the guard's own tools; no policy may declare it"
                )
            elif impl is None:
                served = ", ".join(IMPLEMENTATIONS)
                problems.append(
                    f"{where}: the policy of {member.id} declares {name}, which no implementation serves (served: {served})"
                )
            else:
                problems += _arg_mismatch(where, spec, impl)
    declared = {t for m in policies.members.values() for t in m.tools}
    problems += [
        f"{name}: served, but no member policy declares it (add [tools.{name}] to the policy of the member that owns it)"
        for name in IMPLEMENTATIONS
        if name not in declared
    ]
    return problems


def _arg_mismatch(where: str, spec: ToolSpec, impl: Implementation) -> list[str]:
    unknown = sorted(set(spec.args) - impl.args)
    optional = sorted(a for a in impl.required if a in spec.args and not spec.args[a].required)
    missing = sorted(impl.required - set(spec.args))
    found = [f"{where}.args.{a}: the implementation reads no argument {a!r}" for a in unknown]
    found += [f"{where}.args.{a}: the implementation needs it; mark it required" for a in optional]
    found += [f"{where}.args: the implementation needs {a!r}; declare it" for a in missing]
    return found


def upstream_problems(policies: PolicySet, gateway: Gateway) -> list[str]:
    """Upstream tools no policy mentions (not served), and policies of upstream tools the
    upstream does not list or whose arguments it does not declare."""
    from lingyi.gateway.merge import unknown_policy_args

    found = [
        f"{name}: listed by its upstream, but no member policy mentions it, so it is not served"
        for name in gateway.unowned(policies)
    ]
    prefixes = {f"{n}." for n in gateway.connections}
    for member in policies.members.values():
        for name, spec in member.tools.items():
            if not any(name.startswith(p) for p in prefixes):
                continue
            where = f"{member.source}: tools.{name}"
            served = gateway.tools.get(name)
            if served is None:
                found.append(f"{where}: its upstream does not list this tool (or is unavailable)")
                continue
            found += [
                f"{where}.args.{a}: the upstream tool declares no argument {a!r}"
                for a in unknown_policy_args(spec, served.tool)
            ]
    return found


def check_tools(policies: PolicySet, upstreams: tuple[str, ...] = ()) -> None:
    """Refuse to serve when the policies and the implementations disagree."""
    if problems := tool_problems(policies, upstreams):
        raise ConfigError(
            "the policies and the served tools do not match:\n  " + "\n  ".join(problems)
        )
