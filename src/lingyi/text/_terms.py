"""Find every term of a lexicon in one pass over a text.

A lexicon's terms (domain vocabularies, medical conditions, status words) go into one
Aho-Corasick automaton (``pyahocorasick``), so the cost of a search does not grow with the
number of terms. Terms are canonical (the same form the text is in). Chinese terms match
anywhere; Latin terms match whole words ("zen", not "zendesk"), or as stems when written
with a trailing ``*`` ("philosoph*" matches philosophy and philosophers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import ahocorasick

from lingyi.text._canonical import canonical_text


@dataclass(frozen=True)
class Hit:
    """One occurrence of a term: the groups it belongs to and where it is in the text."""

    term: str
    groups: frozenset[str]
    start: int
    end: int  # exclusive; for a stem, the end of the word it begins


@dataclass(frozen=True)
class _Entry:
    term: str
    stem: bool
    groups: frozenset[str]


def _is_word_char(char: str) -> bool:
    return char.isascii() and char.isalnum()


class TermMatcher:
    """The terms of named groups, matched on canonical text."""

    def __init__(self, groups: Mapping[str, Iterable[str]]) -> None:
        entries: dict[str, tuple[bool, set[str]]] = {}
        listed = {group: list(terms) for group, terms in groups.items()}
        forms = (canonical_text(r.strip().rstrip("*")) for ts in listed.values() for r in ts)
        for group, terms in listed.items():
            for raw in terms:
                term = next(forms).strip()
                if term:
                    stem, owners = entries.setdefault(term, (raw.strip().endswith("*"), set()))
                    owners.add(group)
        self._automaton = ahocorasick.Automaton()
        for term, (stem, owners) in entries.items():
            self._automaton.add_word(term, _Entry(term, stem, frozenset(owners)))
        self._empty = not entries
        if not self._empty:
            self._automaton.make_automaton()

    def find(self, text: str) -> list[Hit]:
        """Every occurrence of every term in ``text`` (canonical), overlapping ones included."""
        if self._empty:
            return []
        hits = []
        for last, entry in self._automaton.iter(text):
            start = last - len(entry.term) + 1
            if (hit := _hit(text, entry, start, last + 1)) is not None:
                hits.append(hit)
        return hits

    def groups(self, text: str) -> dict[str, list[str]]:
        """Group → the distinct terms of that group found in ``text``, in order of first use."""
        found: dict[str, list[str]] = {}
        for hit in self.find(text):
            for group in sorted(hit.groups):
                terms = found.setdefault(group, [])
                if hit.term not in terms:
                    terms.append(hit.term)
        return found

    def first(self, text: str) -> Hit | None:
        hits = self.find(text)
        return min(hits, key=lambda h: (h.start, -h.end)) if hits else None


def _hit(text: str, entry: _Entry, start: int, end: int) -> Hit | None:
    """The occurrence if it stands on word edges (for Latin terms), else None."""
    if _is_word_char(entry.term[0]) and start > 0 and _is_word_char(text[start - 1]):
        return None
    if entry.stem:
        while end < len(text) and _is_word_char(text[end]):
            end += 1
    elif _is_word_char(entry.term[-1]) and end < len(text) and _is_word_char(text[end]):
        return None
    return Hit(text[start:end], entry.groups, start, end)
