"""``lingyi verify``: verify one input, log it, and say how to appeal the verdict.

In this process (:mod:`._local`), or through a running ``lingyi serve --http``
(``--server URL`` or ``[cli] server``; :mod:`._remote`), which verifies in that server's
session evidence. Either way the input is the same JSON object (:func:`input_of`) and the
verification comes back as the same dict, printed by the same functions: the output, the
``--json`` line and the exit code do not depend on where it was verified.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lingyi.cli import _complete
from lingyi.cli._app import EXIT_FAILED, EXIT_OK, App, cli, entry, json_option
from lingyi.errors import LingyiError

TYPES = ("fact", "action", "communication")
Where = str | None  # what an input came from, for its errors: "stdin", a file, None for flags


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
@click.option(
    "--server",
    metavar="URL",
    help="Verify through this running `lingyi serve --http` (its session evidence); '' or "
    "--local: in this process. Default: [cli] server of the config.",
)
@click.option("--local", is_flag=True, help="Verify in this process, whatever [cli] server says.")
@json_option
@entry
def verify(
    app: App,
    context: str | None,
    server: str | None,
    local: bool,
    as_json: bool,
    **given: Any,
) -> int:
    """Verify one assertion and append its record to the log.

    Prints the verdict, each check, the record id and the command that appeals it. Exit 1
    when rejected, 0 when approved or fallback; 2 for bad input, or a server that cannot be
    reached, refuses the token or fails (never a silent local verification instead).
    """
    config = app.config()
    url = "" if local else (config.raw.cli.server if server is None else server)
    entered, where = input_of(**given)
    if url:
        if context:
            raise LingyiError(
                "--context fills a local ledger; with --server the server's session is the "
                "evidence (record it there), or verify with --local"
            )
        from lingyi.cli import _remote  # the MCP client, and none of the engine

        done = _remote.verify(url, config.raw.cli.token_env, given["session"], entered)
    else:
        from lingyi.cli import _local  # the engine: policies, checks, layer, log

        done = _local.verify(app, config, entered, where, context)
    appeal = f'lingyi{app.global_flags()} appeal {done["id"]} --reason "why the verdict is wrong"'
    if as_json:
        app.json(json_line(done, appeal))
    else:
        app.out(human(app, done) + f"\nrecord {done['id']} · to appeal: {appeal}")
    return EXIT_FAILED if done["decision"] == "rejected" else EXIT_OK


# --- the input: one JSON object, whoever verifies it -----------------------------------------


def input_of(
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
) -> tuple[dict[str, Any], Where]:
    """The input as the ``verify`` tool takes it (a conclusion or an answer from a file, JSON
    from stdin, or built from the flags), and where it came from."""
    if conclusion_file:
        return _conclusion(conclusion_file, session)
    if answer_file is not None:
        return _answer(answer_file, member, question, intent, session), answer_file
    if from_stdin:
        return _stdin_json(), "stdin"
    if not member or (not content and not tool):
        raise LingyiError("give --member and --content (and --tool for an action), or --stdin")
    call = {"name": tool, "arguments": _arguments(args_json)} if tool else None
    entered = {
        "member": member,
        "type": kind or ("action" if call else "fact"),
        "content": content or "",
        "tool_call": call,
        "evidence_ids": list(evidence_ids),
        "session": session,
    }
    return entered, None


def _stdin_json() -> dict[str, Any]:
    try:
        given = json.loads(sys.stdin.read())
    except ValueError as exc:
        raise LingyiError(f"stdin: -: Invalid JSON: {exc}") from exc
    if not isinstance(given, dict):
        raise LingyiError(f"stdin: the input must be a JSON object, not {json.dumps(given)[:80]}")
    return given


def _conclusion(source: str, session: str) -> tuple[dict[str, Any], Where]:
    """A conclusion from a file (or ``-``: stdin); errors name the file or line."""
    name = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LingyiError(f"{name}: cannot read the conclusion: {exc}") from exc
    try:
        given = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LingyiError(f"{name}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    if not isinstance(given, dict):
        raise LingyiError(f"{name}: a conclusion is a JSON object, not {text.strip()[:80]}")
    return {"session": session, **given, "type": "conclusion"}, name


def _answer(
    path: str, member: str | None, question: str | None, intent: str | None, session: str
) -> dict[str, Any]:
    """An answer to verify (lingyi.answers): its Markdown from ``path`` (``-``: stdin)."""
    if not member or question is None:
        raise LingyiError("--answer needs --member and --question")
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LingyiError(f"{path}: cannot read the answer: {exc}") from exc
    return {
        "type": "answer",
        "member": member,
        "question": question,
        "answer": text,
        "session": session,
        "intent": intent or "general",
    }


def _arguments(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise LingyiError(f"--args: not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise LingyiError(f'--args: must be a JSON object like \'{{"query": "气功"}}\', not {text}')
    return value


# --- the output: from the verification as a dict (lingyi.verdict.Verification) ----------


def json_line(done: dict[str, Any], appeal: str) -> dict[str, Any]:
    """The replay contract's line (``id`` is the record's when the input had none), the record
    id and the command that appeals it."""
    line = {
        "id": done["assertion_id"] or done["id"],
        "decision": done["decision"],
        "reason": done["reason"],
        "recommendation": done["recommendation"],
        "fallback": done["fallback"],
        "checks": [
            {k: c[k] for k in ("stage", "code", "passed", "reason")} for c in done["checks"]
        ],
        **done["outputs"],  # a conclusion's route, an answer's sources (lingyi.kinds)
        **({"shadow": done["shadow"]} if done["shadow"] else {}),
    }
    return {**line, "record_id": done["id"], "appeal": appeal}


def human(app: App, done: dict[str, Any]) -> str:
    """A readable verdict: decision, reason, recommendation, then each check."""
    lines = [f"{app.printer.decision(done['decision'])}  {done['reason']}"]
    if done["recommendation"]:
        lines.append(f"  → {done['recommendation']}")
    if fallback := done["fallback"]:
        lines.append(f"  fallback ({fallback['kind']}): {_offered(fallback)}")
    for c in done["checks"]:
        mark = _mark(app, c["passed"], c["on_fail"] == "warn")
        shadow = f" [shadow: {c['shadow']}]" if c["shadow"] is not None else ""
        lines.append(f"  {mark} {c['stage']:<17} {c['code']:<28} {c['reason']}{shadow}")
    if shadow_verdict := done["shadow"]:  # the call proceeded; enforcing, this would have decided
        codes = ", ".join(shadow_verdict["codes"]) or "-"
        lines.append(f"shadow: would have been {shadow_verdict['decision']} ({codes})")
    outputs = done["outputs"]
    if route := outputs.get("route"):  # a conclusion: what the model does next
        note = outputs.get("message")
        lines.append(f"route {route}" + (f": {note}" if note else ""))
    if "gate" in outputs:  # an answer: the source gate and what may be shown
        lines += _gate_lines(outputs)
    return "\n".join(lines)


def _offered(fallback: dict[str, Any]) -> str:
    """The fallback's content, or its tool call as the model's repr showed it."""
    if fallback["content"]:
        return str(fallback["content"])
    call = fallback["tool_call"]
    return f"name={call['name']!r} arguments={call['arguments']!r}" if call else "None"


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
