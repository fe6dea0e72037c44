"""``lingyi policy check [FOLDER]``, ``lingyi policy checks`` and ``lingyi policy diff``.

``check`` reports every problem of a policy folder at once (like ``opa check``), each naming
its file, key and the valid values, and every path of the config that a tool would miss; ``checks`` lists the registered checks with the stage the
policies run them in and their parameters; ``diff`` (:mod:`lingyi.cli.policy_diff`) decides
the same inputs under another folder and prints what changes.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from lingyi.cli._app import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    App,
    Group,
    cli,
    entry,
    error_items,
    item_text,
    json_option,
)
from lingyi.cli._reference import check_entries
from lingyi.cli.policy_diff import policy_diff
from lingyi.config import Config, token_problems
from lingyi.config_paths import path_problems
from lingyi.errors import LingyiError, PolicyError
from lingyi.guard import shipped_policies
from lingyi.models import OnFail
from lingyi.policy import PolicySet, load_policies
from lingyi.policy._load import policy_errors, policy_files
from lingyi.policy._weakening import start_weakenings


@cli.group("policy", cls=Group, short_help="Member policies: validate them, list the checks.")
def policy_group() -> None:
    """Member policies (validators/*.toml): validate a folder, list the registered checks."""


@policy_group.command("check", short_help="Validate every policy file and config path.")
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@json_option
@entry
def policy_check(app: App, folder: Path | None, as_json: bool) -> int:
    """Validate FOLDER (default: the config's validators) and every path the config names
    (knowledge base, log, council, repo and data roots, file data sources), and report every
    problem at once, each naming its file and key. Exit 2 when there is any."""
    config = app.config()
    folder = folder if folder is not None else config.validators_dir
    required = config.raw.policies.require_shared
    items = [i for e in policy_errors(folder, require_shared=required) for i in error_items(e)]
    items += _path_items(config) + _who_items(config, folder, required)
    items += [i for e in _weaker(config, folder, required) for i in error_items(e)]
    for path, why in policy_files(folder)[1].items() if folder.is_dir() else []:
        app.err(f"  {path}: {why}")
    if items:
        for item in items:
            app.err(app.paint("✗ ", err=True, fg="red") + item_text(item))
        app.err(f"{folder}: {len(items)} problem(s)")
        if as_json:
            app.json({"ok": False, "folder": str(folder), "errors": items})
        return EXIT_BAD_INPUT
    policies = load_policies(folder, require_shared=required)
    notes = _upstream_notes(config, policies)
    for note in notes:
        app.err(app.paint("⚠ ", err=True, fg="yellow") + note)
    if as_json:
        app.json({"ok": True, "folder": str(folder), **_summary(policies), "upstreams": notes})
    else:
        app.out(_summary_text(app, folder, policies))
    return EXIT_OK


def _upstream_notes(config: Config, policies: PolicySet) -> list[str]:
    """What the configured upstreams list against what the policies say: tools no policy
    mentions (not served), policies of tools an upstream does not list. Connects to them."""
    if not config.raw.upstreams:
        return []
    from lingyi.gateway import Gateway  # connecting costs a process per upstream: only here
    from lingyi.server.tools import upstream_problems

    gateway = Gateway(config)
    try:
        notes = [f"upstream {n}: unavailable" for n in gateway.unavailable]
        return notes + upstream_problems(policies, gateway)
    finally:
        gateway.close()


def _path_items(config: Config) -> list[dict[str, Any]]:
    """The config's path problems as error items (kind ``path``, the config file and key)."""
    return [
        {"kind": "path", "file": str(config.source), "key": p.key, "message": p.message}
        for p in path_problems(config)
    ]


def _weaker(config: Config, folder: Path, required: bool) -> list[PolicyError]:
    """What the folder weakens against the shipped policies and the config does not allow
    (a start refuses the first of these)."""
    shipped = shipped_policies()
    if folder.resolve() == shipped.resolve():
        return []
    try:
        policies = load_policies(folder, require_shared=required)
    except LingyiError:
        return []  # its problems are listed already
    allow = config.raw.policies.allow_weakening
    judge_on_fail = OnFail(config.raw.judge.on_fail)
    return start_weakenings(load_policies(shipped), policies, allow, judge_on_fail=judge_on_fail)


def _who_items(config: Config, folder: Path, required: bool) -> list[dict[str, Any]]:
    """Tokens that cannot be used, and members of tokens and upstreams no policy knows."""
    from lingyi.server.auth import member_problems  # the MCP SDK: only for this check

    found = token_problems(config.raw)
    with contextlib.suppress(LingyiError):  # policy problems are listed already
        found += member_problems(config, load_policies(folder, require_shared=required))
    return [
        {"kind": "config", "file": str(config.source), "key": p.key, "message": p.message}
        for p in found
    ]


def _summary(policies: PolicySet) -> dict[str, Any]:
    members = {
        m.id: {
            "name": m.name,
            "file": m.source,
            "tools": sorted(m.tools),
            "checks": [c.check for c in m.checks],
        }
        for m in policies.members.values()
    }
    return {"version": policies.version, "members": members}


def _summary_text(app: App, folder: Path, policies: PolicySet) -> str:
    lines = [
        f"{folder}: {app.paint('OK', fg='green', bold=True)} (policy version {policies.version})"
    ]
    for m in policies.members.values():
        tools = ", ".join(sorted(m.tools)) or "-"
        lines.append(f"  {m.id:<13} {m.name}  tools: {tools}  checks: {len(m.checks)}")
    return "\n".join(lines)


@policy_group.command("checks", short_help="List the registered checks and their parameters.")
@json_option
@entry
def policy_checks(app: App, as_json: bool) -> int:
    """Every registered check (plugins included): its code, the stage the policies in effect
    run it in, the members that run it, what it stops; --json adds each parameters model as
    JSON Schema."""
    entries = check_entries(_policies_in_effect(app))
    if as_json:
        app.json({"checks": entries})
        return EXIT_OK
    for e in entries:
        first = e["doc"].splitlines()[0] if e["doc"] else ""
        params = ", ".join(e["params"].get("properties", {})) or "-"
        code = app.paint(f"{e['code']:<30}", bold=True)
        app.out(f"{code} {e['stage'] or '-':<17} {first}")
        app.out(f"{'':<30} {'':<17} params: {params}")
    return EXIT_OK


def _policies_in_effect(app: App) -> PolicySet | None:
    """The policies to read stages from; the list of checks needs none, so a broken folder
    only loses the stage column."""
    try:
        config = app.config()
        return load_policies(
            config.validators_dir, require_shared=config.raw.policies.require_shared
        )
    except LingyiError as exc:
        app.err(f"lingyi: warning: stages unknown: {exc}")
        return None


# ``policy diff`` lives in its own module (it brings the layer and replay).
policy_group.add_command(policy_diff)
