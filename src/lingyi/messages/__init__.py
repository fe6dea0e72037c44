"""One message catalog per language: every reason and recommendation the guard writes.

Messages live in ``zh.toml`` and ``en.toml`` beside this module, keyed by check code and
message name (``[tool.owned]`` / ``fail = "…{tool}…"``), so a wording is changed, or a language
added, without touching a check. A key missing in the requested language falls back to
English, and a key missing everywhere to the key itself (which names the code), so a gap in a
catalog never hides a verdict.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

LANGUAGES = ("zh", "en")


@cache
def catalog(lang: str) -> dict[str, str]:
    """The flattened catalog of ``lang`` (``"tool.owned.fail"`` → template)."""
    if lang not in LANGUAGES:
        return {}
    raw = tomllib.loads((resources.files(__package__) / f"{lang}.toml").read_text("utf-8"))
    return dict(_flatten(raw))


def _flatten(table: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        out += _flatten(value, name + ".") if isinstance(value, dict) else [(name, str(value))]
    return out


class _Keep(dict[str, Any]):
    """Leave a placeholder the caller did not fill visible instead of raising."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def text(lang: str, key: str, /, **values: Any) -> str:
    """The message ``key`` in ``lang`` with ``values`` filled in."""
    template = catalog(lang).get(key) or catalog("en").get(key) or key
    return template.format_map(_Keep(values))


def has(lang: str, key: str) -> bool:
    return key in catalog(lang)
