"""``lingyi replay PATH...``: replay transcripts, files or whole folders (like ``opa test DIR``).

Each transcript starts from an empty ledger and council record (the contract), so a folder
of transcripts is a suite of independent policy tests. Stdout carries the contract's line per
assertion; with ``--json`` each line also names its file and line, bad lines and a summary are
JSON lines too. Progress is shown on a terminal for large inputs (bytes read of the total).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import click

from lingyi.cli._app import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, App, cli, entry, json_option
from lingyi.council import MemoryCouncil
from lingyi.errors import LingyiError, TranscriptError
from lingyi.guard import Guard
from lingyi.replay import Replayer, check_expectation

Progress = Callable[[int, int], None]


def transcripts(paths: tuple[str, ...]) -> list[str]:
    """Files as given, folders as their ``*.jsonl`` files (recursively, sorted); ``-`` is stdin."""
    found: list[str] = []
    for given in paths:
        path = Path(given)
        if given != "-" and path.is_dir():
            inside = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not inside:
                raise LingyiError(f"{given}: no transcripts (*.jsonl) in this folder")
            found += [str(p) for p in inside]
        else:
            found.append(given)
    return found


class UnreadableTranscript(LingyiError):
    """A transcript file that cannot be opened (the others still run)."""


def transcript_lines(path: str, progress: Progress | None = None, done: int = 0) -> Iterator[bytes]:
    """The lines of a transcript as bytes, reporting bytes read (plus ``done``) to ``progress``."""
    if path == "-":
        yield from sys.stdin.buffer
        return
    with _open(path) as handle:
        total = os.fstat(handle.fileno()).st_size
        for raw in handle:
            done += len(raw)
            if progress is not None:
                progress(done, total)
            yield raw


def _open(path: str) -> BinaryIO:
    try:
        return Path(path).open("rb")
    except OSError as exc:
        raise UnreadableTranscript(
            f"{path}: cannot read transcript: {exc.strerror or exc}"
        ) from exc


@dataclass
class Tally:
    files: int = 0
    assertions: int = 0
    expectations: int = 0
    mismatches: int = 0
    bad_lines: int = 0

    def summary(self) -> dict[str, int]:
        return {
            "transcripts": self.files,
            "assertions": self.assertions,
            "expectations": self.expectations,
            "met": self.expectations - self.mismatches,
            "bad_lines": self.bad_lines,
        }

    def exit_code(self) -> int:
        return EXIT_BAD_INPUT if self.bad_lines else (EXIT_FAILED if self.mismatches else EXIT_OK)


class Run:
    """One ``lingyi replay``: one guard and log, a fresh replayer per transcript."""

    def __init__(self, app: App, guard: Guard, *, check: bool, as_json: bool) -> None:
        self.app, self.guard, self.check, self.as_json = app, guard, check, as_json
        self.tally = Tally()

    def transcript(self, path: str, lines: Iterator[bytes]) -> None:
        self.tally.files += 1
        try:
            for lineno, out in Replayer(self.guard).run(lines):
                if isinstance(out, TranscriptError):
                    self.bad_line(path, out)
                else:
                    self.assertion(path, lineno, out)
        except UnreadableTranscript as exc:
            self.tally.bad_lines += 1
            self.app.err(str(exc))
            if self.as_json:
                self.app.json({"file": path, "line": None, "error": str(exc)})

    def bad_line(self, path: str, error: TranscriptError) -> None:
        self.tally.bad_lines += 1
        self.app.err(f"{path}:{error}")
        if self.as_json:
            self.app.json({"file": path, "line": error.line, "error": error.message})

    def assertion(self, path: str, lineno: int, out: dict[str, Any]) -> None:
        self.tally.assertions += 1
        self.tally.expectations += "expect" in out
        miss = check_expectation(lineno, out) if self.check else None
        if miss:
            self.tally.mismatches += 1
            self.app.err(
                f"{path}:{miss.line}: {miss.assertion_id}: expected {miss.expected}, "
                f"got {miss.got}: {miss.reason}"
            )
        if self.as_json:
            met = {"met": miss is None} if self.check and "expect" in out else {}
            out = {**out, "file": path, "line": lineno, **met}
        self.app.json(out)

    def finish(self) -> int:
        t = self.tally
        if self.check:
            where = f" in {t.files} transcripts" if t.files > 1 else ""
            met = t.expectations - t.mismatches
            text = f"{met} of {t.expectations} expectations met, {t.bad_lines} bad lines{where}"
            self.app.err(self.app.paint(text, err=True, fg="red" if t.mismatches else "green"))
        if self.as_json:
            self.app.json({"summary": t.summary()})
        return t.exit_code()


@cli.command("replay", short_help="Replay transcripts: one JSON verdict per assertion.")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--check", is_flag=True, help='Compare each decision with the assertion\'s "expect".')
@json_option
@entry
def replay(app: App, paths: tuple[str, ...], check: bool, as_json: bool) -> int:
    """Replay recorded sessions: files, folders (their *.jsonl, recursively), or - for stdin.

    Each transcript starts from an empty ledger and council record. Prints one JSON object per
    assertion and logs each verification. With --check, assertions carrying "expect" are
    compared and mismatches reported (exit 1); a bad line is reported and the rest still runs
    (exit 2).
    """
    files = transcripts(paths)
    sizes = {f: _size(f) for f in files}
    guard = Guard.from_config(app.config(), source="replay", council=MemoryCouncil())
    run, done = Run(app, guard, check=check, as_json=as_json), 0
    try:
        with app.progress("replay") as progress:
            total = sum(sizes.values())
            for f in files:
                run.transcript(f, transcript_lines(f, lambda n, _t: progress(n, total), done))
                done += sizes[f]
    finally:
        guard.close()
    return run.finish()


def _size(path: str) -> int:
    try:
        return 0 if path == "-" else Path(path).stat().st_size
    except OSError:
        return 0  # reported when it is read
