"""Upstream results checked before they reach the model (the result audit).

An upstream's result is untrusted: secrets in it are redacted (``lingyi.redact``, the same
catalogue as the log), text that tries to instruct the model is flagged with its own code and a
notice that it is data, and an empty result is marked so (it records no evidence, so a later
"the tool found X" has nothing to stand on). The codes go into the result and the server log.
"""

from __future__ import annotations

from typing import Any

from lingyi.gateway.injection import instructs
from lingyi.redact import redact_text, redact_value

SECRET = "upstream.secret_redacted"
INSTRUCTIONS = "upstream.instructions"
EMPTY = "upstream.empty"
CODES = (SECRET, INSTRUCTIONS, EMPTY)
__all__ = ["CODES", "EMPTY", "INSTRUCTIONS", "SECRET", "audit", "instructs"]


def _blank(structured: Any) -> bool:
    if isinstance(structured, dict):
        return all(_blank(v) for v in structured.values())
    if isinstance(structured, list):
        return all(_blank(v) for v in structured)
    return structured is None or (isinstance(structured, str) and not structured.strip())


def audit(
    texts: list[str], structured: dict[str, Any] | None
) -> tuple[list[str], dict[str, Any] | None, list[str]]:
    """The texts and structured content as the model may see them, and the findings' codes."""
    shown = [redact_text(t) for t in texts]
    shown_structured = redact_value(structured) if structured is not None else None
    codes = []
    if shown != texts or shown_structured != structured:
        codes.append(SECRET)
    if any(instructs(t) for t in texts):
        codes.append(INSTRUCTIONS)
    if all(not t.strip() for t in texts) and _blank(structured):
        codes.append(EMPTY)
    return shown, shown_structured, codes
