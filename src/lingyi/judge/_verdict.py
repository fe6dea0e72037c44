"""Reading the judge's answer defensively: a verdict that fits the schema exactly, or nothing.

Where the answer is looked for, in order: the input of the verdict tool, then the text as
plain JSON, then the first fenced block of the text. Whatever is found must be exactly the
schema: the three fields and no other, each criterion of the rubric once (no invented id, no
dropped one), booleans that are booleans, a verdict that agrees with its criteria. Anything
else is :class:`Malformed` and fails closed: a missing field is never guessed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lingyi.judge._prompt import TOOL_NAME, VERDICTS, criterion_ids

_FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_FIELDS = {"criteria", "verdict", "explanation"}
_ITEM_FIELDS = {"criterion", "passed", "gap"}
EXPLANATION_CHARS = 500
GAP_CHARS = 300


class Malformed(ValueError):
    """The answer does not fit the verdict schema; the message says how (for the log)."""


@dataclass(frozen=True)
class Criterion:
    id: str
    text: str  # the rubric's own wording (policy data), not the model's
    passed: bool
    gap: str


@dataclass(frozen=True)
class Verdict:
    verdict: str  # satisfied | needs_revision | failed
    criteria: tuple[Criterion, ...]
    explanation: str
    via: str  # tool | json | fenced: where it was found

    @property
    def gaps(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.passed]


def parse(blocks: Sequence[dict[str, Any]], criteria: Sequence[str]) -> Verdict:
    """The verdict in a Messages API ``content`` (as dicts); :class:`Malformed` otherwise."""
    raw, via = _located(blocks)
    return _validated(raw, criteria, via)


def _located(blocks: Sequence[dict[str, Any]]) -> tuple[Any, str]:
    uses = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") == TOOL_NAME]
    if len(uses) > 1:
        raise Malformed("more than one verdict")
    if uses:
        return uses[0].get("input"), "tool"
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
    if not text:
        raise Malformed("no verdict tool call and no text")
    try:
        return json.loads(text), "json"
    except ValueError:
        pass
    fenced = _FENCED.search(text)
    if fenced is None:
        raise Malformed("no verdict tool call, no JSON, no fenced block")
    try:
        return json.loads(fenced.group(1)), "fenced"
    except ValueError as exc:
        raise Malformed("the fenced block is not JSON") from exc


def _validated(raw: Any, rubric: Sequence[str], via: str) -> Verdict:
    if not isinstance(raw, dict):
        raise Malformed("the verdict is not an object")
    _exact_keys(raw, _FIELDS, "verdict")
    verdict, explanation, items = raw["verdict"], raw["explanation"], raw["criteria"]
    if verdict not in VERDICTS:
        raise Malformed(f"verdict {str(verdict)[:40]!r} is not one of {', '.join(VERDICTS)}")
    if not isinstance(explanation, str):
        raise Malformed("explanation is not a string")
    criteria = _criteria(items, rubric)
    _consistent(verdict, criteria)
    return Verdict(verdict, criteria, clean(explanation, EXPLANATION_CHARS), via)


def _exact_keys(obj: dict[str, Any], wanted: set[str], what: str) -> None:
    if missing := sorted(wanted - set(obj)):
        raise Malformed(f"{what} misses {', '.join(missing)}")
    if extra := sorted(set(obj) - wanted):
        raise Malformed(f"{what} has unknown field(s) {', '.join(e[:40] for e in extra)}")


def _criteria(items: Any, rubric: Sequence[str]) -> tuple[Criterion, ...]:
    if not isinstance(items, list):
        raise Malformed("criteria is not a list")
    ids = criterion_ids(len(rubric))
    found: dict[str, Criterion] = {}
    for item in items:
        if not isinstance(item, dict):
            raise Malformed("a criterion is not an object")
        _exact_keys(item, _ITEM_FIELDS, "a criterion")
        cid, passed, gap = item["criterion"], item["passed"], item["gap"]
        if cid not in ids:
            raise Malformed(f"criterion {str(cid)[:40]!r} is not in the rubric")
        if cid in found:
            raise Malformed(f"criterion {cid} appears twice")
        if not isinstance(passed, bool) or not isinstance(gap, str):
            raise Malformed(f"criterion {cid}: passed must be true or false, gap a string")
        found[cid] = Criterion(cid, rubric[ids.index(cid)], passed, clean(gap, GAP_CHARS))
    if missing := [i for i in ids if i not in found]:
        raise Malformed(f"criteria missing: {', '.join(missing)}")
    return tuple(found[i] for i in ids)


def _consistent(verdict: str, criteria: tuple[Criterion, ...]) -> None:
    failed = [c for c in criteria if not c.passed]
    if verdict == "satisfied" and failed:
        raise Malformed(f"satisfied with failed criteria ({', '.join(c.id for c in failed)})")
    if verdict == "needs_revision" and not failed:
        raise Malformed("needs_revision with every criterion passed")
    if verdict == "needs_revision" and (blank := [c.id for c in failed if not c.gap]):
        raise Malformed(f"failed criteria without a gap ({', '.join(blank)})")


def clean(text: str, limit: int) -> str:
    """Model text made safe to show: control and format characters out, one line, bounded."""
    kept = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" or ch in "\t\n")
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
