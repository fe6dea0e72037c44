"""The layout of a text, read from its Markdown: what it quotes and where its sentences are.

A council message is Markdown. What a fence, an indented code block or a blockquote holds
is quoted, not claimed ("don't write:" followed by a fenced bad sentence is a test fixture,
not a relay), unless a line naming someone introduces it ("灵通在群里写了：" then a
blockquote: that blockquote is 灵通's words), or it opens with a speaker label
("> 灵通：v0.17 已发布" quotes 灵通). List items and table rows are sentences of their own,
and a table row whose first cell names a member is that member's line
("| 灵通 | v0.17 已发布 |" reads "灵通: v0.17 已发布"), unless the table's header says the
second column is work assigned (任务, owner, todo) rather than words or status.

:func:`layout` returns the text with its markup read: the same length, so that every offset
found in it is an offset of the text itself; markup becomes spaces, a quoted block becomes
blanks, a table row's cells become "name: a, b".
"""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

from lingyi._regex import lazy_re

# Cheap test first: most texts have no Markdown at all and skip the parser.
_MARKUP = lazy_re(r"(?m)^\s{0,3}(?:[>|#]|[-*+]\s|\d{1,3}[.)]\s|```|~~~)|^ {4}|\||\*\*|__|~~")
_QUOTE_MARK = lazy_re(r"^(?:\s*>)+ ?")
_ITEM_MARK = lazy_re(r"^\s*(?:[-*+]|\d{1,3}[.)])\s")
_HEADING_MARK = lazy_re(r"^\s{0,3}#{1,6}\s")
_EMPHASIS = lazy_re(r"\*\*|__")
_STRUCK = lazy_re(r"~~[^~\n]+~~")
_PIPE_ROW = lazy_re(r"(?m)^[ \t]*\|.*\|[ \t]*$")
_DELIMITER_ROW = lazy_re(r"^[\s|:\-]+$")
# A list item's owner and the mark after it: "1. 灵通 — 审计", "- LingFlow: rerun".
_ASSIGNEE = lazy_re(r"^(\s*(?:[-*+]|\d{1,3}[.)])\s+[^\s:—-]{1,24}\s*)(:|—+|--|-)")
_ENDS_WITH_COLON = lazy_re(r"[:：]\s*$")
_SIGNATURE = lazy_re(r"^\s*(?:—+|--|-|~)\s*(\S.{0,23}?)\s*$")
# A quotation inside a line: a name in it is quoted, not the one who introduces a block.
_QUOTATION = lazy_re(r"“[^”]*”|\"[^\"]*\"|「[^」]*」|『[^』]*』|(?<![a-z])'[^'\n]*'(?![a-z])")
# A table whose header says the member column holds assigned work, not what was said.
_WORK_HEADER = lazy_re(
    r"任务|负责|待办|分工|下一步|计划|排期|安排|todo|to-do|task|owner|assignee|action|next|plan"
)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Blocks only: inline markup is read from the lines (_inline), and parsing it would
    # cost as much again on long texts.
    return MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])


@lru_cache(maxsize=256)  # the relay and the inference checks read the same text
def layout(text: str, names: re.Pattern[str]) -> str:
    """``text`` (canonical) with its Markdown read, offsets kept; ``names`` finds a member."""
    if not _MARKUP.search(text):
        return text
    page = _Page(text, names)
    for token in _parser().parse(text):
        page.read(token)
    page.lone_rows()
    return page.joined()


