"""Find secrets in texts and structures, and replace each with a marker of its kind.

A marker names the kind and a short hash of the secret (``[REDACTED:aws_secret:3f9a1c]``):
two different secrets get different markers and the same secret the same one (in any
spelling: the hash is of its canonical form), so a reviewer can tell them apart without
seeing either. The hash is an HMAC. Keyed with a deployment secret (the log's MAC key, when
the writer has one), nobody without that key can test guesses of a weak password against a
marker; unkeyed (the default), 24 bits of a plain digest let anyone confirm such a guess,
which is why callers that hold a key should pass it.

The cost is in the common path: a record with no secret is one normalisation of its JSON
text and one Aho-Corasick pass over it for every format's hints and every secret key's
spellings; only a record that contains a hint is walked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate
from typing import Any

import ahocorasick

from lingyi.redact._catalog import Catalog, KeyRules, SecretFormat
from lingyi.redact._decode import decodings, encoded_runs, may_be_encoded
from lingyi.redact._normal import WIDE_COLON, Skeleton, screen, skeleton
from lingyi.redact._settings import RedactSection

MARKER = re.compile(r"\[REDACTED(?::[a-z0-9_]{1,32}:[0-9a-f]{6})?\]")
_UNKEYED = b"lingyi-redaction-marker-v1"
_KEYS = -1  # the automaton's value for a secret key's spelling (not a format index)
_SHORT = 80  # texts up to this length have their hint pass cached
_DEPTH = 2  # encodings looked into, one inside the other (base64 of a URL-encoded query)
# The fields that hold what the caller sent (a record's and a judge request's tool arguments
# and context): there, two adjacent strings are also read as one, for a secret split in two.
CALLER_FIELDS = frozenset({"arguments", "tool_arguments", "context", "args"})
_NUMBER_MARKS = str.maketrans("", "", " ().-")
# Formats hinted by digits alone (phone, ID and card numbers) run only on a text with nine
# digits in a row (a separator or two between them allowed), found by one regex instead of
# the automaton: every record has digits, few have such a run, and the envelope's timestamp
# (2026-11-24T…) is not one. The screen keeps full-width brackets: （４１５） ５５５-…
_DIGITS = frozenset("0123456789")
_NUMBER = re.compile(r"[0-9](?<![A-Za-z0-9][0-9])(?:[ ().\uff08\uff09-]{0,2}[0-9]){8}")


@dataclass(frozen=True)
class Finding:
    """One secret in a text: its kind, where it is in the original, the format that found it."""

    kind: str
    start: int
    end: int
    format: str
    value: str  # in matching form: what the marker's hash is of


def marker(kind: str, secret: str, key: bytes | None = None) -> str:
    """``[REDACTED:<kind>:<6 hex>]``, the hash keyed with ``key`` when one is given."""
    mac = hmac.new(key or _UNKEYED, secret.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return f"[REDACTED:{kind}:{mac.hexdigest()[:6]}]"


def _spellings(hint: str) -> set[str]:
    """A hint as written, and with the full-width colon the hint pass leaves in Chinese prose."""
    return {hint, hint.replace(":", WIDE_COLON)}


def _key_kind(key: str) -> str:
    """A secret key's marker kind: the key itself, lower case, in a-z0-9_."""
    return re.sub(r"[^a-z0-9]+", "_", screen(key)).strip("_")[:32] or "secret"


