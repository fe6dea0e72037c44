"""The closest valid value to a wrong one, so that a model can fix its call in one retry.

A value one or two edits away from a valid one (``expriment_logs`` → ``experiment_logs``,
``Main`` → ``main``) is almost certainly that value mistyped; a value far from every valid
one is not guessed at. Edits are counted on the values as written (Levenshtein, with a
transposition counting once), case differences first.
"""

from __future__ import annotations

from collections.abc import Iterable


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn ``a`` into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1]


def allowed_edits(value: str) -> int:
    """How far a mistyping may be: one edit for short values, two from eight characters."""
    return 1 if len(value) < 8 else 2


def closest(value: object, candidates: Iterable[str]) -> str | None:
    """The one candidate within :func:`allowed_edits` of ``value``; None when there is none or
    two are equally close (then guessing would be a coin toss)."""
    if not isinstance(value, str) or not value:
        return None
    pool = list(dict.fromkeys(candidates))
    if value in pool:
        return None  # already valid: nothing to correct
    folded = [c for c in pool if c.casefold() == value.casefold()]
    if len(folded) == 1:
        return folded[0]
    scored = sorted((distance(value, c), c) for c in pool)
    best = [c for d, c in scored if d == scored[0][0]] if scored else []
    if len(best) != 1 or scored[0][0] > allowed_edits(value):
        return None
    return best[0]