class _Page:
    """The lines of a text, rewritten in place (each keeps its length)."""

    def __init__(self, text: str, names: re.Pattern[str]) -> None:
        self.lines = text.split("\n")
        self.names = names
        self.tables: list[tuple[int, int]] = []
        self.glued: set[int] = set()  # lines whose newline joins them to the next line

    def joined(self) -> str:
        ends = (" " if n in self.glued else "\n" for n in range(len(self.lines)))
        return "".join(line + end for line, end in zip(self.lines, ends, strict=True))[:-1]

    def read(self, token: Token) -> None:
        if token.map is None:
            return
        first, last = token.map
        if token.type in ("fence", "code_block"):
            self._code(first, last, token.type == "fence")
        elif token.type == "blockquote_open":
            self._quote(first, last)
        elif token.type in ("bullet_list_open", "ordered_list_open"):
            self._assigned(first, last)
        elif token.type == "list_item_open":
            self._sub(first, _ITEM_MARK)
        elif token.type == "heading_open":
            self._sub(first, _HEADING_MARK)
        elif token.type == "table_open":
            self._table(first, last)
        elif token.type == "inline":
            for n in range(first, min(last, len(self.lines))):
                self.lines[n] = _inline(self.lines[n])

    def _sub(self, n: int, mark: re.Pattern[str]) -> None:
        if n < len(self.lines):
            self.lines[n] = mark.sub(lambda m: " " * len(m.group(0)), self.lines[n], count=1)

    def _assigned(self, first: int, last: int) -> None:
        """A list under a to-do heading ("本周待办：") assigns work: "灵通 — 审计" is a task
        for 灵通, not 灵通's words, so the label's mark becomes a comma."""
        before = next((line for line in reversed(self.lines[:first]) if line.strip()), "")
        if not _WORK_HEADER.search(before.casefold()):
            return
        for n in range(first, min(last, len(self.lines))):
            self.lines[n] = _ASSIGNEE.sub(
                lambda m: m.group(1) + "," * len(m.group(2)), self.lines[n]
            )

    def _introduced(self, first: int) -> bool:
        """The line before names someone (outside a quotation) and ends with a colon:
        "灵通在群里写了：" introduces 灵通's words; "不要写“灵研说…”；像这样：" introduces
        examples, not 灵研's words."""
        before = next((line for line in reversed(self.lines[:first]) if line.strip()), "")
        named = self.names.search(_QUOTATION.sub(" ", before))
        return bool(_ENDS_WITH_COLON.search(before) and named)

    def _signed(self, end: int) -> int | None:
        """The line of a signature after a block ("— 灵通", "-- LingFlow"), if any."""
        after = next((n for n in range(end, len(self.lines)) if self.lines[n].strip()), None)
        if after is None or not (sign := _SIGNATURE.match(self.lines[after])):
            return None
        return after if self.names.fullmatch(sign.group(1).strip()) else None

    def _code(self, first: int, last: int, fenced: bool) -> None:
        inner = range(first + 1, last - 1) if fenced else range(first, last)
        keep = self._introduced(first)
        for n in range(first, min(last, len(self.lines))):
            if not keep or n not in inner:
                self.lines[n] = " " * len(self.lines[n])
        if keep:
            self._join(inner.start, inner.stop)

    def _quote(self, first: int, last: int) -> None:
        end = min(last, len(self.lines))
        for n in range(first, end):
            self._sub(n, _QUOTE_MARK)
        if labelled(self.lines[first], self.names):
            return  # "> 灵通：…" quotes 灵通, whoever introduced the quote
        if (signed := self._signed(end)) is not None:
            self._join(first, signed + 1)  # "> …" then "— 灵通": 灵通's words, signed
        elif self._introduced(first):
            self._join(first, end)
        else:
            for n in range(first, end):
                self.lines[n] = " " * len(self.lines[n])

    def _join(self, first: int, last: int) -> None:
        """The block continues the line that introduced it: one sentence, lines by commas."""
        if first > 0 and not self.lines[first - 1].strip():
            first -= 1  # a blank line between the introduction and the block
        self.glued.update(range(max(first - 1, 0), last - 1))

    def _table(self, first: int, last: int) -> None:
        self.tables.append((first, last))
        header = self.lines[first] if first < len(self.lines) else ""
        cells = header.strip().strip("|").split("|")
        as_label = not (len(cells) > 1 and _WORK_HEADER.search(cells[1].casefold()))
        for n in range(first, min(last, len(self.lines))):
            blank = n in (first, first + 1)
            self.lines[n] = " " * len(self.lines[n]) if blank else _row(self.lines[n], as_label)

    def lone_rows(self) -> None:
        """Pipe rows outside a table (no header, no delimiter row) read as labelled rows."""
        for n, line in enumerate(self.lines):
            inside = any(a <= n < b for a, b in self.tables)
            if not inside and _PIPE_ROW.fullmatch(line):
                self.lines[n] = (
                    " " * len(line) if _DELIMITER_ROW.match(line) else _row(line, as_label=True)
                )


def labelled(line: str, names: re.Pattern[str]) -> bool:
    """The line opens with a speaker label: a name, then a colon or a dash."""
    found = names.match(line.strip())
    if not found:
        return False
    rest = line.strip()[found.end() :].lstrip()
    return rest[:1] in (":", "：", "—", "-")


def _row(line: str, as_label: bool) -> str:
    """ "| 灵通 | v0.17 已发布 | 周二 |" → "  灵通 : v0.17 已发布 , 周二  "."""
    out, pipes = [], 0
    stripped = line.rstrip()
    for i, c in enumerate(line):
        if c != "|":
            out.append(c)
            continue
        first = not line[:i].strip()
        final = i == len(stripped) - 1
        out.append(" " if first or final else ":" if as_label and pipes == 1 else ",")
        pipes += 1
    return "".join(out)


def _inline(line: str) -> str:
    """Emphasis markers become spaces; struck-through text is withdrawn, not claimed."""
    line = _EMPHASIS.sub("  ", line)
    return _STRUCK.sub(lambda m: " " * len(m.group(0)), line)
