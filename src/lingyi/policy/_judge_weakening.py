"""What a reload would take away from the judge: a rule, its outcome, a signal's threshold.

The judge is compared case by case, as :mod:`lingyi.judge` picks its rule: for each member,
each kind of input (its type) and each tool of the member (or none), the rule that judges it
before and after the reload. A case that had a rule and has none (the judge falls back to the
default rubric, or to nothing for a destructive call), a softer ``on_fail``, a signal dropped
or a threshold loosened (``min`` lowered or gone, ``max`` raised or gone) is a weakening. A
criterion reworded is not: rubrics are prose, and changing one is ordinary upkeep.
"""

from __future__ import annotations

from itertools import product

from lingyi.models import AssertionType, OnFail
from lingyi.policy._judge import JudgeRule, Threshold, first_rule
from lingyi.policy._model import MemberPolicy

STRENGTH = {OnFail.REJECT: 2, OnFail.FALLBACK: 1, OnFail.WARN: 0}
Found = tuple[str, str, str]  # (file, key, what the reload would do)
_OWN_KINDS = {AssertionType.CONCLUSION: "conclusion", AssertionType.ANSWER: "answer"}
Case = tuple[AssertionType, str | None]  # an input: its type and the tool it calls (or none)
# Only an assertion carries a tool call; conclusions, answers and tasks never do.
_CALLING = (AssertionType.FACT, AssertionType.ACTION, AssertionType.COMMUNICATION)


def cases(before: MemberPolicy, after: MemberPolicy) -> list[Case]:
    """Every input a member may send, by type and tool (its tools before and after a reload)."""
    tools = sorted(set(before.tools) | set(after.tools))
    return [(t, None) for t in AssertionType] + list(product(_CALLING, tools))


def judge_weakenings(
    before: MemberPolicy, after: MemberPolicy, default_on_fail: OnFail
) -> list[Found]:
    """(file, key, what) for each judge rule of one member removed, softened or loosened."""
    destructive = {name for name, spec in before.tools.items() if spec.destructive}
    found: dict[Found, None] = {}
    for type_, tool in cases(before, after):
        was = _rule(before, type_, tool, destructive)
        if was is not None:
            now = _rule(after, type_, tool, destructive)
            found.update(dict.fromkeys(_compare(before, after, was, now, default_on_fail)))
    return list(found)


def _rule(
    member: MemberPolicy, type_: AssertionType, tool: str | None, destructive: set[str]
) -> JudgeRule | None:
    """The rule that judges this case (the pre-flight review first for a destructive tool)."""
    preflight = (
        first_rule(member.judge, "destructive", type_, tool) if tool in destructive else None
    )
    kind = _OWN_KINDS.get(type_, "assertion")
    return preflight or first_rule(member.judge, kind, type_, tool)


def _compare(
    before: MemberPolicy,
    after: MemberPolicy,
    was: JudgeRule,
    now: JudgeRule | None,
    default: OnFail,
) -> list[Found]:
    if now is None:
        return [(was.path, was.key, f"remove the judge rule {was.source!r}")]
    found = []
    old, new = was.on_fail or default, now.on_fail or default
    if STRENGTH[new] < STRENGTH[old]:
        what = f"soften the judge rule {now.source!r} (on_fail {old.value} → {new.value})"
        found.append((now.path, f"{now.key}.on_fail", what))
    if was.on_error == "fail" and now.on_error != "fail":
        what = f"let the judge rule {now.source!r} pass without a verdict (on_error fail → pass)"
        found.append((now.path, f"{now.key}.on_error", what))
    for name in was.signals:
        found += _signal(before, after, was, now, name)
    return found


def _signal(
    before: MemberPolicy, after: MemberPolicy, was: JudgeRule, now: JudgeRule, name: str
) -> list[Found]:
    """A signal the rule scored before: gone, or passing scores it used to fail."""
    if name not in now.signals:
        return [(now.path, f"{now.key}.signals", f"drop the judge signal {name!r}")]
    old, new = _limit(before, was, name), _limit(after, now, name)
    if not _looser(old, new):
        return []
    own = name in after.signals  # the member's [signals] table sets the threshold now
    where, key = (
        (after.source, f"signals.{name}") if own else (now.path, f"{now.key}.signals.{name}")
    )
    return [(where, key, f"loosen the judge signal {name!r} ({_show(old)} → {_show(new)})")]


def _limit(member: MemberPolicy, rule: JudgeRule, name: str) -> Threshold:
    """The threshold that applies: the member's own, else the rule's (lingyi.judge._plan)."""
    return member.signals.get(name) or rule.signals[name]


def _looser(old: Threshold, new: Threshold) -> bool:
    lower = old.min is not None and (new.min is None or new.min < old.min)
    higher = old.max is not None and (new.max is None or new.max > old.max)
    return lower or higher


def _show(limit: Threshold) -> str:
    parts = [
        f"min {limit.min}" if limit.min is not None else "",
        f"max {limit.max}" if limit.max is not None else "",
    ]
    return ", ".join(p for p in parts if p)
