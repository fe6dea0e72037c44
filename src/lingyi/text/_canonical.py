"""The canonical form of a text: what every check matches on.

A model that wants an approval chooses the script, the spelling and the invisible characters
that get it. Before any check, a text is brought to one form, once: HTML entities decoded,
Unicode NFKC (full-width letters, ligatures, mathematical letters), zero-width and other
format characters removed, traditional Chinese converted to simplified (OpenCC), Latin
look-alike letters from other scripts folded, spaces and separators removed inside member
names (灵 通, Ling-Flow) and between Chinese characters, and English case folded. Lexicons
go through the same function, so a term and a text meet in the same form.

The original is never changed: the log keeps it, and :class:`Canonical` says which steps
changed the text and how many format characters sat inside words (a signal in itself).
"""

from __future__ import annotations

import html
import re
import tomllib
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import opencc

# Format (Cf) characters, variation selectors, the combining grapheme joiner and the
# invisible Hangul fillers: none of them is visible, all of them split a word for a regex.
_FORMAT = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]+"
)
_HIDDEN = re.compile(rf"(?<=\w){_FORMAT.pattern}(?=\w)")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_CJK = re.compile(f"[{_CJK}]")
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])")
# Letters of scripts that lend look-alikes to Latin, with Latin itself: the words to inspect.
_WORD = re.compile(
    "[A-Za-z\u00c0-\u024f\u0250-\u02af\u0370-\u03ff\u0400-\u052f\u0530-\u058f"
    "\u13a0-\u13ff\u1d00-\u1d7f]+"
)
_LATIN = re.compile("[A-Za-z]")
# Separators a name may be split with: spaces, dots, dashes, underscores, middle dots, stars.
_SEP = r"[\s\-_.·・*•'\"|/\\+~]{0,3}"
_MAX_HTML_ROUNDS = 3  # &amp;#28789; is 灵 after two rounds


@dataclass(frozen=True)
class Canonical:
    """A text in canonical form, with what normalisation did to it."""

    original: str
    cased: str  # every step but case folding: for ids and URLs, whose case may matter
    text: str  # what checks match on
    changes: tuple[str, ...] = ()  # the steps that changed the text, in order
    hidden: int = 0  # format characters found inside words
    mixed: tuple[str, ...] = ()  # words that mixed Latin with look-alike letters

    @property
    def changed(self) -> bool:
        """Did normalisation change anything beyond English case?"""
        return bool(self.changes)

    @property
    def obfuscated(self) -> bool:
        """Invisible characters inside words, or look-alike letters inside Latin words."""
        return self.hidden > 0 or bool(self.mixed)


@cache
def _converter() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


@cache
def _look_alikes() -> dict[str, str]:
    raw = (resources.files(__package__) / "data" / "confusables.toml").read_text("utf-8")
    table: dict[str, str] = tomllib.loads(raw)["latin"]
    return table


def _unescape(text: str) -> str:
    for _ in range(_MAX_HTML_ROUNDS):
        if "&" not in text or (decoded := html.unescape(text)) == text:
            break
        text = decoded
    return text


def _fold_word(match: re.Match[str]) -> str:
    word, table = match.group(0), _look_alikes()
    foreign = [c for c in word if not c.isascii()]
    if not foreign or not (_LATIN.search(word) or all(c in table for c in foreign)):
        return word  # plain Latin, or a genuine word of another script
    return "".join(table.get(c, c) for c in word)


def fold_look_alikes(text: str) -> str:
    return _WORD.sub(_fold_word, text)


@lru_cache(maxsize=64)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """Member names with separators allowed between their characters (灵 通, Ling-Flow)."""
    # One alternative per spelling that differs in more than case (LingFlow, lingflow and
    # "Ling Flow" are one): the pattern ignores case, and each alternative costs compile time.
    bare: dict[str, str] = {}
    for n in names:
        if len(n) > 1:
            joined = "".join(c for c in n if not c.isspace())
            bare.setdefault(joined.lower(), joined)
    spread = [_SEP.join(re.escape(c) for c in n) for n in bare.values()]
    if not spread:
        return None
    alternatives = "|".join(f"(?:{p})" for p in sorted(spread, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])", re.IGNORECASE)


def _join_names(text: str, names: tuple[str, ...]) -> str:
    pattern = _name_pattern(names)
    return pattern.sub(lambda m: re.sub(_SEP, "", m.group(0)), text) if pattern else text


def _nfkc(text: str) -> str:
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


def _simplified(text: str) -> str:
    return _converter().convert(text) if _HAS_CJK.search(text) else text


def _no_cjk_gaps(text: str) -> str:
    return _CJK_GAP.sub("", text) if _HAS_CJK.search(text) else text


def _folded(text: str) -> str:
    return text if text.isascii() else fold_look_alikes(text)


_STEPS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("html", _unescape),
    ("nfkc", _nfkc),
    ("format_characters", lambda t: _FORMAT.sub("", t)),
    ("traditional", _simplified),
    ("cjk_spacing", _no_cjk_gaps),
    ("look_alikes", _folded),
)


@lru_cache(maxsize=8192)
def _canonical(text: str, names: tuple[str, ...]) -> Canonical:
    cased, changes, hidden = text, [], 0
    for name, step in (*_STEPS, ("names", lambda t: _join_names(t, names))):
        if name == "format_characters":
            hidden = len(_HIDDEN.findall(cased))
        if (changed := step(cased)) != cased:
            changes.append(name)
        cased = changed
    mixed = tuple(
        w
        for w in _WORD.findall(text)
        if _LATIN.search(w) and not w.isascii() and fold_look_alikes(w) != w
    )
    return Canonical(text, cased, cased.casefold(), tuple(changes), hidden, mixed)


def canonical(text: str, names: Iterable[str] = ()) -> Canonical:
    """``text`` in canonical form; ``names`` (member names) are re-joined when split."""
    return _canonical(text, tuple(names))


def canonical_text(text: str) -> str:
    """Just the matching form, for lexicon terms and record texts."""
    return _canonical(text, ()).text
