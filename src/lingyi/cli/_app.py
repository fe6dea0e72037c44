"""The ``lingyi`` group, the options every command shares, and how every command ends.

Global options (``--config``, ``--log``, ``-v``, ``--color``) are accepted before the command
and after it (``lingyi log verify --log X``): each command carries hidden copies whose
callbacks write into the one :class:`App` of the run, so the value given last wins. Every
command body is wrapped by :func:`entry`: it receives the :class:`App`, returns its exit code,
and an error on purpose (:class:`LingyiError`) ends it with one clear line per problem on
stderr, exit code 2, and with ``--json`` the same problems as JSON on stdout.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
from pydantic import BaseModel, ValidationError

from lingyi import __version__, _logging, errors
from lingyi._validation import problems
from lingyi.cli._output import ColorMode, Printer, Progress
from lingyi.config import Config, ConfigFileError, load_config
from lingyi.errors import LingyiError, PolicyError, TranscriptError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@dataclass
class App:
    """One run of ``lingyi``: the global options as given, and where output goes."""

    config_path: str | None = None
    log_path: str | None = None
    verbose: bool = False
    color: ColorMode = "auto"
    printer: Printer = field(default_factory=Printer)

    def config(self) -> Config:
        """The config by the search order, with ``--log`` applied."""
        return load_config(self.config_path, log=self.log_path)

    def global_flags(self) -> str:
        """The global options this run was given, to repeat in a suggested next command."""
        flags = [f"--config {self.config_path}"] if self.config_path else []
        flags += [f"--log {self.log_path}"] if self.log_path else []
        return "".join(f" {f}" for f in flags)

    def progress(self, label: str) -> Progress:
        return Progress(label, self.printer)

    # The printer's methods, so commands write app.out(...) and app.err(...).
    def out(self, text: str = "") -> None:
        self.printer.out(text)

    def json(self, value: Any, *, indent: int | None = None) -> None:
        self.printer.json(value, indent=indent)

    def err(self, text: str) -> None:
        self.printer.err(text)

    def paint(self, text: str, *, err: bool = False, **style: Any) -> str:
        return self.printer.paint(text, err=err, **style)


def current_app() -> App:
    return click.get_current_context().ensure_object(App)


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None or value is False:  # not given here: keep what came before
            return
        app = ctx.ensure_object(App)
        setattr(app, name, value)
        if name == "color":
            app.printer.mode = value

    return store


_GLOBALS: tuple[tuple[list[str], str, dict[str, Any], str], ...] = (
    (["--config"], "config_path", {"metavar": "PATH"},
     "Config file (default: $LINGYI_CONFIG, ./config/lingyi.toml, packaged defaults)."),
    (["--log"], "log_path", {"metavar": "PATH"},
     "Verification log (overrides the config and $LINGYI_LOG)."),
    (["-v", "--verbose"], "verbose", {"is_flag": True}, "Debug logging on stderr."),
    (["--color"], "color", {"type": click.Choice(["auto", "always", "never"])},
     "Colour: on a terminal only (auto, honours $NO_COLOR), always, never."),
)  # fmt: skip


def global_options(*, hidden: bool) -> list[click.Parameter]:
    """``--config``, ``--log``, ``-v``, ``--color``; shown on the top level, hidden after."""
    return [
        click.Option(
            opts, expose_value=False, hidden=hidden, callback=_store(attr), help=text, **extra
        )
        for opts, attr, extra, text in _GLOBALS
    ]


class Command(click.Command):
    """A lingyi command: it takes the global options after its name too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        super().__init__(*args, **kwargs)
        self.params.extend(global_options(hidden=True))


