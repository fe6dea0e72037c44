"""The evidence an upstream result holds, as the config names it per tool.

An upstream's result is untrusted text; only what the configured patterns or structured fields
pick out is recorded, and only from a result that did not fail, so a later assertion can cite
a commit SHA ``git_log`` really returned and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from lingyi.config import UpstreamEvidence
from lingyi.models import Evidence

MAX_VALUES = 500  # one result records at most this many evidence items


def _pattern_values(pattern: str, text: str) -> list[str]:
    found = re.compile(pattern).finditer(text)
    return [m.group(1) if m.groups() else m.group(0) for m in found]


def _field_values(structured: dict[str, Any] | None, field: str) -> list[str]:
    value = (structured or {}).get(field)
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str | int) and not isinstance(v, bool)]


def _item(kind: str, value: str, source: str) -> Evidence:
    if kind == "url":
        return Evidence(id=value, title=source, url=value)
    if kind == "title":
        return Evidence(id=f"{source}:{value}", title=value)
    return Evidence(id=value, title=source)


def extract(
    rules: Iterable[UpstreamEvidence], source: str, text: str, structured: dict[str, Any] | None
) -> list[Evidence]:
    """The evidence ``rules`` pick out of one result; ``source`` is the served tool name."""
    found: dict[str, Evidence] = {}
    for rule in rules:
        values = (
            _pattern_values(rule.pattern, text)
            if rule.pattern is not None
            else _field_values(structured, rule.field or "")
        )
        for value in values:
            found.setdefault(value, _item(rule.kind, value, source))
    return list(found.values())[:MAX_VALUES]
