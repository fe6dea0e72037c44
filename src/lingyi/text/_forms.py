"""The canonical forms of lexicon terms, kept across starts.

Every lexicon term goes through :func:`canonical_text` before it enters an automaton: about
7,500 distinct terms in the shipped lexicons, 60-100 ms of a ``lingyi verify`` on this
machine, the same result every time. They are kept in the user's cache
(``$XDG_CACHE_HOME/lingyi/canonical``, :mod:`lingyi._cachefile`: plain JSON, used only when
private to the user), keyed by what canonical text depends on: the Python version (NFKC and
HTML entities), OpenCC's version, and the content of :mod:`._canonical` and the look-alike
table. A change to either is a new key, so stale forms are never read; a term not yet kept
is computed and the file rewritten once per batch.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path

import opencc

from lingyi._cachefile import read_private, user_cache, write_private
from lingyi.text._canonical import canonical_text

FORMAT = 1
_MAX = 200_000  # forms kept; past it the file starts over (lexicons edited many times)
_lock = threading.Lock()


@cache
def _key() -> str:
    """Everything canonical text depends on, as one string."""
    digest = hashlib.sha256(Path(__file__).with_name("_canonical.py").read_bytes())
    digest.update((resources.files(__package__) / "data" / "confusables.toml").read_bytes())
    version = getattr(opencc, "__version__", "?")
    return f"canonical {FORMAT}|{sys.version}|opencc {version}|{digest.hexdigest()[:16]}"


def _path() -> Path:
    return user_cache("canonical", "terms.json")


@cache
def _kept() -> dict[str, str]:
    """The forms kept by earlier starts (read once per process)."""
    entries = read_private(_path(), _key())
    return {k: v for k, v in entries.items() if isinstance(v, str)}


def canonical_forms(texts: Iterable[str]) -> list[str]:
    """``canonical_text`` of each text, from the kept forms where they hold it. No texts
    (an empty matcher, built at import by a check module) reads no kept forms: the file of
    ~7,500 forms is 4-6 ms that a server's start then does not pay."""
    texts = list(texts)
    if not texts:
        return []
    kept = _kept()
    forms, new = [], {}
    for text in texts:
        form = kept.get(text)
        if form is None:
            form = new[text] = canonical_text(text)
        forms.append(form)
    if new:
        _keep(kept, new)
    return forms


def _keep(kept: dict[str, str], new: dict[str, str]) -> None:
    with _lock:
        if len(kept) + len(new) > _MAX:
            kept.clear()
        kept.update(new)
        write_private(_path(), _key(), dict(kept))
