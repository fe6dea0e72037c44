"""The redactor as it was before issue 9 (seven regexes, one mask), kept unchanged as the
baseline of ``bench_redact.py``. Not used by lingyi.

Keep secrets out of the verification log.

Content from models is untrusted and may carry API keys or tokens that a user pasted.
The log is read by people every week, so anything that looks like a secret is replaced
before a record is written.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"sk-(?:ant-)?[A-Za-z0-9_\-]{16,}",  # Anthropic / OpenAI style keys
        r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
        r"AKIA[0-9A-Z]{16}",  # AWS access key ids
        r"xox[abpr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
        r"(?i:bearer)\s+[A-Za-z0-9._\-]{16,}",
        r"(?i:password|passwd|api[_-]?key|secret|token)\s*[=:]\s*\S{6,}",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    )
)
MASK = "[REDACTED]"
_SECRET_KEY = re.compile(r"(?i)^(?:password|passwd|api[_-]?key|secret|token|access[_-]?token)$")
# Also catches {"api_key": "..."} in a tool call's arguments, once the record is JSON.
_JSON_SECRET = r'"(?i:password|passwd|api[_-]?key|secret|token|access[_-]?token)"\s*:\s*"[^"]{6,}"'
_ANY = re.compile("|".join(f"(?:{p.pattern})" for p in _PATTERNS) + f"|{_JSON_SECRET}")
# Substrings every pattern above needs; plain `in` tests are far cheaper than the regex.
_HINTS = (
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "akia",
    "xox",
    "bearer",
    "private key",
    "passw",
    "api_key",
    "api-key",
    "apikey",
    "secret",
    "token",
)


def redact_text(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    return text


def redact(value: Any) -> Any:
    """Return ``value`` with every string inside it redacted (dicts and lists walked)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _walk(value) if may_hold_secret(text) else value


def may_hold_secret(text: str) -> bool:
    """Does this JSON text need the (slow) redaction walk? Cheap for ordinary text."""
    lower = text.lower()
    return any(hint in lower for hint in _HINTS) and _ANY.search(text) is not None


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _secret_value(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v) for v in value]
    return value


def _secret_value(key: str, value: Any) -> Any:
    hidden = isinstance(value, str) and _SECRET_KEY.match(key) and len(value) >= 6
    return MASK if hidden else _walk(value)


def redact_record(record: dict[str, Any]) -> dict[str, Any]:
    """The log record as it may be stored: every secret in it replaced (the log writer's
    one call into redaction, made before the record is cut to size and chained)."""
    redacted: dict[str, Any] = redact(record)
    return redacted
