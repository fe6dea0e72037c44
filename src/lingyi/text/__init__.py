"""Text as checks see it: one canonical form per text, computed once.

``canonical(text, names)`` returns a :class:`Canonical` whose ``text`` every check matches on;
lexicons go through ``canonical_text`` so that terms and texts meet in the same form.
"""

from lingyi.text._canonical import Canonical, canonical, canonical_text, fold_look_alikes
from lingyi.text._terms import Hit, TermMatcher
from lingyi.text._urls import extract_urls, normalize_url

__all__ = [
    "Canonical",
    "Hit",
    "TermMatcher",
    "canonical",
    "canonical_text",
    "extract_urls",
    "fold_look_alikes",
    "normalize_url",
]