class Redactor:
    """The catalogue's formats and keys, compiled into one hint automaton."""

    def __init__(self, catalog: Catalog, settings: RedactSection | None = None) -> None:
        settings = settings or RedactSection()
        self.catalog = catalog = _chosen(catalog, settings)
        self.decode = settings.decode
        self._hints = ahocorasick.Automaton()
        owners: dict[str, set[int]] = {}
        self._numeric = frozenset(
            i for i, f in enumerate(catalog.formats) if set(f.hints) <= _DIGITS
        )
        for index, fmt in enumerate(catalog.formats):
            if index in self._numeric:
                continue  # not in the automaton: every record has digits, each a hit
            for hint in fmt.hints:
                for spelling in _spellings(hint):
                    owners.setdefault(spelling, set()).add(index)
        for hint in catalog.keys.hints():
            for spelling in _spellings(hint):
                owners.setdefault(spelling, set()).add(_KEYS)
        for spelling, found in owners.items():
            self._hints.add_word(spelling, frozenset(found))
        self._hints.make_automaton()
        # Keys, codes and the catalogue's wordings come back in every record: remembered.
        self._hinted_short = lru_cache(maxsize=8192)(self._hinted)

    # --- which formats could be present -------------------------------------------------

    def hinted(self, text: str) -> set[int]:
        """The formats (and _KEYS) whose hints occur in ``text``'s matching form."""
        if len(text) <= _SHORT:
            return set(self._hinted_short(text))
        return set(self._hinted(text))

    def _hinted(self, text: str) -> frozenset[int]:
        return self._owners(screen(text))

    def _owners(self, screened: str) -> frozenset[int]:
        found: set[int] = set()
        for _, owners in self._hints.iter(screened):
            found |= owners
        if self._numeric and _NUMBER.search(screened):
            found |= self._numeric
        return frozenset(found)

    def _confirmed(self, body: str) -> set[int]:
        """The formats hinted in a structure's JSON text, less those that say they would match
        that text too and do not (``confirm``: "://" is in every URL, a password in few)."""
        screened = screen(body)
        wanted = set(self._owners(screened))
        for i in [i for i in wanted if i != _KEYS and self.catalog.formats[i].confirm]:
            if not self.catalog.formats[i].regex.search(screened):
                wanted.discard(i)
        return wanted

    def may_hold(self, text: str) -> bool:
        """Could ``text`` (a text or a structure's JSON) hold anything this redactor replaces?"""
        return bool(self._confirmed(text)) or (self.decode and may_be_encoded(text))

    # --- texts --------------------------------------------------------------------------

    def find(
        self, text: str, only: Iterable[int] | None = None, depth: int = _DEPTH
    ) -> list[Finding]:
        """Every secret in ``text``, in order, none overlapping another or a marker.

        ``only``: the formats the caller's hint pass found (a record's walk); others are skipped.
        """
        wanted = self.hinted(text)
        if only is not None:
            wanted &= set(only)
        formats = [self.catalog.formats[i] for i in sorted(wanted) if i != _KEYS]
        encoded = self.decode and depth > 0 and may_be_encoded(text)
        if not formats and not encoded:
            return []
        form = skeleton(text)
        found = [f for fmt in formats for f in _matches(fmt, form)]
        if encoded:
            found += self._decoded(form, found, depth)
        return _disjoint(found, [m.span() for m in MARKER.finditer(text)])

    def _decoded(self, form: Skeleton, plain: list[Finding], depth: int) -> list[Finding]:
        """Encoded runs (base64, hex, URL) whose decoded text holds a secret: each replaced
        whole, hashed as the decoded secret is (so it gets the plain spelling's marker)."""
        found = []
        for match in encoded_runs(form.text):
            start, end = form.span(*match.span())
            if any(f.start < end and start < f.end for f in plain):
                continue  # found as it is: the plain finding is the more precise one
            if (inner := self._inside(match.group(0), depth)) is not None:
                found.append(replace(inner, start=start, end=end))
        return found

    def _inside(self, run: str, depth: int) -> Finding | None:
        for decoded in decodings(run):
            if inner := self.find(decoded, depth=depth - 1):
                value = "\x00".join(f.value for f in inner)
                return Finding(inner[0].kind, 0, 0, f"encoded:{inner[0].format}", value)
        return None

    def redact_text(self, text: str, key: bytes | None = None, only: set[int] | None = None) -> str:
        parts, done = [], 0
        for f in self.find(text, only):
            parts += [text[done : f.start], marker(f.kind, f.value, key)]
            done = f.end
        return "".join([*parts, text[done:]]) if parts else text

    def secret_key(self, key: str) -> bool:
        """Is ``key`` (an argument name, in any spelling) a name whose value is a secret?"""
        return _secret_key(self.catalog.keys, key)

    # --- structures ---------------------------------------------------------------------

    def redact_value(
        self, value: Any, key: bytes | None = None, body: str | None = None, *, keys: bool = True
    ) -> Any:
        """``value`` with every secret in its strings, keys and secret-keyed values replaced.

        ``body`` is ``value``'s JSON text when the caller has it (the log writer does):
        the hint pass runs on it, and a value with no hint is returned as it is. ``keys``:
        whether dict keys are argument names (a record), so a ``client_secret`` key hides its
        value; figures keyed by tool or member names (stats) pass False.
        """
        return self.redacted(value, key, body, keys=keys)[0]

    def redacted(
        self, value: Any, key: bytes | None, body: str | None, *, keys: bool = True
    ) -> tuple[Any, bool]:
        """(``value`` redacted, whether anything was replaced); ``value`` itself when not."""
        if body is None:
            body = json.dumps(value, ensure_ascii=False, default=str)
        wanted = self._confirmed("\n".join([body, *_joins(value)]))
        if not keys:
            wanted.discard(_KEYS)
        if not wanted and not (self.decode and may_be_encoded(_sent(value, body))):
            return value, False
        walk = _Walk(self, wanted, key)
        result = walk.value(value)
        return (result, True) if walk.changed else (value, False)


