"""Keep secrets out of the verification log.

Content from models is untrusted and may carry API keys or tokens that a user pasted.
The log is read by people every week, so anything that looks like a secret is replaced
before a record is written.
"""

from __future__ import annotations

import re
from typing import Any

_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"sk-(?:ant-)?[A-Za-z0-9_\-]{16,}",  # Anthropic / OpenAI style keys
        r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
        r"AKIA[0-9A-Z]{16}",  # AWS access key ids
        r"xox[abpr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
        r"(?i)bearer\s+[A-Za-z0-9._\-]{16,}",
        r"(?i)(?:password|passwd|api[_-]?key|secret|token)\s*[=:]\s*\S{6,}",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    )
)
MASK = "[REDACTED]"


def redact_text(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    return text


def redact(value: Any) -> Any:
    """Return ``value`` with every string inside it redacted (dicts and lists walked)."""
    if isinstance(value, str):
        return redact_text(value) if _maybe_secret(value) else value
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _maybe_secret(text: str) -> bool:
    # A cheap pre-filter keeps redaction off the hot path for ordinary text.
    return any(s in text for s in ("sk-", "gh", "AKIA", "xox", "earer", "BEGIN", "=", ":"))
