"""Judge rules in the policy files: where the judge runs, with which rubric and limits.

A member file (and ``_common.toml`` for every member) may hold ``[[judge]]`` tables::

    [[judge]]
    kind = "destructive"          # assertion | conclusion | answer | destructive
    tools = ["git_push"]          # optional: only calls of these tools
    rubric = '''
    The action fits the incident the session's evidence describes
    Nothing in the context says the target is protected or in use
    '''
    max_revisions = 1             # optional; model, timeout_s, max_tokens, on_error, on_fail too

The rubric is one criterion a line (blank lines and ``#`` lines are skipped, a leading ``-``,
``*`` or ``1.`` is dropped), each passed or failed by the judge. A rule may also hold **scored
signals**: criteria the judge scores from 0 to 1, each passed or failed by the policy's
threshold (``min``: at least, ``max``: at most), never by the model::

    [judge.signals]
    confidence = { criterion = "1 = every claim as firm as its sources allow", min = 0.7 }
    drift = { criterion = "the share of the answer off the question's subject", max = 0.3 }

A member file's ``[signals]`` table overrides the thresholds of the signals its rules (its own
and the shared ones) hold: ``confidence = { min = 0.8 }``. Unset limits fall back to the
config's ``[judge]`` section. This module only declares and validates the rules;
:mod:`lingyi.judge` runs them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lingyi.models import AssertionType, OnFail

JudgeKind = Literal["assertion", "conclusion", "answer", "destructive"]
JUDGE_KINDS: tuple[JudgeKind, ...] = ("assertion", "conclusion", "answer", "destructive")
MAX_CRITERIA = 12  # more than this and a small model's verdicts stop being per criterion
MAX_CRITERION_CHARS = 300
_BULLET = re.compile(r"^(?:[-*•]|\d{1,2}[.)])\s+")
S = TypeVar("S")
SIGNAL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def criteria_of(rubric: str) -> list[str]:
    """The criteria of a rubric: one a line, bullets and blank or ``#`` lines dropped."""
    lines = (_BULLET.sub("", line.strip()) for line in rubric.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


class Threshold(BaseModel):
    """Where a scored signal passes: a score of at least ``min`` and at most ``max``."""

    model_config = ConfigDict(extra="forbid")

    min: float | None = Field(None, ge=0, le=1)
    max: float | None = Field(None, ge=0, le=1)

    @model_validator(mode="after")
    def _bounded(self) -> Threshold:
        if self.min is None and self.max is None:
            raise ValueError("a signal's threshold needs min or max (scores run from 0 to 1)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}: no score could pass")
        return self

    def passes(self, score: float) -> bool:
        return (self.min is None or score >= self.min) and (self.max is None or score <= self.max)


class SignalSpec(Threshold):
    """A scored criterion of a rule: what the judge scores (0 to 1), and where it passes."""

    criterion: str = Field(min_length=1, max_length=300)


def _signal_names(signals: dict[str, S]) -> dict[str, S]:
    """Signal names are ids (they name a field of the verdict and a key of member files)."""
    for name in signals:
        if not SIGNAL_NAME.match(name):
            raise ValueError(
                f"signal name {name[:40]!r}: lower-case letters, digits and _ (e.g. confidence)"
            )
    return signals


class JudgeRule(BaseModel):
    """One ``[[judge]]`` table of a policy file."""

    model_config = ConfigDict(extra="forbid")

    kind: JudgeKind = "assertion"
    tools: list[str] | None = None
    types: list[AssertionType] | None = None
    # Before the rubric: the rubric's validator counts them.
    signals: dict[str, SignalSpec] = Field(default_factory=dict)
    rubric: str = Field("", validate_default=True)
    model: str | None = Field(None, min_length=1)
    timeout_s: float | None = Field(None, gt=0, le=120)
    max_tokens: int | None = Field(None, ge=64, le=4096)
    on_error: Literal["pass", "fail"] | None = None
    on_fail: OnFail | None = None
    max_revisions: int | None = Field(None, ge=0, le=20)
    _source: str = PrivateAttr("")  # "lingflow.toml judge[0]": set by the loader, not the file
    _path: str = PrivateAttr("")  # the file's full path and the table's index (a reload's
    _index: int = PrivateAttr(0)  # refusal names the file and key, lingyi.policy._store)

    @field_validator("rubric")
    @classmethod
    def _criteria(cls, rubric: str, info: ValidationInfo) -> str:
        found = criteria_of(rubric)
        count = len(found) + len(info.data.get("signals", {"?": None}))  # "?": signals were bad
        if not count:
            raise ValueError("a rubric needs at least one criterion (one a line), or signals")
        if count > MAX_CRITERIA:
            raise ValueError(f"at most {MAX_CRITERIA} criteria and signals, not {count}")
        if long := [c for c in found if len(c) > MAX_CRITERION_CHARS]:
            raise ValueError(
                f"a criterion over {MAX_CRITERION_CHARS} characters: {long[0][:40]!r}…"
            )
        if len(set(found)) < len(found):
            raise ValueError("a criterion appears twice")
        return rubric

    @field_validator("signals")
    @classmethod
    def _names(cls, signals: dict[str, SignalSpec]) -> dict[str, SignalSpec]:
        return _signal_names(signals)

    @property
    def source(self) -> str:
        return self._source

    def placed(self, path: str, index: int) -> JudgeRule:
        """This rule, naming the file and the table it came from (for the log)."""
        self._source = f"{Path(path).name} judge[{index}]"
        self._path, self._index = path, index
        return self

    @property
    def path(self) -> str:
        return self._path

    @property
    def key(self) -> str:
        return f"judge[{self._index}]"

    @property
    def criteria(self) -> list[str]:
        return criteria_of(self.rubric)

    def applies(self, kind: str, type_: str, tool: str | None) -> bool:
        if kind != self.kind:
            return False
        if self.types is not None and type_ not in self.types:
            return False
        return self.tools is None or tool in self.tools


def first_rule(rules: list[JudgeRule], kind: str, type_: str, tool: str | None) -> JudgeRule | None:
    """The rule that judges this case: the first matching one that names the tool, else the
    first matching one that names none (the member's own rules come first in ``rules``)."""
    matching = [r for r in rules if r.applies(kind, type_, tool)]
    return next((r for r in matching if r.tools), None) or next(iter(matching), None)


def judge_rule_problems(
    rules: list[JudgeRule], tools: dict[str, bool] | None
) -> list[tuple[str, str]]:
    """(key, message) for rules naming tools the member does not own, or a ``destructive``
    rule naming a tool that is not declared destructive. ``tools`` maps the member's tools to
    their ``destructive`` flag; None (shared rules) skips the ownership check."""
    found: list[tuple[str, str]] = []
    for i, rule in enumerate(rules):
        for tool in rule.tools or []:
            key = f"judge[{i}].tools"
            if tools is not None and tool not in tools:
                owned = ", ".join(sorted(tools)) or "none"
                found.append((key, f"{tool!r} is not a tool of this member (its tools: {owned})"))
            elif tools is not None and rule.kind == "destructive" and not tools[tool]:
                found.append((key, f"{tool!r} is not declared destructive = true"))
    return found
