"""Search terms: how text becomes index tokens, and how often a term occurs in a field.

SQLite's ``unicode61`` tokenizer would treat a run of Chinese characters as one token, so a
two-character query such as 气功 would never match 气功源流. We therefore segment CJK text
ourselves into overlapping bigrams (plus the run's last character, so single-character prefix
queries still work) and hand FTS5 space-separated tokens. Queries are segmented the same way
and every token is quoted, so no user text ever reaches ``MATCH`` as syntax.

The final ranking counts terms in the stored text (:meth:`Term.count_in`) instead of keeping
each document's tokens: the counts equal what the index holds, by construction of the tokens.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from lingyi._regex import lazy_re

MAX_QUERY_TERMS = 32  # bounds the cost of one MATCH
SNIPPET_CHARS = 80
SNIPPET_LEAD = 20  # characters of context kept before the first matching term

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# Compiled on first use (~15 ms together: large Unicode classes): a command that opens no
# knowledge base (most of ``lingyi verify``) imports this module without needing them.
_TOKEN_RE = lazy_re(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE = lazy_re(rf"[{_CJK}]")
_CJK_RUN_RE = lazy_re(rf"[{_CJK}]+")
_WORD_RE = lazy_re(rf"[^\W_{_CJK}]+")
_UCS4 = "I" if array("I").itemsize == 4 else "L"  # an array item per UTF-32 code unit
_SPACE = array(_UCS4, [ord(" ")])
_WORD_CHAR = rf"[^\W_{_CJK}]"

Kind = Literal["word", "bigram", "prefix"]


def segment(text: str, *, for_index: bool = True) -> list[str]:
    """Split text into search tokens: lowercase words and overlapping CJK bigrams.

    For the index, each CJK run also yields its last character, so that every character of
    the run starts some token and a one-character query can be answered as a prefix query.
    """
    tokens: list[str] = []
    for run in _TOKEN_RE.findall(text):
        if not _CJK_RE.match(run):
            tokens.append(run.lower())
        elif len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
            if for_index:
                tokens.append(run[-1])
    return tokens


@dataclass(frozen=True)
class Term:
    """One distinct term of a query."""

    text: str
    kind: Kind  # prefix: a lone CJK character, matching every token that starts with it
    _word: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @property
    def prefix(self) -> bool:
        return self.kind == "prefix"

    def match_expr(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + " *" if self.prefix else quoted

    def count_in(self, text: str, lowered: str) -> int:
        """How many of ``text``'s index tokens this term matches (``lowered``: text.lower()).

        A CJK bigram is a token wherever the two characters stand side by side (they are
        then in one CJK run); a lone character starts one token per occurrence; a word is a
        whole run of word characters, lowercased.
        """
        if self._word is not None:
            return len(self._word.findall(lowered)) if self.text in lowered else 0
        if self.kind == "prefix" or self.text[0] != self.text[1]:
            return text.count(self.text)
        return _overlapping(text, self.text)  # 气气气 holds 气气 twice


def _overlapping(text: str, part: str) -> int:
    count, at = 0, text.find(part)
    while at >= 0:
        count, at = count + 1, text.find(part, at + 1)
    return count


def _term(token: str) -> Term:
    if not _CJK_RE.match(token):
        # The word first, then the look-behind: a leading look-behind would be tried at every
        # position, the literal lets the engine skip to candidates.
        word = re.escape(token)
        pattern = re.compile(rf"{word}(?<!{_WORD_CHAR}{word})(?!{_WORD_CHAR})")
        return Term(token, "word", pattern)
    return Term(token, "prefix" if len(token) == 1 else "bigram")


def query_terms(query: str) -> list[Term]:
    """The distinct terms of a query, in order, capped at ``MAX_QUERY_TERMS``."""
    tokens = dict.fromkeys(segment(query, for_index=False))
    return [_term(token) for token in list(tokens)[:MAX_QUERY_TERMS]]


def index_text(text: str) -> tuple[str, int]:
    """The text as the tokens FTS5 indexes (separated by spaces), and how many there are.

    The tokens of ``segment(text)``, built without a Python step per token since this runs
    on every document of a build: the words, then the CJK bigrams and run ends of all runs
    at once (``_cjk_tokens``). Their order and the number of spaces between them differ
    from ``segment``'s, which changes nothing: the index keeps no positions.
    """
    words = _WORD_RE.findall(text)
    runs = _CJK_RUN_RE.findall(text)
    cjk, count = _cjk_tokens(runs) if runs else ("", 0)
    return " ".join(words).lower() + " " + cjk, len(words) + count


def _cjk_tokens(runs: list[str]) -> tuple[str, int]:
    """Every run's bigrams and last character: with the runs joined by spaces (``a``),
    token i is ``a[i] + b[i]``, where ``b`` is ``a`` shifted by one with a space wherever a
    run ends or starts (the run's last character then stands alone; a separator yields
    nothing). ``a``, ``b`` and spaces are interleaved as code points in one array."""
    a = " ".join(runs)
    b = "  ".join([run[1:] for run in runs]) + " "
    merged = _SPACE * (3 * len(a))
    merged[0::3] = array(_UCS4, a.encode("utf-32-le"))
    merged[1::3] = array(_UCS4, b.encode("utf-32-le"))
    return merged.tobytes().decode("utf-32-le"), len(a) + 1 - len(runs)


def make_snippet(body: str, terms: Sequence[Term], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of the body around the first term it contains."""
    text = re.sub(r"\s+", " ", re.sub(r"(?m)^#+\s*", "", body)).strip()
    lowered = text.lower()
    hits = [pos for pos in (lowered.find(t.text) for t in terms) if pos >= 0]
    start = max(0, min(hits) - SNIPPET_LEAD) if hits else 0
    start = max(0, min(start, len(text) - width))
    window = text[start : start + width].strip()
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(text) else ""
    return prefix + window + suffix
