"""Text in the form secrets are matched in, with a map back to the original.

A key typed in full-width letters (ｓｋ－ａｎｔ－…), split by zero-width characters, written
with HTML entities or with a Cyrillic look-alike letter is still that key. Matching happens
on the canonical form of :mod:`lingyi.text` (NFKC, format characters removed, HTML entities
decoded, traditional Chinese simplified, look-alike letters folded), case kept. It is taken
one character (or one entity) at a time, so every matched span maps back to the original
text and only the secret is replaced there; the canonical form of the whole text also joins
member names and removes spaces between Chinese characters, which would blur the offsets.

Two forms are made: :func:`screen`, the whole text lower-cased, fast (ASCII, ideographs and
punctuation as they are, the rare other characters one by one), only to decide whether any
format could be present; and
:func:`skeleton`, the exact per-character form with its offsets, made only for a text that
passed the screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lingyi.text import canonical

# One unit of the map: an HTML entity, or a non-ASCII character (ASCII is its own form).
_UNIT = re.compile(
    r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});|[^\x00-\x7f]"
)
# Characters that need no work for the hint pass: ASCII, ideographs, CJK and general
# punctuation, and the full-width punctuation of Chinese prose (！（），：；？), which no hint
# contains but ":" (the catalogue adds a "：" spelling of those hints). Anything else (full-width
# letters, compatibility letters, format characters, look-alikes) takes the per-character form.
_ODD = re.compile(
    r"[^\x00-\x7f\u2010-\u2027\u2030-\u205e\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff"
    r"\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f]"
)
WIDE_COLON = "\uff1a"
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


@lru_cache(maxsize=8192)
def unit(raw: str) -> str:
    """The canonical form of one character or entity, case kept ("" for a zero-width one)."""
    return canonical(raw).cased


def _unit_of(match: re.Match[str]) -> str:
    return unit(match.group(0))


def screen(text: str) -> str:
    """The lower-cased matching form of a whole text, for the hint pass (no offsets).

    Most records are ASCII, ideographs and punctuation: one C-speed scan finds nothing else
    and the text is only lower-cased. Any other character takes its per-character form (the
    rest is its own form already, as far as any hint is concerned).
    """
    if not text.isascii() and _ODD.search(text):
        text = _ODD.sub(_unit_of, text)
    if "&" in text:
        text = _ENTITY.sub(_unit_of, text)
    return text.lower()


@dataclass(frozen=True)
class Skeleton:
    """A text in matching form; ``span`` maps a span of it back to the original."""

    text: str
    begins: tuple[int, ...] | None = None  # None: the text is its own form
    ends: tuple[int, ...] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        if self.begins is None or self.ends is None:
            return start, end
        return self.begins[start], self.ends[end - 1]


def skeleton(text: str) -> Skeleton:
    """``text`` in matching form, each of its characters mapped to the unit it came from."""
    if "&" not in text and (text.isascii() or not _ODD.search(text)):
        return Skeleton(text)  # ASCII, ideographs, punctuation: patterns match them as they are
    resized = False

    def form(match: re.Match[str]) -> str:
        nonlocal resized
        out = unit(match.group(0))
        resized = resized or len(out) != 1 or len(match.group(0)) != 1
        return out

    same_size = _UNIT.sub(form, text)
    if not resized:  # ideographs, full-width letters: one character for one, offsets unchanged
        return Skeleton(same_size)
    return _mapped(text)


def _mapped(text: str) -> Skeleton:
    """The form of a text whose units change length (zero-width characters, entities)."""
    parts: list[str] = []
    begins: list[int] = []
    ends: list[int] = []
    done = 0
    for match in _UNIT.finditer(text):
        _copy(text, done, match.start(), parts, begins, ends)
        form = unit(match.group(0))
        parts.append(form)
        begins += [match.start()] * len(form)
        ends += [match.end()] * len(form)
        done = match.end()
    _copy(text, done, len(text), parts, begins, ends)
    return Skeleton("".join(parts), tuple(begins), tuple(ends))


def _copy(
    text: str, start: int, end: int, parts: list[str], begins: list[int], ends: list[int]
) -> None:
    """ASCII between units is its own form: copied, each character mapped to itself."""
    parts.append(text[start:end])
    begins += range(start, end)
    ends += range(start + 1, end + 1)
