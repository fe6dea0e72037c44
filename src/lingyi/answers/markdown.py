"""What an answer's Markdown holds, as a CommonMark renderer would read it.

Parsed with markdown-it-py (CommonMark), so a fence, a link or an image counts only where a
renderer would draw one: a ``](`` inside a code span is code, a fence in a blockquote is a
fence. What a renderer silently shows as text instead (a link whose target never closed, a
``javascript:`` target it refuses, a reference with no definition) is a broken link here.
Pure functions of the text; the checks in :mod:`lingyi.answers.checks` decide on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from lingyi._regex import lazy_re

if TYPE_CHECKING:  # markdown-it (and its ~50 regexes) loads with the first answer parsed
    from markdown_it import MarkdownIt
    from markdown_it.token import Token


@dataclass(frozen=True)
class Fence:
    """A fenced code block: where it starts (line, from 1), its opener, info and body."""

    line: int
    markup: str
    info: str
    body: str
    closed: bool


@dataclass(frozen=True)
class Cited:
    """A URL the answer points at: a link, an image, or an HTML ``href``/``src``."""

    url: str
    image: bool


@dataclass(frozen=True)
class Parsed:
    fences: tuple[Fence, ...]
    cited: tuple[Cited, ...]
    broken: tuple[str, ...]  # link or image syntax a renderer shows as plain text


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    class _AsWritten(MarkdownIt):
        """URLs as written: the ledger compares them in lingyi.text's normal form, and
        percent-encoding them here would make a returned URL look unknown."""

        def normalizeLink(self, url: str) -> str:
            return url

        def normalizeLinkText(self, link: str) -> str:
            return link

    return _AsWritten("commonmark")


@lru_cache(maxsize=256)
def parse(text: str) -> Parsed:
    """The fences, cited URLs and broken links of ``text``."""
    lines = text.splitlines()
    tokens = _parser().parse(text)
    fences = tuple(_fence(t, lines) for t in tokens if t.type == "fence")
    cited: list[Cited] = []
    broken: list[str] = []
    for token in tokens:
        if token.type == "html_block":
            cited += _html_urls(token.content)
        for child in token.children or ():
            _inline(child, cited, broken)
    return Parsed(fences, tuple(cited), tuple(dict.fromkeys(broken)))


_QUOTE = lazy_re(r"^(?:[ \t]{0,3}>)+")


def _fence(token: Token, lines: list[str]) -> Fence:
    """A fence is closed when its last source line is a run of its character at least as long
    as the opener, and nothing else (CommonMark); unclosed, it runs to the end of its block."""
    start, end = token.map or (0, 0)
    last = _QUOTE.sub("", lines[end - 1]).strip() if end - start >= 2 else ""
    char, size = token.markup[0], len(token.markup)
    closed = len(last) >= size and set(last) == {char}
    return Fence(start + 1, token.markup, token.info.strip(), token.content, closed)


# Text a renderer left as text although it was meant as a link or an image: a target that
# never closed or was refused (``](``), an image that did not parse (``![``), a reference with
# no definition (``[t][ref]``, though not ``a[0][1]``), a space before the target.
_BROKEN = lazy_re(
    r"\]\(|!\[|\[(?!\d+\])[^\[\]\n]+\]\[[^\[\]\n]*\]|\[[^\[\]\n]+\]\s+\((?:https?:|www\.)"
)
_HTML_URL = lazy_re(r"""\b(href|src)\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)


def _inline(token: Token, cited: list[Cited], broken: list[str]) -> None:
    if token.type == "link_open":
        href = str(token.attrs.get("href", ""))
        if not href.strip():
            broken.append("[…]()")
        elif not href.startswith("#"):  # an anchor in the answer itself cites nothing
            cited.append(Cited(href, image=False))
    elif token.type == "image":
        src = str(token.attrs.get("src", ""))
        if src.strip():
            cited.append(Cited(src, image=True))
        else:
            broken.append("![…]()")
    elif token.type == "html_inline":
        cited += _html_urls(token.content)
    elif token.type == "text" and (match := _BROKEN.search(token.content)):
        broken.append(_around(token.content, match.start()))


def _html_urls(html: str) -> list[Cited]:
    return [
        Cited(url, image=attr.lower() == "src")
        for attr, url in _HTML_URL.findall(html)
        if not url.startswith("#")
    ]


def _around(text: str, at: int) -> str:
    """The broken syntax with a little context, for the reason a model reads."""
    start = text.rfind("[", 0, at + 1)
    return text[max(0, start if start >= 0 else at) :][:60]


# --- Mermaid ------------------------------------------------------------------------------

_OPENERS = {
    "flowchart": ("subgraph",),
    "graph": ("subgraph",),
    "sequencediagram": ("loop", "alt", "opt", "par", "critical", "break", "rect", "box"),
}


def mermaid_type(body: str) -> tuple[str | None, list[str]]:
    """The diagram type a Mermaid block starts with, and the lines after it.

    Front matter (``---`` … ``---``), ``%%`` comments and ``%%{init}%%`` directives may come first.
    """
    lines = [line.strip() for line in body.splitlines()]
    i = 0
    if lines and lines[0] == "---":
        closing = next((j for j in range(1, len(lines)) if lines[j] == "---"), None)
        if closing is None:
            return None, []
        i = closing + 1
    rest = [line for line in lines[i:] if line and not line.startswith("%%")]
    if not rest:
        return None, []
    return rest[0].split()[0].rstrip(";"), rest[1:]


def mermaid_problems(kind: str, lines: list[str]) -> list[str]:
    """What leaves a diagram incomplete: nothing to draw, blocks not ended, brackets open."""
    found = [] if lines else ["empty"]
    openers = _OPENERS.get(kind.lower(), ())
    depth = 0
    for line in lines:
        first = line.split()[0].lower()
        depth += first in openers
        depth -= first == "end"
        if depth < 0:
            found.append("end")
            depth = 0
    if depth > 0:
        found.append("unended")
    pairs = _BRACKETS.get(kind.lower())
    if pairs and not _balanced(" ".join(lines), pairs):
        found.append("brackets")
    return found


# Which brackets must pair, per diagram type: a flowchart's node shapes; the bodies of classes
# and composite states. Elsewhere brackets are free text (a message, an ER cardinality ``o{``).
_BRACKETS = {
    "flowchart": {"(": ")", "[": "]", "{": "}"},
    "graph": {"(": ")", "[": "]", "{": "}"},
    "classdiagram": {"{": "}"},
    "statediagram": {"{": "}"},
    "statediagram-v2": {"{": "}"},
}
_STRINGS = lazy_re(r'"[^"\n]*"')
_ASYMMETRIC = lazy_re(r">[^\[\]\n]*\]")  # the flowchart shape A>label] opens with >


def _balanced(text: str, pairs: dict[str, str]) -> bool:
    stack: list[str] = []
    for char in _ASYMMETRIC.sub("", _STRINGS.sub("", text)):
        if char in pairs:
            stack.append(pairs[char])
        elif char in pairs.values() and (not stack or stack.pop() != char):
            return False
    return not stack
