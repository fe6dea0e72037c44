"""Typed member policies: the tools a member owns and the checks it runs."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from lingyi.checks import CheckParams
from lingyi.models import AssertionType, OnFail, Stage
from lingyi.policy._judge import JudgeRule, Threshold
from lingyi.policy._lexicon import Lexicon


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ArgType = Literal[
    "string",
    "enum",
    "integer",
    "number",
    "boolean",
    "version",
    "path",
    "data_source",
    "member",
    "list",
    "object",
    "date",  # YYYY-MM-DD; not_past and max_days_ahead say which dates are valid (UTC today)
]


class ArgSpec(_Strict):
    type: ArgType = "string"
    required: bool = False
    description: str = ""
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    values: list[str] | None = None  # enum values; for a list, the values its items may take
    min: float | None = None
    max: float | None = None
    roots: Literal["repos", "data"] | None = None
    must_exist: bool = True
    git_repo: bool = False
    not_past: bool = False  # a date: today or later
    max_days_ahead: int | None = Field(None, ge=0)  # a date: at most this many days from today
    # The argument's JSON Schema as an upstream MCP server declares it: set by the gateway for
    # the upstream's arguments a policy leaves unconstrained (the policy's own args win).
    json_schema: dict[str, Any] | None = None


class ToolSpec(_Strict):
    title: str = ""  # a short human title for MCP clients (tools/list)
    description: str = ""
    read_only: bool = False
    destructive: bool = False
    open_world: bool = False  # talks to systems beyond this machine (a push to a remote)
    # A person approves the call first (lingyi.approvals): always, or only when a check or the
    # judge could not decide ("uncertain"); "never" leaves it to [approvals] destructive.
    approval: Literal["never", "required", "uncertain"] = "never"
    args: dict[str, ArgSpec] = Field(default_factory=dict)


Mode = Literal["enforce", "shadow"]


class CheckEntry(_Strict):
    check: str
    stage: Stage
    on_fail: OnFail = OnFail.REJECT
    # "shadow": the check runs and its failure is logged with the decision enforcing it would
    # have made, while the call proceeds as if it were ``warn``. Unset: the file's ``mode``.
    mode: Mode | None = None
    on_error: Literal["pass", "fail"] = "fail"
    # When the check answers "uncertain" (neither a match nor a contradiction): let the judge
    # decide, or count it as a pass, a failure (with on_fail) or a warning.
    on_uncertain: Literal["judge", "pass", "fail", "warn"] = "fail"
    types: list[AssertionType] | None = None
    tools: list[str] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    _parsed: CheckParams = PrivateAttr()

    @property
    def parsed(self) -> CheckParams:
        return self._parsed

    def attach(self, params: CheckParams) -> None:
        """Give the entry its parameters, validated against its check's (the loader's job)."""
        self._parsed = params

    @property
    def shadow(self) -> bool:
        return self.mode == "shadow"

    def applies(self, type_: AssertionType, tool: str | None) -> bool:
        if self.types is not None and type_ not in self.types:
            return False
        return self.tools is None or tool in self.tools


class IntentSpec(_Strict):
    """A task a member may declare (``begin_task``) and what finishing it takes.

    ``requires``: tools that must have run in the session before ``end_task`` reports the task
    complete. ``before``: per tool, the tools that must have run first (a ``git_push`` of a
    release only after ``generate_audit_report``); a call out of order is rejected.
    """

    description: str = ""
    requires: list[str] = Field(default_factory=list)
    before: dict[str, list[str]] = Field(default_factory=dict)


class _MemberFile(_Strict):
    member: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    # Words that hold an alias and are no name (小通道 holds 小通): never read as the member.
    not_names: list[str] = Field(default_factory=list)
    description: str = ""
    language: Literal["zh", "en"] | None = None
    tools: dict[str, ToolSpec] = Field(default_factory=dict)
    checks: list[CheckEntry] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)
    judge: list[JudgeRule] = Field(default_factory=list)  # where the judge runs (issue 13)
    # This member's thresholds for signals its judge rules (own or shared) score.
    signals: dict[str, Threshold] = Field(default_factory=dict)
    intents: dict[str, IntentSpec] = Field(default_factory=dict)  # tasks it may declare
    mode: Mode = "enforce"  # "shadow": every check of this file (not the shared ones) in shadow


class _CommonFile(_Strict):
    description: str = ""
    checks: list[CheckEntry] = Field(default_factory=list)
    judge: list[JudgeRule] = Field(default_factory=list)
    mode: Mode = "enforce"  # "shadow": every check of this shared file in shadow


class MemberPolicy(BaseModel):
    id: str
    name: str
    aliases: list[str]
    not_names: list[str] = Field(default_factory=list)
    description: str
    language: str | None
    tools: dict[str, ToolSpec]
    checks: list[CheckEntry]
    source: str
    disabled: list[str] = Field(default_factory=list)  # shared checks this member replaced
    # The member's own judge rules first, then the shared ones (see lingyi.judge for the order).
    judge: list[JudgeRule] = Field(default_factory=list)
    signals: dict[str, Threshold] = Field(default_factory=dict)  # thresholds it overrides
    intents: dict[str, IntentSpec] = Field(default_factory=dict)  # lingyi.tasks

    @cached_property
    def names(self) -> list[str]:
        """Every way text may refer to this member (id, display name, aliases).

        Computed once: checks ask for it on every call, and a loaded policy never changes
        (a reload builds new policy objects)."""
        return list(dict.fromkeys([self.id, self.name, *self.aliases]))


Unserved = Literal["removed", "withheld", "not_listed", "not_member"]


class UnservedTool(BaseModel):
    """An upstream tool a policy owns that the gateway does not serve now, and why."""

    owner: str  # the member whose policy owns it
    reason: Unserved


class PolicySet(BaseModel):
    members: dict[str, MemberPolicy]
    aliases: dict[str, str]
    version: str
    lexicons: dict[str, Lexicon] = Field(default_factory=dict)  # by the reference checks use
    shared: dict[str, str] = Field(default_factory=dict)  # shared check name → its _*.toml file
    # Filled by the gateway (lingyi.gateway): left out of ``members``, named here so that a
    # call to one is judged for its owner and refused saying why (tool.owned).
    unserved: dict[str, UnservedTool] = Field(default_factory=dict)

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Every name of every member (ids, display names, aliases): canonical text re-joins
        them when a model splits them (灵 通, Ling-Flow). Computed once per loaded set (a
        plain attribute afterwards: a private attribute is a slow lookup on every call)."""
        return tuple(dict.fromkeys(n for m in self.members.values() for n in m.names))

    @cached_property
    def not_names(self) -> tuple[str, ...]:
        """Words that hold a member's name and are none (小通道), from every policy."""
        return tuple(dict.fromkeys(n for m in self.members.values() for n in m.not_names))

    def lexicon(self, ref: str) -> Lexicon:
        found = self.lexicons.get(ref)
        if found is None:  # a check asked for a file its parameters did not name
            raise KeyError(f"lexicon {ref!r} was not loaded with the policies")
        return found

    def resolve(self, name: str) -> MemberPolicy | None:
        """The member for an id, display name or alias (case-insensitive), or None."""
        key = self.aliases.get(name.strip().lower())
        return self.members.get(key) if key else None

    def tool_owner(self, tool: str) -> MemberPolicy | None:
        return next((m for m in self.members.values() if tool in m.tools), None)