class Group(click.Group):
    """A lingyi command group; its commands and subgroups are lingyi commands too."""

    command_class = Command
    group_class = type  # subgroups are of this class

    def __init__(self, *args: Any, top: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        super().__init__(*args, **kwargs)
        self.params.extend(global_options(hidden=not top))


F = TypeVar("F", bound=Callable[..., int])


def entry(fn: Callable[..., int]) -> Callable[..., int]:
    """Run a command body with the App; turn an error on purpose into exit code 2."""

    @functools.wraps(fn)
    def run(**kwargs: Any) -> int:
        app = current_app()
        _logging.configure(verbose=app.verbose)
        try:
            return fn(app, **kwargs)
        except LingyiError as exc:
            return fail(app, exc, as_json=bool(kwargs.get("as_json")))
        except ValidationError as exc:  # a model no loader translated: still our words
            return fail(
                app, input_error(exc.title, exc, BaseModel), as_json=bool(kwargs.get("as_json"))
            )
        except BrokenPipeError:  # `lingyi log query | head`: the reader is gone, not an error
            quiet_stdout()
            return EXIT_OK

    return run


def quiet_stdout() -> None:
    """Point stdout at the null device: Python flushes it at exit and would fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def json_option(fn: F) -> F:
    """``--json``: results, and errors, as JSON on stdout."""
    option = click.option(
        "--json", "as_json", is_flag=True, help="Print results (and errors) as JSON on stdout."
    )
    return option(fn)


def fail(app: App, exc: LingyiError, *, as_json: bool) -> int:
    """Report ``exc``: one ``lingyi: error:`` line per problem on stderr, JSON on stdout."""
    items = error_items(exc)
    for item in items:
        app.err(app.paint("lingyi: error: ", err=True, fg="red", bold=True) + item_text(item))
    if as_json:
        app.json({"ok": False, "errors": items})
    return EXIT_BAD_INPUT


_KINDS: tuple[tuple[type[LingyiError], str], ...] = (
    (errors.ConfigError, "config"),
    (errors.LogError, "log"),
    (errors.BackendError, "backend"),
)


def error_items(exc: LingyiError) -> list[dict[str, Any]]:
    """The problems of ``exc`` as data: kind, and file, key and line where known."""
    if isinstance(exc, ConfigFileError):
        file = str(exc.path)
        return [
            {"kind": "config", "file": file, "key": p.key, "message": p.message}
            for p in exc.problems
        ]
    if isinstance(exc, PolicyError):
        return [{"kind": "policy", "file": exc.path, "key": exc.key, "message": exc.message}]
    if isinstance(exc, TranscriptError):
        return [{"kind": "transcript", "line": exc.line, "message": exc.message}]
    kind = next((name for cls, name in _KINDS if isinstance(exc, cls)), "input")
    return [{"kind": kind, "message": str(exc)}]


def item_text(item: dict[str, Any]) -> str:
    """One problem as a line: ``file: key: message`` (or ``line N: message``)."""
    where = [str(item[k]) for k in ("file", "key") if item.get(k) not in (None, "-")]
    if "line" in item:
        where.append(f"line {item['line']}")
    return ": ".join([*where, str(item["message"])])


def input_error(what: str, exc: ValidationError | json.JSONDecodeError, model: Any) -> LingyiError:
    """A JSON document given on the command line that does not parse or validate."""
    if isinstance(exc, json.JSONDecodeError):
        return LingyiError(f"{what}: not valid JSON: {exc}")
    found = problems(exc, model)
    return LingyiError("; ".join(f"{what}: {p.key}: {p.message}" for p in found))


# Each command's module, imported when the command is asked for: a command starts with only
# what it needs (``verify`` never loads the MCP SDK, ``log`` never the constraint layer).
COMMANDS = {
    "appeal": "appeal",
    "approve": "approvals",
    "approvals": "approvals",
    "completion": "completion",
    "config": "config",
    "demo": "serve",
    "init": "init",
    "log": "log",
    "policy": "policy",
    "replay": "replay",
    "report": "report",
    "serve": "serve",
    "stats": "stats",
    "verify": "verify",
}


class LazyGroup(Group):
    """The top group: a command's module registers it on first use (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"lingyi.cli.{COMMANDS[cmd_name]}")
        return super().get_command(ctx, cmd_name)


cli = LazyGroup(
    name="lingyi",
    top=True,
    help="LingYi Guard: verify before you assert.\n\nEvery fact, report of what another council "
    "member said, and tool call goes through the constraint layer and is logged.",
    epilog="Global options may also follow the command (lingyi log verify --log X). "
    "Exit codes: 0 ok (approved or fallback for verify), 1 rejected, expectation not met or "
    "broken chain, 2 bad input. Results go to stdout, diagnostics to stderr. "
    "Shell completion: lingyi completion --help.",
)
cli = click.version_option(
    __version__, "-V", "--version", prog_name="lingyi", message="%(prog)s %(version)s"
)(cli)


def require_named_log(app: App) -> Config:
    """The config; a log named by ``--log`` or ``$LINGYI_LOG`` must be a file that exists (a
    typo would otherwise read as an empty week, "ok (0 records)")."""
    config = app.config()
    named = "--log" if app.log_path else "$LINGYI_LOG" if os.environ.get("LINGYI_LOG") else None
    if named and not config.log_path.is_file():
        what = "not a regular file" if config.log_path.exists() else "no such log file"
        raise LingyiError(f"{config.log_path}: {what} (named by {named})")
    return config
