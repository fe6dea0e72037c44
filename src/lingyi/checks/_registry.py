"""The registry and the types every check shares."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict

from lingyi import messages
from lingyi.models import Assertion, Evidence, Fallback
from lingyi.text import Canonical, canonical

if TYPE_CHECKING:
    from lingyi.council import CouncilRecord
    from lingyi.ledger import Ledger
    from lingyi.policy import Lexicon, MemberPolicy, PolicySet, ToolSpec
    from lingyi.policy.schema import Registries


class CheckParams(BaseModel):
    """Base of every check's parameters; unknown keys are policy errors."""

    model_config = ConfigDict(extra="forbid")


def _languages_known(texts: dict[str, str]) -> dict[str, str]:
    if unknown := sorted(set(texts) - set(messages.LANGUAGES)):
        known = ", ".join(messages.LANGUAGES)
        raise ValueError(f"unknown language {', '.join(unknown)} (languages: {known})")
    return texts


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc}): {pattern!r}") from None
    return pattern


# A regular expression a policy writes: compiled when the policies load, so a bad one is an
# error naming its key then, not a failure of every call that reaches the check.
Regex = Annotated[str, AfterValidator(_compiles)]


# A text a policy writes itself (a member's own referral), one entry per language. The
# catalog holds the engine's wording; this is for wording that belongs to a member.
PerLanguage = Annotated[dict[str, str], AfterValidator(_languages_known)]


def in_language(texts: Mapping[str, str], lang: str) -> str | None:
    """The text in ``lang``, else in English (the catalog's fallback too), else None."""
    return texts.get(lang) or texts.get("en")


@dataclass(frozen=True)
class Outcome:
    passed: bool
    reason: str
    recommendation: str | None = None
    fallback: Fallback | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    degraded: bool = False
    found: tuple[Evidence, ...] = ()  # what an active lookup found (recorded as evidence)
    # Neither a match nor a contradiction: the check's ``on_uncertain`` decides (judge, pass,
    # fail, warn). ``passed`` is then ignored.
    uncertain: bool = False
    # Only warnings found (a business rule of severity warn): logged, never blocking, whatever
    # the entry's on_fail. A check can soften its own failure this way, never harden it.
    warn_only: bool = False


# What a comparison of a claim with the record, the evidence or a cited document found
# (detail["outcome"]): backed, given another value, not settled (nothing comparable: the
# check is uncertain), or nothing on record about it at all (a fabrication looks like that).
ENTAILED, CONTRADICTED, NOT_SETTLED, NO_RECORD = (
    "entailed",
    "contradicted",
    "not_settled",
    "no_record",
)


def ok(reason: str, **detail: Any) -> Outcome:
    return Outcome(True, reason, detail=detail)


def unsure(reason: str, recommendation: str | None = None, **detail: Any) -> Outcome:
    """The check cannot decide; ``detail`` says what it found (for a judge and a reviewer)."""
    return Outcome(False, reason, recommendation, None, detail, uncertain=True)


def fail(
    reason: str,
    recommendation: str | None = None,
    fallback: Fallback | None = None,
    **detail: Any,
) -> Outcome:
    return Outcome(False, reason, recommendation, fallback, detail)


class TraceLookup(Protocol):
    """A trace backend: which of these trace ids exist (raises when it cannot answer)."""

    def exists(self, ids: Iterable[str]) -> dict[str, bool]: ...


@dataclass
class Services:
    """What checks may consult beyond the assertion: roots, registries, lookups."""

    repo_roots: list[Path] = field(default_factory=list)
    data_roots: list[Path] = field(default_factory=list)
    data_sources: list[str] = field(default_factory=list)
    trace_lookup: Callable[[str], bool] | None = None
    # Batched, cached and bounded lookups (lingyi.backends.traces); preferred when set.
    traces: TraceLookup | None = None
    # Active verification: subject lookups by name (e.g. "knowledge_base" → search the KB).
    lookups: dict[str, Callable[[str], list[Evidence]]] = field(default_factory=dict)
    max_text_chars: int = 8000  # longer texts are rejected (pre.size) and read only this far


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

    def msg(self, name: str, /, **values: Any) -> str:
        """Message ``name`` of the running check from the catalog (a dotted name is absolute)."""
        return messages.text(self.lang, name if "." in name else f"{self.code}.{name}", **values)

    @property
    def registries(self) -> Registries:
        """Registered names that argument schemas enumerate (data sources, member names)."""
        from lingyi.policy.schema import Registries

        return Registries.of(self.policies, self.services.data_sources)

    @cached_property
    def canon(self) -> Canonical:
        """The content in canonical form, computed once per verification for every check."""
        return canonical(self.assertion.content, self.policies.names)

    def canonical_args(self, fields: Sequence[str]) -> list[Canonical]:
        """The named text arguments of the tool call in canonical form (numbers as text)."""
        args = self.assertion.tool_call.arguments if self.assertion.tool_call else {}
        values = [args[f] for f in fields if isinstance(args.get(f), str | int | float)]
        return [canonical(str(v), self.policies.names) for v in values if not isinstance(v, bool)]

    def canonical_texts(
        self, fields: Sequence[str] = (), *, content: bool = True
    ) -> list[Canonical]:
        """The content (unless ``content`` is false) and the named arguments, canonical."""
        found = [self.canon] if content and self.assertion.content else []
        return found + self.canonical_args(fields)

    def lexicon(self, ref: str) -> Lexicon:
        """A lexicon named by a check parameter, loaded and validated with the policies."""
        return self.policies.lexicon(ref)

    def texts(self, fields: Sequence[str] = (), *, content: bool = True) -> list[str]:
        """The assertion's content plus the named string arguments of its tool call."""
        found = [self.assertion.content] if content and self.assertion.content else []
        args = self.assertion.tool_call.arguments if self.assertion.tool_call else {}
        found += [str(args[f]) for f in fields if isinstance(args.get(f), str | int | float)]
        return found


# Checks that read only the content answer an empty one without reading it (a tool call's
# assertion has none): the outcome is the one their full reading of "" gives, which
# tests/test_hot_path.py pins by running every such check both ways.
SHORTCUTS = True


def nothing_to_read(ctx: CheckContext) -> bool:
    """The canonical content is empty, so a check that reads only it has nothing to find."""
    return SHORTCUTS and not ctx.canon.text


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
        REGISTRY[name] = CheckSpec(name, params, func, inspect.cleandoc(func.__doc__ or ""))
        return func

    return deco
