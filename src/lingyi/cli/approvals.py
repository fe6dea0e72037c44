"""``lingyi approve ID`` and ``lingyi approvals``: a person decides the calls that wait.

A call a policy marks for approval, made by a client that cannot be asked (no elicitation),
is answered ``pending`` with an approval id; ``lingyi approve ID`` approves it (``--refuse``
refuses it), and the same call made again then runs, once. The decision is an ``approval``
record appended to the log's chain, as the server's own records are.
"""

from __future__ import annotations

import json
from contextlib import closing
from datetime import datetime
from typing import Any

import click

from lingyi.approvals import Approval, ApprovalError, Book, every, utc_clock
from lingyi.cli._app import EXIT_OK, App, cli, entry, json_option
from lingyi.cli._output import text_table
from lingyi.config import Config
from lingyi.errors import LingyiError
from lingyi.log import default_actor
from lingyi.log import query as logquery
from lingyi.log.records import normalise_ts, ts_key
from lingyi.log.setup import log_keys, open_log, store_path
from lingyi.store import open_store

ARGS_SHOWN = 80  # characters of the redacted arguments in the table


def _book(config: Config) -> Book:
    return Book(open_log(config), config.raw.approvals.ttl_s)


@cli.command("approve", short_help="Approve (or refuse) a call that waits for a person.")
@click.argument("approval_id", metavar="ID")
@click.option("--refuse", is_flag=True, help="Refuse the call instead of approving it.")
@click.option("--reason", help="Why (kept in the log).")
@click.option("--by", help="Who decides (default: $LINGYI_USER or the login name).")
@json_option
@entry
def approve(
    app: App, approval_id: str, refuse: bool, reason: str | None, by: str | None, as_json: bool
) -> int:
    """Approve the pending request ID (from the call's result or `lingyi approvals`); the
    same call made again then runs once, until the request's expiry."""
    book = _book(app.config())
    try:
        record = book.decide(approval_id, by or default_actor(), refuse=refuse, reason=reason)
    except ApprovalError as exc:
        raise LingyiError(f"[{exc.code}] {exc}") from exc
    finally:
        book.log.close()
        book.close()
    text = f"{record['event']} {approval_id}: {record['member']} · {record['tool']}"
    app.out(logquery.format_jsonl(record) if as_json else text)
    return EXIT_OK


@cli.command("approvals", short_help="Calls waiting for a person's approval.")
@click.option("--all", "show_all", is_flag=True, help="Every approval, whatever its status.")
@json_option
@entry
def approvals(app: App, show_all: bool, as_json: bool) -> int:
    """The pending approval requests: caller, tool, redacted arguments, age and expiry
    (--all: also approved, refused, expired and used ones, with their status)."""
    now = utc_clock()
    config = app.config()
    with closing(open_store(config.log_path, log_keys(config), store_path(config))) as store:
        found = every(store).values()
    rows = [_row(a, now) for a in found]
    rows = [r for r in rows if show_all or r["status"] == "pending"]
    if as_json:
        for row in rows:
            app.out(logquery.format_jsonl(row))
        return EXIT_OK
    head = ["approval", "status", "member", "token", "tool", "args", "age", "expires"]
    keys = ["id", "status", "member", "principal", "tool", "args", "age", "expires"]
    table = [[_cell(k, r) for k in keys] for r in rows]
    app.out(text_table(head, table).rstrip("\n") if table else "no approvals waiting")
    return EXIT_OK


def _row(approval: Approval, now: datetime) -> dict[str, Any]:
    """One approval as listed; a live request past its expiry shows as expired."""
    request = approval.request
    status = "expired" if approval.expired_at(ts_key(now)) else approval.status
    return {
        "id": approval.id,
        "status": status,
        "member": request.get("member"),
        "principal": request.get("principal"),
        "tool": request.get("tool"),
        "args": request.get("args", {}),
        "args_digest": request.get("args_digest"),
        "why": request.get("why"),
        "via": approval.via,
        "requested": request.get("ts"),
        "age_s": _age(request.get("ts"), now),
        "expires": approval.expires,
        "by": next((e.get("by") for e in approval.events if e.get("by")), None),
    }


def _age(ts: object, now: datetime) -> int | None:
    key = normalise_ts(ts)
    if key is None:
        return None
    return int((now - datetime.fromisoformat(key.replace("Z", "+00:00"))).total_seconds())


def _cell(key: str, row: dict[str, Any]) -> object:
    if key == "args":
        text = json.dumps(row["args"], ensure_ascii=False)
        return text if len(text) <= ARGS_SHOWN else text[: ARGS_SHOWN - 1] + "…"
    if key == "age":
        age = row["age_s"]
        return "?" if age is None else f"{age // 60}m{age % 60:02d}s"
    return row.get(key) or "-"
