"""``lingyi config show``: the config, log, council and policies in effect, and where each
came from (a flag, an environment variable, ./config, the packaged defaults, the file's key
or the key's default). Token values are never printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lingyi.cli._app import EXIT_OK, App, Group, cli, entry, json_option
from lingyi.config import Config, Origin, token_problems
from lingyi.errors import LingyiError
from lingyi.guard import open_kb
from lingyi.log.setup import checkpoints_skipped, log_keys
from lingyi.policy import load_policies

PATHS = ("log", "council", "validators", "knowledge_base", "repo_roots", "data_roots")


@cli.group("config", cls=Group, short_help="The configuration in effect.")
def config_group() -> None:
    """The configuration in effect: which file, which log, which policies, and why."""


@config_group.command("show", short_help="What is in effect and where each value came from.")
@json_option
@entry
def config_show(app: App, as_json: bool) -> int:
    """Print the config file, log, council record, policies, knowledge base and roots in
    effect, each with where it came from, then the other settings."""
    config = app.config()
    view = config_view(config)
    if as_json:
        app.json(view)
    else:
        app.out(view_text(app, view))
    return EXIT_OK


def _paths(config: Config) -> dict[str, Any]:
    values: dict[str, Path | list[Path]] = {
        "log": config.log_path,
        "council": config.council_path,
        "validators": config.validators_dir,
        "knowledge_base": config.kb_dir,
        "repo_roots": config.repo_roots,
        "data_roots": config.data_roots,
    }
    return {key: _located(values[key], config.origins[key]) for key in PATHS}


def _located(value: Path | list[Path], origin: Origin) -> dict[str, Any]:
    shown = [str(p) for p in value] if isinstance(value, list) else str(value)
    return {"path": shown, "from": origin.kind, "detail": origin.detail}


def config_view(config: Config) -> dict[str, Any]:
    """Everything ``config show`` prints, as data."""
    raw = config.raw
    settings = raw.model_dump(mode="json")
    for token in settings["server"]["tokens"]:  # a secret never reaches a terminal or a log
        token["token"] = "(set)" if token["token"] else None
    return {
        "config": _located(config.source, config.origins["config"]),
        "paths": _paths(config),
        "policies": _policies(config),
        "knowledge_base": _knowledge_base(config),
        "language": raw.language,
        "timezone": raw.timezone or None,
        "data_sources": sorted(raw.data_sources),
        "server": {
            "host": raw.server.host,
            "port": raw.server.port,
            "tokens": [t.name for t in raw.server.tokens],
            "token_problems": [p.__dict__ for p in token_problems(raw)],
        },
        "approvals": _approvals(config),
        "judge": {"enabled": raw.judge.enabled, "model": raw.judge.model},
        "log": _log_guarantees(config),
        "settings": settings,
    }


def _approvals(config: Config) -> dict[str, Any]:
    """Who may approve a held call: named approvers, or (none named) the caller itself."""
    approvers = config.raw.approvals.approvers
    return {"approvers": approvers, "self_approval": not approvers}


def _log_guarantees(config: Config) -> dict[str, Any]:
    """Whether the log is keyed (the key's source and id, never the key) and checkpointed."""
    try:
        keys = log_keys(config)
    except LingyiError as exc:
        key: dict[str, Any] = {"ok": False, "error": str(exc)}
    else:
        key = {"ok": True, "source": keys.source if keys else None}
        key["key_id"] = keys.current.key_id if keys else None
    anchor = config.checkpoints_path
    return {
        "key": key,
        "checkpoints": str(anchor) if anchor else None,
        "checkpoints_note": None if anchor else checkpoints_skipped(config),
        "max_field_bytes": config.raw.log.max_field_bytes,
    }


def _policies(config: Config) -> dict[str, Any]:
    try:
        policies = load_policies(
            config.validators_dir, require_shared=config.raw.policies.require_shared
        )
    except LingyiError as exc:
        return {"ok": False, "error": str(exc)}
    files = sorted(p.name for p in config.validators_dir.glob("*.toml"))
    return {
        "ok": True,
        "version": policies.version,
        "files": files,
        "members": sorted(policies.members),
    }


def _knowledge_base(config: Config) -> dict[str, Any]:
    """How many documents are in effect, and each one that was skipped and why."""
    try:
        kb = open_kb(config)
    except LingyiError as exc:
        return {"ok": False, "error": str(exc), "documents": 0, "problems": []}
    try:
        problems = [p.model_dump() for p in kb.problems]
        return {"ok": not problems, "documents": len(kb), "problems": problems}
    finally:
        kb.close()


def view_text(app: App, view: dict[str, Any]) -> str:
    rows = [("config", view["config"]), *view["paths"].items()]
    lines = [
        f"{name:<15} {_shown(loc['path'])}  {app.paint('(' + loc['detail'] + ')', dim=True)}"
        for name, loc in rows
    ]
    pol = view["policies"]
    if pol["ok"]:
        lines.append(
            f"{'policies':<15} version {pol['version']}: {', '.join(pol['members'])} ({len(pol['files'])} files)"
        )
    else:
        lines.append(
            f"{'policies':<15} {app.paint('INVALID', fg='red', bold=True)}: {pol['error']}"
        )
    lines += _kb_text(app, view["knowledge_base"])
    server, judge = view["server"], view["judge"]
    lines += [
        f"{'language':<15} {view['language']}",
        f"{'timezone':<15} {view['timezone'] or '(the machine zone)'}",
        f"{'data sources':<15} {', '.join(view['data_sources']) or '-'}",
        *_server_text(app, server),
        _approvals_text(view["approvals"]),
        f"{'judge':<15} {('on, ' + judge['model']) if judge['enabled'] else 'off'}",
        *_log_text(app, view["log"]),
    ]
    return "\n".join(lines)


def _server_text(app: App, server: dict[str, Any]) -> list[str]:
    where = f"{'server':<15} {server['host']}:{server['port']}"
    if not server["tokens"]:
        return [f"{where}, no tokens (HTTP: loopback only, no authentication)"]
    lines = [f"{where}, {len(server['tokens'])} token(s)"]
    bad = app.paint("UNUSABLE", fg="red", bold=True)
    lines += [f"{'':<15} {bad}: {p['key']}: {p['message']}" for p in server["token_problems"]]
    return lines


def _approvals_text(approvals: dict[str, Any]) -> str:
    if approvals["self_approval"]:
        return (
            f"{'approvers':<15} none: a held call is approved by whoever made it "
            "(self-approval; set [approvals] approvers)"
        )
    return f"{'approvers':<15} {', '.join(approvals['approvers'])} (never their own calls)"


def _log_text(app: App, log: dict[str, Any]) -> list[str]:
    key = log["key"]
    if not key["ok"]:
        keyed = f"{app.paint('UNUSABLE', fg='red', bold=True)}: {key['error']}"
    elif key["source"]:
        keyed = f"keyed with {key['key_id']} from {key['source']}"
    else:
        keyed = "plain hash chain (no [log] key_env or key_file)"
    anchor = log["checkpoints"] or f"none: {log['checkpoints_note']}"
    return [f"{'log key':<15} {keyed}", f"{'checkpoints':<15} {anchor}"]


def _shown(path: str | list[str]) -> str:
    return (", ".join(path) or "(none)") if isinstance(path, list) else path


def _kb_text(app: App, kb: dict[str, Any]) -> list[str]:
    if "error" in kb:
        return [f"{'documents':<15} {app.paint('NONE', fg='red', bold=True)}: {kb['error']}"]
    lines = [f"{'documents':<15} {kb['documents']} in the knowledge base"]
    for p in kb["problems"]:
        where = f"{p['file']}:{p['line']}" if p["line"] else p["file"]
        lines.append(f"{'':<15} {app.paint('skipped', fg='yellow')} {where}: {p['message']}")
    return lines
