"""The registry and the types every check shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict

from lingyi.models import Assertion, Evidence, Fallback

if TYPE_CHECKING:
    from lingyi.council import CouncilRecord
    from lingyi.ledger import Ledger
    from lingyi.policy import MemberPolicy, PolicySet, ToolSpec
    from lingyi.policy.schema import Registries


class CheckParams(BaseModel):
    """Base of every check's parameters; unknown keys are policy errors."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Outcome:
    passed: bool
    reason: str
    recommendation: str | None = None
    fallback: Fallback | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    degraded: bool = False
    found: tuple[Evidence, ...] = ()  # what an active lookup found (recorded as evidence)


def ok(reason: str, **detail: Any) -> Outcome:
    return Outcome(True, reason, detail=detail)


def fail(
    reason: str,
    recommendation: str | None = None,
    fallback: Fallback | None = None,
    **detail: Any,
) -> Outcome:
    return Outcome(False, reason, recommendation, fallback, detail)


@dataclass
class Services:
    """What checks may consult beyond the assertion: roots, registries, lookups."""

    repo_roots: list[Path] = field(default_factory=list)
    data_roots: list[Path] = field(default_factory=list)
    data_sources: list[str] = field(default_factory=list)
    trace_lookup: Callable[[str], bool] | None = None
    # Active verification: subject lookups by name (e.g. "knowledge_base" → search the KB).
    lookups: dict[str, Callable[[str], list[Evidence]]] = field(default_factory=dict)


@dataclass
class CheckContext:
    """Everything a check may read. Checks never write to any of it."""

    assertion: Assertion
    member: MemberPolicy
    policies: PolicySet
    ledger: Ledger
    council: CouncilRecord
    services: Services
    lang: str
    code: str = ""  # the check being run; set by the layer before each check

    @property
    def tool(self) -> ToolSpec | None:
        call = self.assertion.tool_call
        return self.member.tools.get(call.name) if call else None

    def t(self, zh: str, en: str) -> str:
        """Pick the reason text in the configured language."""
        return zh if self.lang == "zh" else en

    def msg(self, name: str, /, **values: Any) -> str:
        """Message ``name`` of the running check from the catalog (a dotted name is absolute)."""
        from lingyi import messages

        return messages.text(self.lang, name if "." in name else f"{self.code}.{name}", **values)

    @property
    def registries(self) -> Registries:
        """Registered names that argument schemas enumerate (data sources, member names)."""
        from lingyi.policy.schema import Registries

        return Registries.of(self.policies, self.services.data_sources)

    def texts(self, fields: Sequence[str] = (), *, content: bool = True) -> list[str]:
        """The assertion's content plus the named string arguments of its tool call."""
        found = [self.assertion.content] if content and self.assertion.content else []
        args = self.assertion.tool_call.arguments if self.assertion.tool_call else {}
        found += [str(args[f]) for f in fields if isinstance(args.get(f), str | int | float)]
        return found


P = TypeVar("P", bound=CheckParams)
CheckFunc = Callable[[CheckContext, Any], Outcome]


@dataclass(frozen=True)
class CheckSpec:
    name: str
    params: type[CheckParams]
    func: CheckFunc
    doc: str


REGISTRY: dict[str, CheckSpec] = {}


def register(
    name: str, params: type[P]
) -> Callable[[Callable[[CheckContext, P], Outcome]], Callable[[CheckContext, P], Outcome]]:
    """Register a check under its stable code (also the code its results carry)."""

    def deco(func: Callable[[CheckContext, P], Outcome]) -> Callable[[CheckContext, P], Outcome]:
        if name in REGISTRY:
            raise ValueError(f"check {name!r} is registered twice")
        REGISTRY[name] = CheckSpec(name, params, func, (func.__doc__ or "").strip())
        return func

    return deco
