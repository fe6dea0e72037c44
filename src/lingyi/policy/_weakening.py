"""What would weaken the guard: on reload against the running policies, at start against the
shipped ones.

A shared or boundary check dropped from a member, narrowed (its ``types`` or ``tools`` no
longer cover an input it ran on), softened (``on_fail``, or put in shadow), its ``on_error``
turned from fail to pass, or pointed at a lexicon with no terms; a tool no longer
``destructive`` or its ``approval`` relaxed; a judge rule taken away or softened
(:mod:`._judge_weakening`); a tool handed to another member (reload only). Each finding names
the file and key that did it, the members it touches, and its subject: the check's name,
``tools.<tool>``, or ``judge``, which is what ``[policies] allow_weakening`` names to let a
start make that change on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from lingyi.errors import PolicyError
from lingyi.models import AssertionType, OnFail, Stage
from lingyi.policy._judge_weakening import STRENGTH, Case, cases, judge_weakenings
from lingyi.policy._lexicon import lexicon_fields
from lingyi.policy._model import CheckEntry, MemberPolicy, PolicySet

Found = tuple[str, str, str, str]  # (file, key, what it would do, subject)
_RESTART = "refused: the last good policies stay (restart the server to apply it on purpose)"
_APPROVAL = {"never": 0, "uncertain": 1, "required": 2}


def weakenings(
    old: PolicySet, new: PolicySet, *, judge_on_fail: OnFail = OnFail.REJECT
) -> list[PolicyError]:
    """What a reload from ``old`` to ``new`` would take away from the guard, each naming the
    file and key that did it and the members it touches (empty: the reload may apply)."""
    merged = [
        PolicyError(where, key, f"the reload would {what} of {', '.join(members)}; {_RESTART}")
        for (where, key, what, _), members in findings(old, new, judge_on_fail).items()
    ]
    return merged + _new_owners(old, new)


def start_weakenings(
    shipped: PolicySet,
    loaded: PolicySet,
    allow: Sequence[str] = (),
    *,
    judge_on_fail: OnFail = OnFail.REJECT,
) -> list[PolicyError]:
    """What ``loaded`` takes away from the shipped policies, except the subjects the config
    allows (``[policies] allow_weakening``)."""
    here = _relocate(shipped, loaded)
    return [
        PolicyError(
            here(where),
            key,
            f"this would {what} of {', '.join(members)}, weaker than the shipped policies; "
            f"put it back, or name {subject!r} in [policies] allow_weakening of the config "
            "to make this change on purpose",
        )
        for (where, key, what, subject), members in findings(shipped, loaded, judge_on_fail).items()
        if subject not in allow
    ]


def _relocate(shipped: PolicySet, loaded: PolicySet) -> Callable[[str], str]:
    """A shipped file's path as the same file of the loaded folder (a judge rule removed is
    found in the shipped file; the fix is in the deployment's)."""
    if not shipped.members or not loaded.members:
        return str
    base = Path(next(iter(shipped.members.values())).source).parent
    ours = Path(next(iter(loaded.members.values())).source).parent

    def here(where: str) -> str:
        path = Path(where)
        return str(ours / path.relative_to(base)) if path.is_relative_to(base) else where

    return here


def findings(old: PolicySet, new: PolicySet, judge_on_fail: OnFail) -> dict[Found, list[str]]:
    """Every weakening from ``old`` to ``new``, with the members each touches."""
    found: dict[Found, list[str]] = {}
    for member_id, before in old.members.items():
        after = new.members.get(member_id)
        if after is None:  # a member removed is unknown from now on: rejected, not weaker
            continue
        judged = [(*f, "judge") for f in judge_weakenings(before, after, judge_on_fail)]
        items = _guarded_checks(old, new, before, after) + _tool_settings(before, after) + judged
        for item in items:
            found.setdefault(item, []).append(after.id)
    return found


def _tool_settings(before: MemberPolicy, after: MemberPolicy) -> list[Found]:
    """A tool no longer destructive, or its approval relaxed (required → never)."""
    found = []
    for name, was in before.tools.items():
        now = after.tools.get(name)
        if now is None:  # a tool removed is not served any more: not weaker
            continue
        subject = f"tools.{name}"
        if was.destructive and not now.destructive:
            what = f"make {name!r} no longer destructive"
            found.append((after.source, f"{subject}.destructive", what, subject))
        if _APPROVAL[now.approval] < _APPROVAL[was.approval]:
            what = f"relax the approval of {name!r} (approval {was.approval} → {now.approval})"
            found.append((after.source, f"{subject}.approval", what, subject))
    return found


