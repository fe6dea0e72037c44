"""Patterns compiled on first use (lingyi._regex): every one compiles, and each behaves as
the pattern it stands in for.

A lazy pattern's syntax error would surface only when a check first reaches it, so this test
imports every module that makes them and compiles each one; and it pins that, once compiled,
a stand-in's methods are the compiled pattern's own (no cost per call beyond the pattern's).
"""

from __future__ import annotations

import importlib
import re

import pytest

from lingyi._regex import LazyPattern, lazy_re, made

MODULES = [
    "lingyi.checks",
    "lingyi.checks.claims",
    "lingyi.checks._agreement",
    "lingyi.checks.relays",
    "lingyi.checks.boundary",
    "lingyi.checks._forecast",
    "lingyi.checks._asserted",
    "lingyi.checks.facts",
    "lingyi.text._lang",
    "lingyi.text._entities",
    "lingyi.council",
    "lingyi.answers.markdown",
    "lingyi.conclusions.checks",
    "lingyi.backends.kb.terms",
]


def test_every_lazy_pattern_compiles() -> None:
    """All module-level lazy patterns of lingyi (over 100) compile, with their flags."""
    for name in MODULES:
        importlib.import_module(name)
    patterns = made()
    assert len(patterns) > 100
    for lazy in patterns:
        compiled = lazy.compiled()
        assert compiled.pattern == lazy.pattern, lazy


CASES = [
    (r"(?P<who>灵[通知依研])说", 0, "据说灵通说审计已完成，灵知说没有"),
    (r"\bwill (?:ship|launch)\b", re.IGNORECASE, "It WILL ship Monday; it will launch later"),
    (r"[\u3400-\u9fff]+", 0, "abc 庄子 def 逍遥游"),
]


@pytest.mark.parametrize(("source", "flags", "text"), CASES)
def test_a_lazy_pattern_answers_as_the_compiled_one(source: str, flags: int, text: str) -> None:
    """search, finditer, findall, sub, split, groupindex and flags agree with re.compile's,
    before and after the first compile (Chinese and English)."""
    real = re.compile(source, flags)
    lazy = lazy_re(source, flags)
    assert lazy.pattern == source  # readable before any compile
    found = lazy.search(text)
    assert found is not None and found.span() == real.search(text).span()  # type: ignore[union-attr]
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert lazy.findall(text) == real.findall(text)
    assert lazy.sub("_", text) == real.sub("_", text)
    assert lazy.split(text) == real.split(text)
    assert (lazy.groupindex, lazy.flags) == (real.groupindex, real.flags)


def test_once_compiled_the_methods_are_the_patterns_own() -> None:
    """After the first use a stand-in holds the compiled pattern's bound methods, so a call
    costs what calling the pattern costs."""
    lazy = lazy_re(r"\d+")
    assert isinstance(lazy, LazyPattern) and "search" not in vars(lazy)
    assert lazy.search("a1") is not None
    assert type(vars(lazy)["search"]) is type(re.compile("x").search)
    assert vars(lazy)["search"].__self__.pattern == r"\d+"
