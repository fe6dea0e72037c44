"""The task checks: an intent the policy declares, tools in their order, a task finished.

=======================  ============================================================
``task.intent_declared``  begin: the member's policy declares the intent (else the
                          closest one); end: a task is open in this session
``task.complete``         end: every tool the intent requires ran since it began
``task.order``            a tool the open intent says comes after others runs only
                          once they have (a release's git_push after its audit)
=======================  ============================================================
"""

from __future__ import annotations

from lingyi.checks._registry import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.policy.closest import closest
from lingyi.tasks._kind import active_task, called_since


class NoParams(CheckParams):
    pass


@register("task.intent_declared", NoParams)
def intent_declared(ctx: CheckContext, params: NoParams) -> Outcome:
    """begin: the intent is one the member's policy declares; end: a task is open."""
    payload = ctx.assertion.payload
    intent = str(payload.get("intent", ""))
    if payload.get("event") == "end":
        task = active_task(ctx.ledger.session(ctx.assertion.session))
        if task is None or (intent and intent != task["intent"]):
            return fail(ctx.msg("none_open", intent=intent or "-"), ctx.msg("none_open_hint"))
        return ok(ctx.msg("open", intent=task["intent"]), open=True, intent=task["intent"])
    spec = ctx.member.intents.get(intent)
    if spec is None:
        names = sorted(ctx.member.intents)
        near = closest(intent, names)
        problem = {"field": "intent", "kind": "enum", "value": intent, "allowed": names}
        hint = ctx.msg("hint", intents=", ".join(names) or "-")
        hint += ctx.msg("closest", intent=near) if near else ""
        return fail(ctx.msg("fail", intent=intent), hint, problems=[problem | {"closest": near}])
    return ok(ctx.msg("ok", intent=intent), requires=list(spec.requires), before=dict(spec.before))


@register("task.complete", NoParams)
def complete(ctx: CheckContext, params: NoParams) -> Outcome:
    """end: the tools the intent requires all ran in the session since the task began."""
    session = ctx.ledger.session(ctx.assertion.session)
    task = active_task(session)
    if ctx.assertion.payload.get("event") != "end" or task is None:
        return ok(ctx.msg("nothing"))
    called = called_since(session, task)
    missing = [t for t in task.get("requires", []) if t not in called]
    if not missing:
        return ok(ctx.msg("ok", intent=task["intent"]), called=called, missing=[])
    tools = ", ".join(missing)
    return fail(
        ctx.msg("fail", intent=task["intent"], tools=tools),
        ctx.msg("hint", tools=tools),
        called=called,
        missing=missing,
    )


@register("task.order", NoParams)
def order(ctx: CheckContext, params: NoParams) -> Outcome:
    """A tool the open task's intent says must follow others runs only after they ran."""
    call = ctx.assertion.tool_call
    session = ctx.ledger.session(ctx.assertion.session)
    task = active_task(session)
    first = task.get("before", {}).get(call.name, []) if task and call else []
    if not first or task is None or call is None:
        return ok(ctx.msg("free"))
    called = called_since(session, task)
    missing = [t for t in first if t not in called]
    if not missing:
        return ok(ctx.msg("ok", tool=call.name, intent=task["intent"]))
    tools = ", ".join(missing)
    return fail(
        ctx.msg("fail", tool=call.name, intent=task["intent"], tools=tools),
        ctx.msg("hint", tools=tools, tool=call.name),
        missing=missing,
        intent=task["intent"],
    )
