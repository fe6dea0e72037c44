"""The ``lingyi`` command line, on click.

One module per command (or group of commands); each registers itself on :data:`cli`.
Exit codes: 0 success (approved or fallback for ``verify``), 1 a rejection, a failed
expectation or a broken log chain, 2 bad input (config, policy, transcript, arguments).
Results go to stdout; diagnostics go to stderr (structlog included). With ``--json`` stdout
carries JSON for success and failure alike: ``{"ok": false, "errors": [...]}`` on an error.

Shell completion is click's: ``lingyi completion bash`` prints the script to source.

A command's module is imported only when that command runs (or help lists it): ``lingyi
verify`` loads the layer and the log, never the MCP server stack (``_app.COMMANDS``), and
``lingyi verify --server`` loads the MCP client and none of the engine (docs/verify-server.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import click

from lingyi.cli._app import EXIT_BAD_INPUT, App, cli

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The ``lingyi`` console script: run one command and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = cli.main(args, prog_name="lingyi", standalone_mode=False, obj=App())
    except click.ClickException as exc:  # usage errors: bad option, missing argument
        return _usage_error(exc, as_json="--json" in args)
    except click.Abort:  # Ctrl-C, or a declined prompt
        sys.stderr.write("\nlingyi: interrupted\n")
        return 130
    return code if isinstance(code, int) else 0


def _usage_error(exc: click.ClickException, *, as_json: bool) -> int:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # plain `lingyi`: the help
        exc.show()
        return EXIT_BAD_INPUT
    sys.stderr.write(f"lingyi: error: {exc.format_message()}\n")
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        sys.stderr.write(f"Try '{exc.ctx.command_path} --help' for help.\n")
    if as_json:
        problem = {"kind": "usage", "message": exc.format_message()}
        click.echo(json.dumps({"ok": False, "errors": [problem]}, ensure_ascii=False))
    return EXIT_BAD_INPUT if isinstance(exc, click.UsageError) else exc.exit_code
