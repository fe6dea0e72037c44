"""``lingyi verify``: verify one assertion, log it, and say how to appeal the verdict."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from lingyi import _warm
from lingyi.cli import _complete
from lingyi.cli._app import EXIT_FAILED, EXIT_OK, App, cli, entry, input_error, json_option
from lingyi.council import MemoryCouncil
from lingyi.errors import LingyiError
from lingyi.guard import Guard, kb_lookups, open_kb
from lingyi.kinds import kind_of
from lingyi.ledger import Ledger
from lingyi.models import Assertion, AssertionType, VerificationResult

TYPES = ("fact", "action", "communication")


@cli.command(
    "verify",
    short_help="Verify one assertion (flags, or JSON on stdin) and log it.",
    epilog="Example: lingyi verify --member lingyi --type communication "
    "--content '灵通说v0.16审计已经完成'",
)
@click.option(
    "--member", shell_complete=_complete.members, help="The member asserting (id, name or alias)."
)
@click.option(
    "--type", "kind", type=click.Choice(TYPES), help="Default: action with --tool, else fact."
)
@click.option("--content", help="What the member asserts.")
@click.option("--tool", shell_complete=_complete.tools, help="Tool name, for an action.")
@click.option("--args", "args_json", metavar="JSON", help="Tool arguments as a JSON object.")
@click.option(
    "--evidence-id",
    "evidence_ids",
    multiple=True,
    metavar="ID",
    help="A cited evidence id (repeatable).",
)
@click.option("--session", default="cli", show_default=True, help="Session id.")
@click.option(
    "--context",
    metavar="TRANSCRIPT",
    help="A transcript whose tool_result and council_message events fill the ledger and council.",
)
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the assertion as JSON from stdin.")
@click.option(
    "--conclusion",
    "conclusion_file",
    metavar="FILE|-",
    help="Verify a conclusion: JSON in the shape of the replay event, from FILE or - (stdin).",
)
@click.option(
    "--answer",
    "answer_file",
    metavar="FILE|-",
    help="Verify a Markdown answer (FILE, or - for stdin) to --question, as verify_answer does.",
)
@click.option("--question", help="With --answer: the question it answers.")
@click.option(
    "--intent",
    type=click.Choice(["general", "catalog"]),
    help="With --answer: general (default) or catalog; the question itself may make it catalog.",
)
@json_option
@entry
def verify(app: App, context: str | None, as_json: bool, **given: Any) -> int:
    """Verify one assertion and append its record to the log.

    Prints the verdict, each check, the record id and the command that appeals it. Exit 1
    when rejected, 0 when approved or fallback.
    """
    config = app.config()
    if not config.raw.cli.warm:  # this deployment wants no warm process (lingyi._warm)
        _warm.decline()
    kb = functools.cache(lambda: open_kb(config, guard.layer.policies))
    guard = Guard.from_config(
        config,
        source="cli",
        council=MemoryCouncil() if context else None,
        lookups=kb_lookups(kb, url_base=config.raw.evidence.kb_url_base),
    )
    try:
        result = guard.check(assertion_from(**given), _ledger(app, guard, context))
    finally:
        guard.close()
    appeal = f'lingyi{app.global_flags()} appeal {result.id} --reason "why the verdict is wrong"'
    if as_json:
        app.json(json_line(result, appeal))
    else:
        app.out(human(app, result) + f"\nrecord {result.id} · to appeal: {appeal}")
    return EXIT_FAILED if result.decision == "rejected" else EXIT_OK


def _ledger(app: App, guard: Guard, context: str | None) -> Ledger:
    """Empty, or filled by the transcript's events (and its council messages)."""
    if not context:
        return Ledger()
    # Only with --context: one verify of flags or stdin does without the replay modules.
    from lingyi.cli.replay import transcript_lines
    from lingyi.replay import Replayer

    replayer = Replayer(guard)
    for error in replayer.preload(transcript_lines(context)):
        app.err(f"{context}:{error}")
    return replayer.ledger


def _from_json(text: str) -> Assertion:
    """An assertion, or a conclusion or answer in the shape of its replay event (lingyi.kinds)."""
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise LingyiError(f"stdin: -: Invalid JSON: {exc}") from exc
    kind = kind_of(str(given.get("type"))) if isinstance(given, dict) else None
    try:
        return kind.assertion(given) if kind is not None else Assertion.model_validate(given)
    except ValidationError as exc:
        raise input_error("stdin", exc, Assertion) from exc
    except ValueError as exc:
        raise LingyiError(f"stdin: {exc}") from exc


