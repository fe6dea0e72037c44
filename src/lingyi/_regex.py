"""Regular expressions compiled on first use, at no cost per use afterwards.

The check modules hold some 190 module-level patterns; compiling them all at import was
about 60 ms of every start (140 ms on a loaded machine), although one ``lingyi verify`` uses
a fraction of them. :func:`lazy_re` returns a stand-in that compiles its pattern the first
time any attribute other than ``pattern`` is asked for, then copies the compiled pattern's
methods onto itself, so every later ``search``/``sub``/``finditer`` is an instance attribute
bound to the compiled pattern: the same cost as calling the pattern directly.

It stands in for a pattern's methods and attributes, not for the pattern object: do not pass
it to ``re.sub(...)``/``re.compile(...)`` or test it with ``isinstance``; call its methods.
A syntax error surfaces at first use, so every lazy pattern is compiled by a test
(``tests/test_regex.py``).
"""

from __future__ import annotations

import re
from typing import Any, cast

# Everything code reads off a compiled pattern, copied onto the stand-in once compiled.
_DELEGATED = (
    "search",
    "match",
    "fullmatch",
    "finditer",
    "findall",
    "sub",
    "subn",
    "split",
    "scanner",
    "flags",
    "groups",
    "groupindex",
)
_MADE: list[LazyPattern] = []  # every stand-in, so a test can compile them all


class LazyPattern:
    """A pattern's source and flags until first use; the pattern's own methods after."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern  # readable without compiling (patterns are built from others)
        self._flags = flags
        _MADE.append(self)

    def compiled(self) -> re.Pattern[str]:
        """Compile (once), and make every delegated attribute the compiled pattern's."""
        found = re.compile(self.pattern, self._flags)
        for name in _DELEGATED:
            setattr(self, name, getattr(found, name))
        return found

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes not set yet: before the first compile, or a name
        # outside _DELEGATED (answered by the compiled pattern, from re's own cache).
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy_re({self.pattern!r}, {self._flags})"


def lazy_re(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """A pattern compiled on first use (typed as the pattern it stands in for)."""
    return cast(re.Pattern[str], LazyPattern(pattern, int(flags)))


def made() -> list[LazyPattern]:
    """Every lazy pattern created so far (for the test that compiles them all)."""
    return list(_MADE)
