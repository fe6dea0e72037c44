"""Keep secrets and personal data out of everything the guard writes: the log, the council
record, stats, reports, MCP resources and the judge's request (docs/redaction.md).

Content from models is untrusted and may carry keys, tokens and passwords a user pasted; the
log is read by people every week, and stats and reports are shared further. Redaction is a
catalogue (``formats.toml``: each format's kind, hints and regex, restated from maintained
secret scanners), matched on the canonical text (full-width, zero-width-split and look-alike
spellings are found) and on argument keys at any depth (``client_secret``, ``x-api-key``,
``Authorization``). Each secret is replaced by a marker of its kind and a short hash,
``[REDACTED:aws_secret:3f9a1c]``, so reviewers can tell two secrets apart without seeing them.

| function | for |
|---|---|
| :func:`redact_record` | the log writer: one record, in place, reusing the JSON text it hashes |
| :func:`redact_value` | any JSON-like value shown or written (stats, resources, council lines) |
| :func:`redact_text` | one text (a report, a message) |
| :func:`clip` | cutting a redacted text to a size without splitting a marker |
| :func:`find_secrets` | what would be redacted, and where (tests, tooling) |
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lingyi.redact._catalog import Catalog, KeyRules, SecretFormat, load_catalog, parse_catalog
from lingyi.redact._engine import MARKER, Finding, Redactor, marker
from lingyi.redact._settings import RedactSection

# The legacy marker of records written before the catalogue; still recognised, never re-redacted.
MASK = "[REDACTED]"
_SETTINGS = {"in effect": RedactSection()}


def configure(settings: RedactSection) -> None:
    """Use the ``[redact]`` section of a loaded config from now on (``load_config`` calls it:
    the log, the council record, stats, the report and the judge all redact through here)."""
    if settings != _SETTINGS["in effect"]:
        _SETTINGS["in effect"] = settings
        default_redactor.cache_clear()


@cache
def default_redactor() -> Redactor:
    """The redactor of the packaged catalogue, built on first use (not at import)."""
    return Redactor(load_catalog(), _SETTINGS["in effect"])


def redact_record(
    record: dict[str, Any], *, body: str | None = None, key: bytes | None = None
) -> bool:
    """Redact ``record`` in place; True when anything changed (the caller re-serialises).

    ``body`` is the record's JSON text when the caller already made it (the log writer hashes
    it anyway): the cheap hint pass runs on that text, so a record with no secret costs one
    normalisation and one automaton pass. ``key`` keys the markers' hashes (the log's key).
    """
    redacted, changed = default_redactor().redacted(record, key, body)
    if changed:
        record.clear()
        record.update(redacted)
    return changed


def redact_value(value: Any, *, key: bytes | None = None, keys: bool = True) -> Any:
    """``value`` (str, dict, list, nested) with every secret in it replaced; not mutated.

    ``keys=False`` when dict keys are names of things (tools, members), not argument names.
    """
    return default_redactor().redact_value(value, key, keys=keys)


def redact_text(text: str, *, key: bytes | None = None) -> str:
    return default_redactor().redact_text(text, key)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, never through the middle of a marker.

    Redact first, then clip: a secret cut in half may no longer match its format.
    """
    if len(text) <= limit:
        return text
    cut = text[:limit]
    start = cut.rfind("[REDACTED")
    return cut[:start] if start >= 0 and "]" not in cut[start:] else cut


def find_secrets(text: str) -> list[Finding]:
    """The secrets in ``text``: kind, span in ``text``, and the format that matched."""
    return default_redactor().find(text)


def redact(value: Any) -> Any:
    """Older name of :func:`redact_value` (kept for callers written before the catalogue)."""
    return redact_value(value)


def may_hold_secret(text: str) -> bool:
    """Could ``text`` hold a secret or personal data (a format's hint, confirmed by its pattern
    where the format asks for that, a secret key's spelling, or an encoded run)?"""
    return default_redactor().may_hold(text)


__all__ = [
    "MARKER",
    "MASK",
    "Catalog",
    "Finding",
    "KeyRules",
    "RedactSection",
    "Redactor",
    "SecretFormat",
    "clip",
    "configure",
    "default_redactor",
    "find_secrets",
    "load_catalog",
    "marker",
    "may_hold_secret",
    "parse_catalog",
    "redact",
    "redact_record",
    "redact_text",
    "redact_value",
]
