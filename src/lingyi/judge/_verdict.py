"""Reading the judge's answer defensively: a verdict that fits the schema exactly, or nothing.

Where the answer is looked for, in order: the input of the verdict tool, then the text as
plain JSON, then the first fenced block of the text. Whatever is found must be exactly the
schema: the three fields and no other, each criterion of the rubric once (no invented id, no
dropped one), booleans that are booleans, a verdict that agrees with its criteria. A rule with
scored signals has a fourth field, ``scores``: each signal once, with a score that is a JSON
number from 0 to 1 (not a boolean, not a string such as ``"0.9"``, not NaN). Anything else is
:class:`Malformed` and fails closed: a missing field is never guessed. Its ``code`` says which
rule the answer broke (``score_missing``, ``score_not_number``, ``score_boolean``,
``score_not_finite``, ``score_out_of_range``, ``score_unknown``; ``schema`` for the rest).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lingyi.judge._prompt import TOOL_NAME, VERDICTS, criterion_ids

_FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_ITEM_FIELDS = {"criterion", "passed", "gap"}
_SCORE_FIELDS = {"score", "gap"}
EXPLANATION_CHARS = 500
GAP_CHARS = 300


class Malformed(ValueError):
    """The answer does not fit the verdict schema; the message says how (for the log), the
    code which rule it broke (stable, for tests and people)."""

    def __init__(self, message: str, code: str = "schema") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Criterion:
    id: str
    text: str  # the rubric's own wording (policy data), not the model's
    passed: bool
    gap: str


@dataclass(frozen=True)
class Score:
    name: str  # the signal's name in the policy
    score: float  # from 0 to 1; the policy's threshold decides whether it passes
    gap: str


@dataclass(frozen=True)
class Verdict:
    verdict: str  # satisfied | needs_revision | failed
    criteria: tuple[Criterion, ...]
    explanation: str
    via: str  # tool | json | fenced: where it was found
    scores: tuple[Score, ...] = ()

    @property
    def gaps(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.passed]


def parse(
    blocks: Sequence[dict[str, Any]], criteria: Sequence[str], signals: Sequence[str] = ()
) -> Verdict:
    """The verdict in a Messages API ``content`` (as dicts); :class:`Malformed` otherwise."""
    raw, via = _located(blocks)
    return _validated(raw, criteria, signals, via)


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


def _validated(raw: Any, rubric: Sequence[str], signals: Sequence[str], via: str) -> Verdict:
    if not isinstance(raw, dict):
        raise Malformed("the verdict is not an object")
    fields = {"verdict", "explanation"} | ({"criteria"} if rubric else set())
    _exact_keys(raw, fields | ({"scores"} if signals else set()), "verdict")
    verdict, explanation = raw["verdict"], raw["explanation"]
    if verdict not in VERDICTS:
        raise Malformed(f"verdict {str(verdict)[:40]!r} is not one of {', '.join(VERDICTS)}")
    if not isinstance(explanation, str):
        raise Malformed("explanation is not a string")
    criteria = _criteria(raw["criteria"], rubric) if rubric else ()
    scores = _scores(raw["scores"], signals) if signals else ()
    _consistent(verdict, criteria, scored=bool(signals))
    return Verdict(verdict, criteria, clean(explanation, EXPLANATION_CHARS), via, scores)


def _exact_keys(obj: dict[str, Any], wanted: set[str], what: str, code: str = "schema") -> None:
    if missing := sorted(wanted - set(obj)):
        raise Malformed(f"{what} misses {', '.join(missing)}", code)
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


def _scores(raw: Any, signals: Sequence[str]) -> tuple[Score, ...]:
    """Each signal's score: a JSON number in [0, 1], nothing that merely looks like one."""
    if not isinstance(raw, dict):
        raise Malformed("scores is not an object", "score_missing")
    if missing := [s for s in signals if s not in raw]:
        raise Malformed(f"scores missing: {', '.join(missing)}", "score_missing")
    if extra := sorted(set(raw) - set(signals)):
        listed = ", ".join(str(e)[:40] for e in extra)
        raise Malformed(f"scores has unknown signal(s) {listed}", "score_unknown")
    return tuple(_score(name, raw[name]) for name in signals)


def _score(name: str, item: Any) -> Score:
    if not isinstance(item, dict):
        raise Malformed(f"score of {name} is not an object", "score_missing")
    _exact_keys(item, _SCORE_FIELDS, f"the score of {name}", "score_missing")
    value, gap = item["score"], item["gap"]
    if isinstance(value, bool):  # a bool is an int in Python: true would read as 1.0
        raise Malformed(f"{name}: score is a boolean, not a number", "score_boolean")
    if not isinstance(value, int | float):
        raise Malformed(f"{name}: score {str(value)[:20]!r} is not a number", "score_not_number")
    if not math.isfinite(value):  # json.loads reads NaN and Infinity
        raise Malformed(f"{name}: score {value} is not a finite number", "score_not_finite")
    if not 0 <= value <= 1:
        raise Malformed(f"{name}: score {value} is not in [0, 1]", "score_out_of_range")
    if not isinstance(gap, str):
        raise Malformed(f"{name}: gap must be a string")
    return Score(name, float(value), clean(gap, GAP_CHARS))


def _consistent(verdict: str, criteria: tuple[Criterion, ...], scored: bool = False) -> None:
    failed = [c for c in criteria if not c.passed]
    if verdict == "satisfied" and failed:
        raise Malformed(f"satisfied with failed criteria ({', '.join(c.id for c in failed)})")
    # With scores the model may ask for a revision over a score: the thresholds decide.
    if verdict == "needs_revision" and not failed and not scored:
        raise Malformed("needs_revision with every criterion passed")
    if verdict == "needs_revision" and (blank := [c.id for c in failed if not c.gap]):
        raise Malformed(f"failed criteria without a gap ({', '.join(blank)})")


def clean(text: str, limit: int) -> str:
    """Model text made safe to show: control and format characters out, one line, bounded."""
    kept = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" or ch in "\t\n")
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
