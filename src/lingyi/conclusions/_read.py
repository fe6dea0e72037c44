"""Reading a conclusion's payload as the checks need it, tolerant of what a model writes.

The payload is the input as given (a model wrote it): any field may be missing or of the wrong
type. Readers here never raise on that; they skip what is not usable (an id that is not a
string, a finding that is not an object) and leave judging the shape to ``conclusion.schema``.
Ids are compared in one form (:func:`id_key`): a trace id lower-cased, without a UUID's dashes
and padded to 32 digits; any other id as the ledger compares it (:func:`evidence_key`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from lingyi.backends._trace_ids import trace_key
from lingyi.ledger import evidence_key
from lingyi.text import canonical_text


def id_key(written: str) -> str:
    return trace_key(written) or evidence_key(written)


def conclusion_of(payload: dict[str, Any]) -> dict[str, Any]:
    value = payload.get("conclusion")
    return value if isinstance(value, dict) else {}


def strings(value: Any) -> list[str]:
    """The non-empty strings of a list (anything else in it is ignored); [] for a non-list."""
    if not isinstance(value, list):
        return []
    return [v.strip() for v in value if isinstance(v, str) and v.strip()]


def cited_ids(payload: dict[str, Any]) -> list[str]:
    """The ids the conclusion cites, each once (in their compared form), as written."""
    seen: dict[str, str] = {}
    for written in strings(conclusion_of(payload).get("evidence_ids")):
        seen.setdefault(id_key(written), written)
    return list(seen.values())


def hypotheses(payload: dict[str, Any]) -> list[dict[str, Any]]:
    value = conclusion_of(payload).get("hypotheses")
    return [h for h in value if isinstance(h, dict)] if isinstance(value, list) else []


def actions(hypothesis: dict[str, Any]) -> list[dict[str, Any]]:
    value = hypothesis.get("actions")
    return [a for a in value if isinstance(a, dict)] if isinstance(value, list) else []


@dataclass(frozen=True)
class Finding:
    """One specialist's finding: its name, the ids it holds, and whether it is a placeholder."""

    specialist: str
    ids: tuple[str, ...]
    fallback: bool


def findings(
    payload: dict[str, Any],
    wanted: frozenset[str] | None,
    markers: FallbackMarkers,
) -> Iterator[Finding]:
    """The findings under the policy's fields (canonical names; every field when None); a
    finding that is not an object, or is empty, is skipped."""
    given = payload.get("findings")
    if not isinstance(given, dict):
        return
    for name, value in given.items():
        if not isinstance(value, dict) or not value:
            continue
        if wanted is not None and canonical_text(str(name)) not in wanted:
            continue
        ids = tuple(finding_ids(value))
        yield Finding(str(name), ids, markers.marks(value, ids))


def finding_ids(finding: dict[str, Any]) -> Iterator[str]:
    """``evidence_ids: [...]`` and ``evidences: [{id, …}]`` (strings only)."""
    yield from strings(finding.get("evidence_ids"))
    evidences = finding.get("evidences")
    if isinstance(evidences, list):
        yield from strings([e.get("id") for e in evidences if isinstance(e, dict)])


_TRUE = frozenset({"true", "yes", "y", "1", "on", "是", "对", "真"})


def truthy(value: Any) -> bool:
    """A flag as a model may write it: true, 1, "true", "Yes ", "是" (never "false", 0, null)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    return isinstance(value, str) and canonical_text(value).strip() in _TRUE


@dataclass(frozen=True)
class FallbackMarkers:
    """What makes a finding a placeholder, from the policy: a flag set (``fallback``, in any
    key case), a value that says so (``status = "fallback"``), or only placeholder ids."""

    keys: tuple[str, ...]
    value_keys: tuple[str, ...]
    values: tuple[str, ...]
    ids: re.Pattern[str]

    def marks(self, finding: dict[str, Any], ids: Iterable[str]) -> bool:
        keyed = {canonical_text(str(k)).strip(): v for k, v in finding.items()}
        if any(truthy(keyed.get(k)) for k in self.keys):
            return True
        texts = (
            canonical_text(v).strip() for k in self.value_keys if isinstance(v := keyed.get(k), str)
        )
        if any(t in self.values for t in texts):
            return True
        found = list(ids)
        return bool(found) and all(self.ids.fullmatch(canonical_text(i)) for i in found)
