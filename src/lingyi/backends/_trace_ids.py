"""The one form trace ids are compared in.

Apart from :mod:`lingyi.backends.traces` so that the checks that read ids in text (and
every CLI command that loads them) do not import an HTTP client.
"""

from __future__ import annotations

import re

__all__ = ["TRACE_ID", "trace_key"]

TRACE_ID = re.compile(
    r"[0-9a-f]{24,32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)


def trace_key(written: str) -> str | None:
    """The one form trace ids are compared in, or None when ``written`` is not a trace id."""
    text = written.strip().lower()
    if not TRACE_ID.fullmatch(text):
        return None
    return text.replace("-", "").rjust(32, "0")
