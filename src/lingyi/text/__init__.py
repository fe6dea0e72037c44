"""Text as checks see it: one canonical form per text, computed once.

``canonical(text, names)`` returns a :class:`Canonical` whose ``text`` every check matches on;
lexicons go through ``canonical_text`` so that terms and texts meet in the same form.
"""

from lingyi.text._canonical import Canonical, canonical, canonical_text, fold_look_alikes
from lingyi.text._entities import Entities, Number, entities
from lingyi.text._terms import Hit, TermMatcher
from lingyi.text._urls import extract_urls, normalize_url
from lingyi.text._zh_numbers import arabic_numerals

__all__ = [
    "Canonical",
    "Entities",
    "Hit",
    "Number",
    "TermMatcher",
    "arabic_numerals",
    "canonical",
    "canonical_text",
    "entities",
    "extract_urls",
    "fold_look_alikes",
    "normalize_url",
]
