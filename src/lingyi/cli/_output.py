"""How commands write: results to stdout, diagnostics to stderr, colour only on a terminal.

Colour follows ``--color auto|always|never``; ``auto`` (the default) colours a stream only
when it is a terminal and ``$NO_COLOR`` is unset or empty (https://no-color.org), so a pipe or
a file never receives escape codes. Progress is drawn on stderr, only when stderr is a
terminal and the work is big enough to wait for; a diagnostic written meanwhile clears the bar
first, so the two never share a line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal, TextIO

import click

ColorMode = Literal["auto", "always", "never"]
DECISION_COLOURS = {"approved": "green", "rejected": "red", "fallback": "yellow"}


def colour_on(mode: ColorMode, stream: TextIO) -> bool:
    """Whether to colour ``stream`` under ``mode``."""
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR"):
        return False
    return _is_terminal(stream)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Printer:
    """Writes results and diagnostics, coloured when the stream they go to allows it."""

    def __init__(self, mode: ColorMode = "auto") -> None:
        self.mode = mode
        self.progress: Progress | None = None

    def out(self, text: str = "") -> None:
        click.echo(text, color=colour_on(self.mode, sys.stdout))

    def json(self, value: Any, *, indent: int | None = None) -> None:
        """One JSON document (or one line of a JSONL stream) on stdout."""
        self.out(json.dumps(value, ensure_ascii=False, indent=indent))

    def err(self, text: str) -> None:
        if self.progress is not None:
            self.progress.clear()
        click.echo(text, err=True, color=colour_on(self.mode, sys.stderr))

    def paint(self, text: str, *, err: bool = False, **style: Any) -> str:
        """``text`` styled (click.style) if the stream it is meant for takes colour."""
        stream = sys.stderr if err else sys.stdout
        return click.style(text, **style) if colour_on(self.mode, stream) else text

    def decision(self, decision: str, text: str | None = None) -> str:
        colour = DECISION_COLOURS.get(decision)
        return self.paint(text or decision.upper(), fg=colour, bold=True)


def _is_number(text: str) -> bool:
    return text.rstrip("%").replace(".", "", 1).replace("-", "", 1).isdigit() or text == "–"


def text_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to terminal width (CJK counts double); numbers right-aligned."""
    from lingyi.log.query import pad, text_width  # not with every command (serve files none)

    cells = [[str(c) for c in row] for row in [head, *rows]]
    widths = [max(text_width(row[i]) for row in cells) for i in range(len(head))]
    right = [all(_is_number(row[i]) for row in cells[1:]) for i in range(len(head))]
    lines = []
    for row in cells:
        padded = [pad(c, w, right=r) for c, w, r in zip(row, widths, right, strict=True)]
        lines.append("  " + "  ".join(padded).rstrip())
    return "\n".join(lines) + "\n"


class Progress:
    """A progress line on stderr fed ``(done, total)`` in bytes: the callback stats and
    replay take. Silent unless stderr is a terminal and the total is worth waiting for."""

    MIN_TOTAL = 1 << 20  # smaller work ends before a bar would be read
    INTERVAL_S = 0.1
    WIDTH = 24

    def __init__(self, label: str, printer: Printer | None = None) -> None:
        self.label = label
        self._printer = printer
        self._shown = False
        self._last = 0.0
        self._started = time.monotonic()

    def __enter__(self) -> Progress:
        if self._printer is not None:
            self._printer.progress = self
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.clear()
        if self._printer is not None and self._printer.progress is self:
            self._printer.progress = None

    def __call__(self, done: int, total: int) -> None:
        if total < self.MIN_TOTAL or not _is_terminal(sys.stderr):
            return
        now = time.monotonic()
        if now - self._last < self.INTERVAL_S and done < total:
            return
        self._last = now
        sys.stderr.write("\r\x1b[K" + self.line(done, total, now - self._started))
        sys.stderr.flush()
        self._shown = True

    def line(self, done: int, total: int, elapsed: float) -> str:
        """``label [#####·····]  42%  12.0/28.5 MB  eta 3s``."""
        share = min(max(done / total, 0.0), 1.0) if total else 1.0
        filled = round(share * self.WIDTH)
        bar = "#" * filled + "·" * (self.WIDTH - filled)
        eta = f"  eta {round(elapsed * (1 - share) / share)}s" if 0 < share < 1 else ""
        mb = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB"
        return f"{self.label} [{bar}] {share:4.0%}  {mb}{eta}"

    def clear(self) -> None:
        """Remove the bar (before a diagnostic, and at the end)."""
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._shown = False
