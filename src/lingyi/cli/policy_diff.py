"""``lingyi policy diff OTHER [TRANSCRIPTS...]``: what another policy folder would decide
differently (the engine is :mod:`lingyi.policy_diff`; this module reads inputs and prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lingyi.cli._app import EXIT_BAD_INPUT, EXIT_OK, App, Command, entry, json_option
from lingyi.cli._output import text_table
from lingyi.cli.replay import transcript_lines, transcripts
from lingyi.errors import LingyiError
from lingyi.policy_diff import (
    KINDS,
    Change,
    Diff,
    Sides,
    diff_json,
    diff_log,
    diff_transcripts,
    load_sides,
)

EXAMPLE = """
\b
Example: check a policy edit before making it.
  cp -rL validators /tmp/try
  $EDITOR /tmp/try/_common.toml          # an on_fail, a lexicon term, ...
  lingyi policy diff /tmp/try examples/eval
  lingyi policy diff /tmp/try --log var/verification.jsonl --json
"""


SHOWN = 3  # weakenings printed in full; --json and lingyi policy check give them all


@click.command(
    "diff",
    cls=Command,  # the global options (--config, --log, …) after the command too
    short_help="Decide the same inputs under another policy folder: what changes.",
    epilog=EXAMPLE,
)
@click.argument("other", type=click.Path(file_okay=False, path_type=Path))
@click.argument("paths", nargs=-1, metavar="[TRANSCRIPTS]...")
@json_option
@entry
def policy_diff(app: App, other: Path, paths: tuple[str, ...], as_json: bool) -> int:
    """Decide the same inputs under the policy folder in effect (the config's) and under
    OTHER, and print what changes: counts by check code (newly failing, no longer failing,
    now uncertain) and each changed input (where, record id, assertion id, member, decision
    before → after, the codes that changed).

    Inputs: TRANSCRIPTS (replay files, folders of them, or -), each from an empty ledger and
    council record filled by its own events, under both folders; or, with none, the
    verification log (--log FILE, else $LINGYI_LOG, else the config's), each verification
    re-decided under both. Nothing is appended to any log; the council record is only read.
    OTHER is validated like any policy folder (exit 2 naming file and key) but never refused
    for being weaker than the shipped policies: what a start would refuse is reported.
    Exit 0 when it ran, changes or not; 2 on bad input.
    """
    if paths and app.log_path:
        raise LingyiError("give --log FILE or TRANSCRIPTS, not both (the diff logs nothing)")
    config = app.config()
    sides = load_sides(config, other)
    diff = Diff()
    try:
        with app.progress("policy diff") as progress:
            source = _run(sides, diff, paths, progress)
    finally:
        sides.close()
    for bad in diff.bad:
        app.err(bad)
    if as_json:
        app.json(diff_json(sides, diff, source))
    else:
        app.out(_text(app, sides, diff, source))
    return EXIT_BAD_INPUT if diff.bad and source["kind"] == "transcripts" else EXIT_OK


def _run(sides: Sides, diff: Diff, paths: tuple[str, ...], progress: Any) -> dict[str, Any]:
    """Decide the inputs under both sides; what they were (the JSON's ``source``)."""
    if not paths:
        log = sides.config.log_path
        total = log.stat().st_size if log.is_file() else 0
        diff_log(sides, diff, log, lambda done: progress(done, total))
        return {"kind": "log", "path": str(log)}
    files = transcripts(paths)
    read = [(f, list(transcript_lines(f))) for f in files]  # read once, decided twice
    total = 2 * sum(len(line) for _, lines in read for line in lines)
    diff_transcripts(sides, diff, read, lambda done: progress(done, total))
    return {"kind": "transcripts", "paths": files}


def _text(app: App, sides: Sides, diff: Diff, source: dict[str, Any]) -> str:
    before = f"{sides.config.validators_dir} ({sides.before.version})"
    lines = [f"policy diff: {before} → {sides.other} ({sides.after.version})"]
    lines += _weaker_text(app, sides)
    what = f"the log {source['path']}" if source["kind"] == "log" else _files(source["paths"])
    lines.append(f"{diff.inputs} input(s) from {what}: {len(diff.changes)} changed")
    if source["kind"] == "log":
        lines.append(
            f"  {diff.skipped} record(s) not verifications, skipped; {diff.drift} re-decided "
            "in effect otherwise than logged (context the log lacks, or policies changed)"
        )
    if not diff.changes:
        return "\n".join([*lines, app.paint("no change", fg="green", bold=True)])
    head = ["code", *(k.replace("_", " ") for k in KINDS), "changed"]
    rows = [[code, *counts.values()] for code, counts in diff.by_code().items()]
    lines += ["", "by check code:", text_table(head, rows).rstrip("\n")]
    if moved := diff.decisions():
        lines += ["", "decisions:", *(f"  {m}: {n}" for m, n in moved.items())]
    return "\n".join([*lines, "", "changed inputs:", *(_change_text(app, c) for c in diff.changes)])


def _files(paths: list[str]) -> str:
    return paths[0] if len(paths) == 1 else f"{len(paths)} transcripts"


def _weaker_text(app: App, sides: Sides) -> list[str]:
    if not sides.weakenings:
        return []
    note = (
        f"note: {sides.other} is weaker than the shipped policies in {len(sides.weakenings)} "
        "place(s); loaded anyway (a diff is a what-if), but a start would refuse it:"
    )
    shown = [f"  {w}" for w in sides.weakenings[:SHOWN]]
    if (more := len(sides.weakenings) - SHOWN) > 0:
        shown.append(f"  … and {more} more: lingyi policy check {sides.other} lists them all")
    return [app.paint(note, fg="yellow"), *shown]


def _change_text(app: App, change: Change) -> str:
    b, a = change.before, change.after
    ids = " ".join(x for x in (b.record, b.assertion_id) if x) or "-"
    moved = f"{app.printer.decision(b.decision)} → {app.printer.decision(a.decision)}"
    content = b.content.replace("\n", " ")
    content = content if len(content) <= 80 else content[:79] + "…"
    codes = [f"      {c.code}: {_state(c.before)} → {_state(c.after)}" for c in change.codes]
    return "\n".join([f"  {b.where}  {ids}  {b.member}  {moved}", f"      {content}", *codes])


def _state(state: tuple[str, bool]) -> str:
    return f"{state[0]} (uncertain)" if state[1] else state[0]
