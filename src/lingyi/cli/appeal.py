"""``lingyi appeal``: appeal a verdict, resolve an appeal, list appeals.

``lingyi appeal ID --reason TEXT`` files an appeal (short for ``lingyi appeal file ID``);
``resolve`` and ``list`` are the other actions. Appeals and resolutions are appended records:
the log stays append-only.
"""

from __future__ import annotations

from typing import Any

import click

from lingyi.cli._app import EXIT_OK, App, Group, cli, entry, json_option
from lingyi.cli._output import text_table
from lingyi.errors import LingyiError
from lingyi.log import appeals
from lingyi.log import query as logquery
from lingyi.log.setup import log_options


class AppealGroup(Group):
    """A group whose first word, when it is not an action, is the id to appeal."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = _first_word(args, self._valued_options(ctx))
        if first is not None and first not in self.commands:
            args = ["file", *args]
        return super().parse_args(ctx, args)

    def _valued_options(self, ctx: click.Context) -> set[str]:
        """This group's options that take a value (``--log PATH``): their value is no word."""
        params = self.get_params(ctx)
        return {o for p in params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}


def _first_word(args: list[str], valued: set[str]) -> str | None:
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in valued
        else:
            return arg
    return None


@cli.group("appeal", cls=AppealGroup, short_help="Appeal a verification, resolve or list appeals.")
def appeal_group() -> None:
    """Appeal a verdict the guard got wrong (too strict or too lax), and review appeals.

    \b
    lingyi appeal ID --reason TEXT
    lingyi appeal resolve ID (--uphold | --overturn) --note TEXT
    lingyi appeal list [--open]
    """


def _by(fn: Any) -> Any:
    return click.option("--by", help="Who is acting (default: $LINGYI_USER or the login name).")(fn)


@appeal_group.command("file", short_help="Appeal one verification (the default action).")
@click.argument("record_id", metavar="ID")
@click.option("--reason", help="Why the verdict was wrong.")
@_by
@json_option
@entry
def appeal_file(app: App, record_id: str, reason: str | None, by: str | None, as_json: bool) -> int:
    """Appeal the verification with this record id (lingyi verify prints it)."""
    if not reason:
        raise LingyiError('filing an appeal needs --reason "why the verdict was wrong"')
    config = app.config()
    options = log_options(config)
    record = appeals.file_appeal(config.log_path, record_id, reason, by, options=options)
    _print_record(app, record, f"appeal {record['id']} recorded against {record_id}", as_json)
    return EXIT_OK


@appeal_group.command("resolve", short_help="Uphold or overturn an open appeal.")
@click.argument("record_id", metavar="ID")
@click.option("--uphold", "outcome", flag_value="upheld", help="The verdict stands.")
@click.option("--overturn", "outcome", flag_value="overturned", help="The verdict was wrong.")
@click.option("--note", help="The reason for the decision.")
@_by
@json_option
@entry
def appeal_resolve(
    app: App, record_id: str, outcome: str | None, note: str | None, by: str | None, as_json: bool
) -> int:
    """Resolve the open appeal of a verification (or the appeal with this id)."""
    if outcome is None:
        raise LingyiError("resolving an appeal needs --uphold or --overturn")
    if not note:
        raise LingyiError('resolving an appeal needs --note "the reason for the decision"')
    config = app.config()
    options = log_options(config)
    record = appeals.resolve_appeal(config.log_path, record_id, outcome, note, by, options=options)
    text = f"appeal {record['appeal_id']} {record['outcome']} (verification {record['appeal_of']})"
    _print_record(app, record, text, as_json)
    return EXIT_OK


def _print_record(app: App, record: dict[str, Any], text: str, as_json: bool) -> None:
    app.out(logquery.format_jsonl(record) if as_json else text)


@appeal_group.command("list", short_help="Appeals and their status.")
@click.option("--open", "open_only", is_flag=True, help="Only open appeals.")
@json_option
@entry
def appeal_list(app: App, open_only: bool, as_json: bool) -> int:
    """Every appeal with its status, the verification it concerns and who filed it."""
    config = app.config()
    rows = appeals.list_appeals(config.log_path, open_only=open_only, options=log_options(config))
    if as_json:
        for row in rows:
            app.out(logquery.format_jsonl(row))
        return EXIT_OK
    head = ["appeal", "status", "verification", "member", "decision", "by", "reason"]
    keys = ["id", "status", "appeal_of", "member", "decision", "by", "reason"]
    table = [[r[k] for k in keys] for r in rows]
    app.out(text_table(head, table).rstrip("\n") if table else "no appeals")
    return EXIT_OK