def _strongest(
    member: MemberPolicy, old: PolicySet, inputs: list[Case]
) -> dict[str, dict[Case, int]]:
    """The shared and boundary checks of ``member``: for each, the inputs (type and tool) it
    runs on, with the strongest ``on_fail`` of its entries on each (a check may have several
    entries, e.g. ``pre.content`` with one length for answers and one for the rest)."""
    found: dict[str, dict[Case, int]] = {}
    for entry in _guarded(member, old):
        # A check put in shadow blocks nothing any more: as soft as a warning.
        strength = STRENGTH[OnFail.WARN if entry.shadow else entry.on_fail]
        runs = found.setdefault(entry.check, {})
        for case in inputs:
            if entry.applies(*case):
                runs[case] = max(runs.get(case, 0), strength)
    return found


def _guarded(member: MemberPolicy, old: PolicySet) -> list[CheckEntry]:
    return [e for e in member.checks if e.check in old.shared or e.stage is Stage.BOUNDARY]


def _guarded_checks(
    old: PolicySet, new: PolicySet, before: MemberPolicy, after: MemberPolicy
) -> list[Found]:
    """Each shared or boundary check of one member dropped, narrowed (no longer run on some
    type or tool it ran on), softened, failing open on error, or emptied of its terms."""
    inputs = cases(before, after)
    was, now = _strongest(before, old, inputs), _strongest(after, old, inputs)
    found = []
    for check, ran in sorted(was.items()):
        kind = "shared" if check in old.shared else "boundary"
        left = now.get(check, {})
        own = check in after.disabled  # the member's own entry replaced the shared one
        where = after.source if own else new.shared.get(check, after.source)
        if not left:
            where, key = _where_dropped(old, new, after, check)
            found.append((where, key, f"drop the {kind} check {check!r}", check))
        elif lost := [case for case in ran if case not in left]:
            what = f"narrow the {kind} check {check!r} ({_lost(lost)})"
            found.append((where, "checks", what, check))
        elif any(left[case] < strength for case, strength in ran.items()):
            found.append((where, "checks", f"soften the {kind} check {check!r}", check))
        elif _fails_closed(before, old, check) and not _fails_closed(after, old, check):
            what = f"turn the {kind} check {check!r} on_error fail → pass"
            found.append((where, "checks", what, check))
        elif (empty := _hollow(after, new, check)) and not _hollow(before, old, check):
            what = f"point the {kind} check {check!r} at an empty lexicon ({empty})"
            found.append((where, "checks", what, check))
    return found


def _fails_closed(member: MemberPolicy, old: PolicySet, check: str) -> bool:
    return any(e.on_error == "fail" for e in _guarded(member, old) if e.check == check)


def _hollow(member: MemberPolicy, policies: PolicySet, check: str) -> str | None:
    """The lexicon with no terms that every entry of ``check`` reads (None: some entry has
    terms to match), so the check runs and can never find anything."""
    entries = [e for e in member.checks if e.check == check]
    empty = [_empty_lexicon(e, policies) for e in entries]
    return empty[0] if entries and all(empty) else None


def _empty_lexicon(entry: CheckEntry, policies: PolicySet) -> str | None:
    for _, ref in lexicon_fields(entry.parsed):
        lexicon = policies.lexicons.get(ref)
        if lexicon is not None and not any(lexicon.groups.values()):
            return ref
    return None


def _lost(lost: list[Case]) -> str:
    """The inputs a narrowed check no longer runs on, by type (with the tools when only some
    calls of that type are lost), in the order of the types."""
    parts = []
    for type_ in AssertionType:
        tools = [tool for t, tool in lost if t is type_]
        if tools:
            calls = ", ".join(tool for tool in tools if tool is not None)
            parts.append(f"{type_.value} ({calls})" if None not in tools and calls else type_.value)
    return "no longer on " + "; ".join(parts)


def _where_dropped(
    old: PolicySet, new: PolicySet, after: MemberPolicy, check: str
) -> tuple[str, str]:
    """The file and key that dropped ``check``: the member's ``disable``, the shared file (its
    entries gone, or narrowed to inputs this member never sends), or the member's own checks."""
    if check in after.disabled:
        return after.source, "disable"
    return new.shared.get(check) or old.shared.get(check, after.source), "checks"


def _new_owners(old: PolicySet, new: PolicySet) -> list[PolicyError]:
    found = []
    for member in new.members.values():
        for tool in member.tools:
            before = old.tool_owner(tool)
            if before is not None and before.id != member.id:
                message = f"the reload would give {tool!r} to {member.id} (it was {before.id}'s)"
                found.append(PolicyError(member.source, f"tools.{tool}", f"{message}; {_RESTART}"))
    return found