class _Walk:
    """One walk over a structure whose JSON text held hints of ``wanted``."""

    def __init__(self, redactor: Redactor, wanted: set[int], key: bytes | None) -> None:
        self.redactor, self.key = redactor, key
        self.formats = wanted - {_KEYS}  # none: only secret keys to look for, texts stay
        self.keys = _KEYS in wanted
        self.changed = False
        self._done: dict[str, str] = {}  # a record repeats its keys and words: each once
        self._caller = 0  # > 0 inside a field the caller sent (CALLER_FIELDS)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, dict):
            items = self._split(list(value.items()))
            return {self._key(k): self._item(k, v) for k, v in items}
        if isinstance(value, list | tuple):
            return [self.value(v) for _, v in self._split(list(enumerate(value)))]
        return value

    def _split(self, items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """A secret cut across adjacent strings the caller sent: each piece gets its marker.
        The strings are read joined, once; only a finding that crosses an edge is taken here
        (one inside a string is the string's own walk)."""
        if not self._caller or len(items) < 2:
            return items
        texts = [_joinable(v) for _, v in items]
        edges = list(accumulate(len(t) for t in texts))
        for f in self.redactor.find("".join(texts)):
            if any(f.start < edge < f.end for edge in edges[:-1]):
                texts = _marked(texts, edges, f, marker(f.kind, f.value, self.key))
                self.changed = True
        return [(k, t if isinstance(v, str) else v) for (k, v), t in zip(items, texts, strict=True)]

    def _text(self, text: str) -> str:
        if not self.formats and not self.redactor.decode:
            return text
        if (done := self._done.get(text)) is None:
            hits = self.redactor.hinted(text) & self.formats
            look = hits or (self.redactor.decode and may_be_encoded(text))
            done = self.redactor.redact_text(text, self.key, hits) if look else text
            self._done[text] = done
            self.changed = self.changed or done != text
        return done

    def _key(self, key: Any) -> Any:
        return self._text(key) if isinstance(key, str) else key

    def _item(self, key: Any, value: Any) -> Any:
        if self.keys and isinstance(key, str) and self.redactor.secret_key(key):
            return self.masked(_key_kind(key), value)
        caller = key in CALLER_FIELDS
        self._caller += caller
        try:
            return self.value(value)
        finally:
            self._caller -= caller

    def masked(self, kind: str, value: Any) -> Any:
        """Everything under a secret key is the secret: every string and number in it."""
        if isinstance(value, str) and value and not MARKER.fullmatch(value):
            return self._mark(kind, value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._mark(kind, str(value))
        if isinstance(value, dict):
            return {k: self.masked(kind, v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.masked(kind, v) for v in value]
        return value

    def _mark(self, kind: str, secret: str) -> str:
        self.changed = True
        return marker(kind, skeleton(secret).text, self.key)  # hashed as formats hash theirs


def _chosen(catalog: Catalog, settings: RedactSection) -> Catalog:
    """The catalogue less the personal data that ``[redact]`` keeps as it is."""
    formats = tuple(
        f
        for f in catalog.formats
        if not f.personal or (settings.personal and f.kind not in settings.keep)
    )
    return replace(catalog, formats=formats) if len(formats) != len(catalog.formats) else catalog


def _sent(value: Any, body: str) -> str:
    """What a record's caller sent (its content and CALLER_FIELDS), as one text: the encoded
    runs are looked for there, not in the guard's own fields (ids, hashes, codes), which are
    most of a record; a structure that is no record is looked at whole (``body``). When a run
    is found, the walk looks into every string (a reason may quote the content)."""
    if not isinstance(value, dict) or not ({"content", *CALLER_FIELDS, "tool_call"} & value.keys()):
        return body
    parts = [value.get("content"), *(_caller_parts(value))]
    return "\n".join(json.dumps(p, ensure_ascii=False, default=str) for p in parts if p)


def _caller_parts(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in CALLER_FIELDS:
                yield v
            elif isinstance(v, dict):
                yield from _caller_parts(v)


def _joinable(value: Any) -> str:
    """A value as it takes part in the joined text: a string itself, anything else a NUL that
    no format matches across (a number between two strings keeps them apart)."""
    return value if isinstance(value, str) else "\x00"


def _marked(values: list[str], edges: list[int], f: Finding, mark: str) -> list[str]:
    """``values`` with the part of each that ``f`` covers (in their joined text) replaced."""
    out, begin = [], 0
    for value, edge in zip(values, edges, strict=True):
        if f.start < edge and begin < f.end:
            head = value[: max(0, f.start - begin)]
            tail = value[min(len(value), f.end - begin) :] if f.end < edge else ""
            value = head + mark + tail
        out.append(value)
        begin = edge
    return out


def _joins(value: Any) -> Iterator[str]:
    """The strings of each object or list in the caller's fields, joined (for the hint pass)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _pairs(v) if k in CALLER_FIELDS else _joins(v)


def _pairs(value: Any) -> Iterator[str]:
    items = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(items, list):
        return
    if len(items) > 1:
        yield "".join(_joinable(v) for v in items)
    for v in items:
        yield from _pairs(v)


@lru_cache(maxsize=4096)
def _secret_key(rules: KeyRules, key: str) -> bool:
    return rules.is_secret(screen(key))  # the same few keys come back in every record


def _matches(fmt: SecretFormat, form: Skeleton) -> list[Finding]:
    found = []
    named = "secret" in fmt.regex.groupindex
    for match in fmt.regex.finditer(form.text):
        start, end = match.span("secret") if named else match.span()
        value = form.text[start:end].rstrip(fmt.trim) if start >= 0 else ""
        end = start + len(value)
        if not value:
            continue
        if fmt.accepts(value):
            begin, finish = form.span(start, end)
            hashed = value.translate(_NUMBER_MARKS).lower() if fmt.personal else value
            found.append(Finding(fmt.kind, begin, finish, fmt.id, hashed))
    return found


def _disjoint(found: list[Finding], taken: list[tuple[int, int]]) -> list[Finding]:
    """Earliest first, the longer of two that start together; two that overlap become one
    (so the tail of the second is not left in the clear); none over an existing marker."""
    kept: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if any(f.start < b and a < f.end for a, b in taken):
            continue
        last = kept[-1] if kept else None
        if last is None or f.start >= last.end:
            kept.append(f)
        elif f.end > last.end:
            kept[-1] = replace(last, end=f.end, value=f"{last.value}\x00{f.value}")
    return kept
