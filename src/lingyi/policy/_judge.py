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
``*`` or ``1.`` is dropped). Unset limits fall back to the config's ``[judge]`` section. This
module only declares and validates the rules; :mod:`lingyi.judge` runs them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from lingyi.models import AssertionType, OnFail

JudgeKind = Literal["assertion", "conclusion", "answer", "destructive"]
JUDGE_KINDS: tuple[JudgeKind, ...] = ("assertion", "conclusion", "answer", "destructive")
MAX_CRITERIA = 12  # more than this and a small model's verdicts stop being per criterion
MAX_CRITERION_CHARS = 300
_BULLET = re.compile(r"^(?:[-*•]|\d{1,2}[.)])\s+")


def criteria_of(rubric: str) -> list[str]:
    """The criteria of a rubric: one a line, bullets and blank or ``#`` lines dropped."""
    lines = (_BULLET.sub("", line.strip()) for line in rubric.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


class JudgeRule(BaseModel):
    """One ``[[judge]]`` table of a policy file."""

    model_config = ConfigDict(extra="forbid")

    kind: JudgeKind = "assertion"
    tools: list[str] | None = None
    types: list[AssertionType] | None = None
    rubric: str
    model: str | None = Field(None, min_length=1)
    timeout_s: float | None = Field(None, gt=0, le=120)
    max_tokens: int | None = Field(None, ge=64, le=4096)
    on_error: Literal["pass", "fail"] | None = None
    on_fail: OnFail | None = None
    max_revisions: int | None = Field(None, ge=0, le=20)
    _source: str = PrivateAttr("")  # "lingflow.toml judge[0]": set by the loader, not the file

    @field_validator("rubric")
    @classmethod
    def _criteria(cls, rubric: str) -> str:
        found = criteria_of(rubric)
        if not found:
            raise ValueError("a rubric needs at least one criterion (one a line)")
        if len(found) > MAX_CRITERIA:
            raise ValueError(f"at most {MAX_CRITERIA} criteria, not {len(found)}")
        if long := [c for c in found if len(c) > MAX_CRITERION_CHARS]:
            raise ValueError(
                f"a criterion over {MAX_CRITERION_CHARS} characters: {long[0][:40]!r}…"
            )
        if len(set(found)) < len(found):
            raise ValueError("a criterion appears twice")
        return rubric

    @property
    def source(self) -> str:
        return self._source

    def placed(self, path: str, index: int) -> JudgeRule:
        """This rule, naming the file and the table it came from (for the log)."""
        self._source = f"{Path(path).name} judge[{index}]"
        return self

    @property
    def criteria(self) -> list[str]:
        return criteria_of(self.rubric)

    def applies(self, kind: str, type_: str, tool: str | None) -> bool:
        if kind != self.kind:
            return False
        if self.types is not None and type_ not in self.types:
            return False
        return self.tools is None or tool in self.tools


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