def conclusion_from(source: str, session: str) -> Assertion:
    """A conclusion from a file (or ``-``: stdin); errors name the file, line or field."""
    name = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LingyiError(f"{name}: cannot read the conclusion: {exc}") from exc
    try:
        given = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LingyiError(f"{name}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    kind = kind_of(AssertionType.CONCLUSION.value)
    if kind is None:
        raise LingyiError("the conclusion kind is not installed")
    if isinstance(given, dict):
        given = {"session": session, **given}
    try:
        return kind.assertion(given)
    except ValueError as exc:
        raise LingyiError(f"{name}: {exc}") from exc


def assertion_from(
    *,
    from_stdin: bool,
    answer_file: str | None = None,
    question: str | None = None,
    intent: str | None = None,
    member: str | None,
    kind: str | None,
    content: str | None,
    tool: str | None,
    args_json: str | None,
    evidence_ids: tuple[str, ...],
    session: str,
    conclusion_file: str | None = None,
) -> Assertion:
    """The assertion: a conclusion or an answer from a file, JSON from stdin, or built from the
    flags."""
    if conclusion_file:
        return conclusion_from(conclusion_file, session)
    if answer_file is not None:
        return _answer(answer_file, member, question, intent, session)
    if from_stdin:
        return _from_json(sys.stdin.read())
    if not member or (not content and not tool):
        raise LingyiError("give --member and --content (and --tool for an action), or --stdin")
    call = {"name": tool, "arguments": _arguments(args_json)} if tool else None
    return Assertion.model_validate(
        {
            "member": member,
            "type": kind or ("action" if call else "fact"),
            "content": content or "",
            "tool_call": call,
            "evidence_ids": list(evidence_ids),
            "session": session,
        }
    )


def _answer(
    path: str, member: str | None, question: str | None, intent: str | None, session: str
) -> Assertion:
    """An answer to verify (lingyi.answers): its Markdown from ``path`` (``-``: stdin)."""
    from lingyi.answers import ANSWER

    if not member or question is None:
        raise LingyiError("--answer needs --member and --question")
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LingyiError(f"{path}: cannot read the answer: {exc}") from exc
    given = {"member": member, "question": question, "answer": text, "session": session}
    try:
        return ANSWER.assertion({**given, "intent": intent or "general"})
    except ValueError as exc:
        raise LingyiError(f"{path}: {exc}") from exc


def _arguments(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise LingyiError(f"--args: not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise LingyiError(f'--args: must be a JSON object like \'{{"query": "气功"}}\', not {text}')
    return value


def json_line(result: VerificationResult, appeal: str) -> dict[str, Any]:
    """The replay contract's line, with the record id (``id`` too when the assertion had
    none) and the command that appeals it."""
    from lingyi.replay import output_line  # the replay contract's line, for --json only

    line = output_line(result)
    line["id"] = result.assertion_id or result.id
    return {**line, "record_id": result.id, "appeal": appeal}


def human(app: App, result: VerificationResult) -> str:
    """A readable verdict: decision, reason, recommendation, then each check."""
    decision = result.decision.value
    lines = [f"{app.printer.decision(decision)}  {result.reason}"]
    if result.recommendation:
        lines.append(f"  → {result.recommendation}")
    if result.fallback:
        shown = result.fallback.content or result.fallback.tool_call
        lines.append(f"  fallback ({result.fallback.kind}): {shown}")
    for c in result.checks:
        mark = _mark(app, c.passed, c.on_fail == "warn")
        shadow = f" [shadow: {c.shadow.value}]" if c.shadow is not None else ""
        lines.append(f"  {mark} {c.stage.value:<17} {c.code:<28} {c.reason}{shadow}")
    if result.shadow is not None:  # the call proceeded; enforcing, this would have decided
        codes = ", ".join(result.shadow.codes) or "-"
        lines.append(f"shadow: would have been {result.shadow.decision.value} ({codes})")
    if route := result.outputs.get("route"):  # a conclusion: what the model does next
        note = result.outputs.get("message")
        lines.append(f"route {route}" + (f": {note}" if note else ""))
    if "gate" in result.outputs:  # an answer: the source gate and what may be shown
        lines += _gate_lines(result.outputs)
    return "\n".join(lines)


def _gate_lines(outputs: dict[str, Any]) -> list[str]:
    shown = ", ".join(f"{s['title']} <{s['url']}>" for s in outputs["sources"]) or "-"
    gate = outputs["gate"]
    lines = [
        f"  source gate: {gate}"
        + (f" (closed: {', '.join(outputs['gates_closed'])})" if gate != "open" else ""),
        f"  sources shown: {shown}",
        f"  attempt {outputs['attempt']} of {outputs['max_attempts']} · critic: {outputs['critic']}",
    ]
    if outputs.get("fallback_answer"):
        lines.append(f"  degraded answer: {outputs['fallback_answer']}")
    return lines


def _mark(app: App, passed: bool, warn: bool) -> str:
    if passed:
        return app.paint("✓", fg="green")
    return app.paint("!", fg="yellow") if warn else app.paint("✗", fg="red")
