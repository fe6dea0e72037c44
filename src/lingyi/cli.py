"""The ``lingyi`` command line.

Exit codes: 0 success (approved or fallback for ``verify``), 1 a rejection, a failed
expectation or a broken log chain, 2 bad input (config, policy, transcript, arguments).
Results go to stdout; diagnostics go to stderr through structlog.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lingyi import _logging
from lingyi.backends.kb import KnowledgeBase
from lingyi.config import Config, load_config
from lingyi.council import MemoryCouncil
from lingyi.errors import LingyiError, TranscriptError
from lingyi.guard import Guard, kb_lookup
from lingyi.ledger import Ledger
from lingyi.log import verify_chain
from lingyi.models import Assertion, VerificationResult
from lingyi.policy import load_policies
from lingyi.replay import Replayer, check_expectation, output_line

Handler = Callable[[argparse.Namespace], int]


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config, log=args.log)


# --- verify -------------------------------------------------------------------------


def _assertion_from_args(args: argparse.Namespace) -> Assertion:
    if args.stdin:
        return Assertion.model_validate_json(sys.stdin.read())
    if not args.member or (not args.content and not args.tool):
        raise LingyiError("give --member and --content (and --tool for an action), or --stdin")
    tool = {"name": args.tool, "arguments": json.loads(args.args or "{}")} if args.tool else None
    return Assertion.model_validate(
        {
            "member": args.member,
            "type": args.type or ("action" if tool else "fact"),
            "content": args.content or "",
            "tool_call": tool,
            "evidence_ids": args.evidence_id,
            "session": args.session,
        }
    )


def cmd_verify(args: argparse.Namespace) -> int:
    config = _config(args)
    kb = functools.cache(lambda: KnowledgeBase(config.kb_dir))
    guard = Guard.from_config(
        config,
        source="cli",
        council=MemoryCouncil() if args.context else None,
        lookups={"knowledge_base": kb_lookup(kb)},
    )
    ledger = Ledger()
    if args.context:  # the transcript's events are the ledger and council record
        replayer = Replayer(guard)
        for error in replayer.preload(_lines(args.context)):
            _err(f"{args.context}:{error}")
        ledger = replayer.ledger
    result = guard.check(_assertion_from_args(args), ledger)
    _out(json.dumps(output_line(result), ensure_ascii=False) if args.json else human(result))
    return 1 if result.decision == "rejected" else 0


def human(result: VerificationResult) -> str:
    """A readable verdict: decision, reason, recommendation, then each check."""
    lines = [f"{result.decision.value.upper()}  {result.reason}"]
    if result.recommendation:
        lines.append(f"  → {result.recommendation}")
    if result.fallback:
        lines.append(
            f"  fallback ({result.fallback.kind}): {result.fallback.content or result.fallback.tool_call}"
        )
    for c in result.checks:
        mark = "✓" if c.passed else ("!" if c.on_fail == "warn" else "✗")
        lines.append(f"  {mark} {c.stage.value:<17} {c.code:<28} {c.reason}")
    return "\n".join(lines)


# --- replay -------------------------------------------------------------------------


def _lines(path: str) -> Iterable[str]:
    if path == "-":
        return sys.stdin
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LingyiError(f"{path}: cannot read transcript: {exc}") from exc


def cmd_replay(args: argparse.Namespace) -> int:
    config = _config(args)
    replayer = Replayer(Guard.from_config(config, source="replay", council=MemoryCouncil()))
    errors, mismatches, checked = 0, 0, 0
    for lineno, out in replayer.run(_lines(args.file)):
        if isinstance(out, TranscriptError):
            errors += 1
            _err(f"{args.file}:{out}")
            continue
        _out(json.dumps(out, ensure_ascii=False))
        checked += "expect" in out
        if args.check and (miss := check_expectation(lineno, out)):
            mismatches += 1
            _err(
                f"{args.file}:{miss.line}: {miss.assertion_id}: expected {miss.expected}, got {miss.got}: {miss.reason}"
            )
    if args.check:
        _err(f"{checked - mismatches} of {checked} expectations met, {errors} bad lines")
    return 2 if errors else (1 if mismatches else 0)


# --- log, policy --------------------------------------------------------------------


def cmd_log_verify(args: argparse.Namespace) -> int:
    path = _config(args).log_path
    report = verify_chain(path)
    if args.json:
        _out(
            json.dumps(
                {
                    "path": str(path),
                    "ok": report.ok,
                    "records": report.records,
                    "unreadable": [{"line": n, "error": e} for n, e in report.unreadable],
                    "breaks": [vars(b) for b in report.breaks],
                },
                ensure_ascii=False,
            )
        )
    else:
        _out(_chain_text(path, report))
    return 0 if report.ok else 1


def _chain_text(path: Path, report: Any) -> str:
    lines = [f"{path}: {report.records} records"]
    lines += [f"  line {n}: skipped: {e}" for n, e in report.unreadable]
    if report.first_bad:
        bad = report.first_bad
        lines.append(f"  CHAIN BROKEN at line {bad.lineno} (record {bad.record_id}): {bad.reason}")
        lines.append(f"  {len(report.breaks)} record(s) fail the chain in all")
    else:
        lines.append("  chain OK")
    return "\n".join(lines)


def cmd_policy_check(args: argparse.Namespace) -> int:
    config = _config(args)
    policies = load_policies(config.validators_dir)
    if args.json:
        _out(
            json.dumps(
                {
                    "ok": True,
                    "version": policies.version,
                    "members": {
                        m.id: {
                            "name": m.name,
                            "tools": sorted(m.tools),
                            "checks": [c.check for c in m.checks],
                        }
                        for m in policies.members.values()
                    },
                },
                ensure_ascii=False,
            )
        )
        return 0
    _out(f"{config.validators_dir}: OK (policy version {policies.version})")
    for m in policies.members.values():
        _out(
            f"  {m.id:<13} {m.name}  tools: {', '.join(sorted(m.tools)) or '-'}  checks: {len(m.checks)}"
        )
    return 0


def cmd_policy_checks(args: argparse.Namespace) -> int:
    from lingyi.checks import REGISTRY, load_builtin_checks

    load_builtin_checks()
    for name, spec in sorted(REGISTRY.items()):
        _out(f"{name:<30} {spec.doc.splitlines()[0] if spec.doc else ''}")
    return 0


# --- parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lingyi",
        description="LingYi Guard: verify before you assert. Every fact, report of what another "
        "council member said, and tool call goes through the constraint layer and is logged.",
        epilog="Config: --config, $LINGYI_CONFIG, ./config/lingyi.toml, packaged defaults. "
        "Exit codes: 0 ok, 1 rejected/mismatch/broken chain, 2 bad input.",
    )
    parser.add_argument("--config", help="config file (default: the search order below)")
    parser.add_argument("--log", help="verification log path (overrides config and $LINGYI_LOG)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_verify(sub)
    _add_replay(sub)
    log_sub = _add_log(sub)
    _add_policy(sub)
    _add_review_and_server(sub, log_sub)
    _share_global_options(parser)
    return parser


def _share_global_options(parser: argparse.ArgumentParser) -> None:
    """Accept --config/--log/-v after the command too (`lingyi stats --log X`).

    SUPPRESS keeps the top-level value unless the option is given again after the command.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument("--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
                child.add_argument("--log", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
                child.add_argument(
                    "-v",
                    "--verbose",
                    action="store_true",
                    default=argparse.SUPPRESS,
                    help=argparse.SUPPRESS,
                )
                _share_global_options(child)


def _add_verify(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="verify one assertion (flags or JSON on stdin)",
        description="Verify one assertion and log it. Example: lingyi verify --member lingyi "
        "--type communication --content '灵通说v0.16审计已经完成'",
    )
    p.add_argument("--member", help="the member making the assertion (id, name or alias)")
    p.add_argument("--type", choices=["fact", "action", "communication"])
    p.add_argument("--content", help="what the member asserts")
    p.add_argument("--tool", help="tool name, for an action")
    p.add_argument("--args", help="tool arguments as a JSON object")
    p.add_argument(
        "--evidence-id", action="append", default=[], help="cited evidence id (repeatable)"
    )
    p.add_argument("--session", default="cli", help="session id (default: cli)")
    p.add_argument(
        "--context",
        help="transcript whose tool_result/council_message events fill the ledger and council",
    )
    p.add_argument("--stdin", action="store_true", help="read the assertion as JSON from stdin")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_verify)


def _add_replay(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a JSONL transcript; one JSON verdict per assertion",
        description="Replay a recorded session from an empty ledger and council record. "
        "Prints one JSON object per assertion. With --check, assertions carrying "
        '"expect" are compared and mismatches reported (exit 1).',
    )
    p.add_argument("file", help="transcript (JSONL), or - for stdin")
    p.add_argument(
        "--check", action="store_true", help="compare decisions with each assertion's expect"
    )
    p.set_defaults(func=cmd_replay)


def _add_log(sub: Any) -> Any:
    p = sub.add_parser("log", help="the verification log: verify the chain, tail, query")
    log_sub = p.add_subparsers(dest="log_command", metavar="ACTION", required=True)
    v = log_sub.add_parser("verify", help="check the hash chain; name the first bad record")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_log_verify)
    return log_sub


def _add_policy(sub: Any) -> None:
    p = sub.add_parser("policy", help="member policies in validators/")
    psub = p.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    c = psub.add_parser("check", help="validate every policy file (errors name file and key)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_policy_check)
    psub.add_parser("checks", help="list the registered checks").set_defaults(
        func=cmd_policy_checks
    )


def _add_review_and_server(sub: Any, log_sub: Any) -> None:
    """Commands that live with their modules: review (stats, report, appeal) and server."""
    from lingyi import review_cli, server_cli

    review_cli.register(sub, log_sub)
    server_cli.register(sub)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _logging.configure(verbose=args.verbose)
    handler: Handler = args.func
    try:
        return handler(args)
    except (LingyiError, ValidationError, json.JSONDecodeError) as exc:
        _err(f"lingyi: error: {exc}")
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
