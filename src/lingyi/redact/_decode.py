"""Text hidden in an encoding: base64, hex, URL percent-escapes.

A secret pasted base64-encoded (a config blob, a Basic header), hex-encoded (a dump) or
URL-encoded (a query string) matches no format as it is. :func:`encoded_runs` finds runs that
could be such an encoding, and :func:`decodings` yields what a run decodes to when that is text
(printable UTF-8). A commit SHA, a trace id or a ULID decodes to bytes that are no text, so
it is never mistaken for one: only decoded text is searched.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from urllib.parse import unquote

# Runs of the base64 alphabet (hex is inside it), and URL tokens with a %XX escape. A run is
# looked into when it could be text: base64 of text mixes upper and lower case, hex of UTF-8
# text has no byte 00-08, 0b-0c, 0e-1f or f0-ff. A ULID (upper case), a SHA (lower case hex,
# mostly bytes that are no text) rarely qualifies, and decodes to no text when it does.
_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_URL = re.compile(r"(?<![^\s\"'<>])[^\s\"'<>%]*%[0-9A-Fa-f]{2}[^\s\"'<>]*")
_TEXT_HEX = re.compile(r"(?:[2-9A-Ea-e][0-9A-Fa-f]|0[9AaDd])+")
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2})+")
_CONTROL_OK = str.maketrans("", "", "\n\r\t")


def encoded_runs(text: str) -> Iterator[re.Match[str]]:
    """The runs of ``text`` that could be encoded text (base64, hex, URL-encoded)."""
    for match in _RUN.finditer(text):
        run = match.group(0)
        if run.lower() != run != run.upper() or _TEXT_HEX.fullmatch(run):
            yield match
    if "%" in text:
        yield from _URL.finditer(text)


def may_be_encoded(text: str) -> bool:
    if len(text) < 16 and "%" not in text:  # keys, codes, words: most strings of a record
        return False
    return next(encoded_runs(text), None) is not None


def decodings(run: str) -> Iterator[str]:
    """What ``run`` decodes to, when that is text (each encoding it could be, likeliest first)."""
    if "%" in run:
        if (unquoted := unquote(run)) != run:
            yield unquoted
        return
    raw = _hex(run) if _HEX.fullmatch(run) else _base64(run)
    if raw is not None and (text := _text(raw)) is not None:
        yield text


def _hex(run: str) -> bytes | None:
    try:
        return bytes.fromhex(run)
    except ValueError:
        return None


def _base64(run: str) -> bytes | None:
    padded = run.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(padded + "=" * (-len(padded) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if len(text) >= 4 and text.translate(_CONTROL_OK).isprintable() else None
