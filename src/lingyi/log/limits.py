"""Size limits of what a record stores: big values are kept as a head, their length and hash.

A client can send a 2 MB argument; the verdict is made on all of it, but the log, read by
people and by every tool that scans it, keeps only the first ``max_bytes`` of it and lists the
cut in the record's ``truncated`` field: the field's path, its full length in bytes and the
sha256 of the full value (its UTF-8 text, or its canonical JSON), so that a reviewer holding
the original can show it is the one that was verified. Values are cut after redaction, so the
hash is of what would have been stored, never of a secret.

What is cut, and how, keeps the record's shape for its readers:

* any text longer than the limit, anywhere in the record (content, reasons, arguments);
* inside a tool call's ``arguments``: any value whose JSON is over the limit, stored as the
  head of that JSON (the arguments are the client's, their types carry no meaning for
  readers), and the arguments object itself, keeping its first keys that fit;
* ``evidence_ids``: its first ids that fit.

The envelope (ids, hashes, kind) and the list of checks (the guard's own, read by stats) keep
their shape. :func:`limit_record` only runs when a record's text is over the limit, which
ordinary records never are: the common path costs nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

ELLIPSIS = "…"
MIN_BYTES = 256  # below this a record could not say what it is about
# Fields the guard writes itself, whose size it controls: never cut (the chain needs them).
_ENVELOPE = frozenset({"v", "id", "ts", "kind", "prev", "hash", "seq", "key_id", "truncated"})


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _head(text: str, max_bytes: int) -> str:
    """The longest start of ``text`` within ``max_bytes`` of UTF-8 (never half a character).

    Only the first ``max_bytes`` characters are encoded: a character is at least one byte.
    """
    return _utf8(text[:max_bytes])[:max_bytes].decode("utf-8", "ignore") + ELLIPSIS


def _over_bytes(text: str, max_bytes: int) -> bool:
    """Is ``text`` over ``max_bytes`` of UTF-8? Encodes only when its length cannot tell:
    a character is one to four bytes."""
    if len(text) > max_bytes:
        return True
    return len(text) * 4 > max_bytes and len(_utf8(text)) > max_bytes


class _Limiter:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.cuts: list[dict[str, Any]] = []

    def note(self, path: str, full: str) -> None:
        data = _utf8(full)
        self.cuts.append(
            {"field": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        )

    def value(self, value: Any, path: str, shape: str = "") -> Any:
        """``value`` with every part over the limit cut.

        ``shape``: "" keeps containers whole (only their texts are cut), "args" is a tool
        call's arguments (its values cut, then its keys if still too big), "arg" a value
        inside them (cut as its JSON text), "list" a list cut to its first items.
        """
        if isinstance(value, str):
            return self.text(value, path)
        if not isinstance(value, dict | list):
            return value
        if shape == "arg":
            return self.text(_json(value), path) if self._over(value) else value
        if shape == "args" and isinstance(value, dict):
            return self.arguments(value, path)
        if isinstance(value, dict):
            cut: Any = {k: self.value(v, f"{path}.{k}", _shape_of(k, "")) for k, v in value.items()}
        else:
            cut = [self.value(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if shape and self._over(cut):
            self.note(path, _json(value))
            return _prefix(cut, self.max_bytes)
        return cut

    def arguments(self, args: dict[str, Any], path: str) -> dict[str, Any]:
        """A tool call's arguments within the limit as a whole: each value cut to the limit,
        then, if they are still too big together, to an equal share of it (every key kept
        while a share is worth keeping), then the first keys that fit."""
        full = _json(args)
        if not _over_bytes(full, self.max_bytes):
            return args
        self.note(path, full)
        share = self.max_bytes
        for _ in range(2):
            inner = _Limiter(share)
            cut = {k: inner.value(v, f"{path}.{k}", "arg") for k, v in args.items()}
            if not self._over(cut):
                break
            share = max(MIN_BYTES // 4, self.max_bytes // (2 * len(args)))
        self.cuts += inner.cuts  # the values' cuts of the round that was kept
        return cut if not self._over(cut) else dict(_prefix(cut, self.max_bytes))

    def _over(self, value: Any) -> bool:
        return _over_bytes(_json(value), self.max_bytes)

    def text(self, text: str, path: str) -> str:
        if not _over_bytes(text, self.max_bytes):
            return text
        self.note(path, text)
        return _head(text, self.max_bytes)


def _shape_of(key: str, inner: str) -> str:
    if inner:
        return inner
    return {"arguments": "args", "evidence_ids": "list"}.get(key, "")


def _prefix(value: dict[str, Any] | list[Any], max_bytes: int) -> Any:
    """The first items (or keys) of ``value`` whose JSON fits in ``max_bytes``."""
    items = list(value.items()) if isinstance(value, dict) else list(value)
    used, kept = 2, 0
    for item in items:  # an item's JSON and its comma (a key's '{"k":v}' less its braces)
        text = _json(item) if isinstance(value, list) else _json(dict([item]))[1:-1]
        used += len(_utf8(text)) + 1
        if used > max_bytes:
            break
        kept += 1
    return dict(items[:kept]) if isinstance(value, dict) else items[:kept]


def limit_record(record: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``record`` with each value over ``max_bytes`` cut, and the cuts listed in ``truncated``."""
    limiter = _Limiter(max_bytes)
    out = {
        k: v if k in _ENVELOPE else limiter.value(v, k, _shape_of(k, "")) for k, v in record.items()
    }
    if limiter.cuts:
        out["truncated"] = [*record.get("truncated", []), *limiter.cuts]
    return out
