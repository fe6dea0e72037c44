"""``lingyi daemon status|stop``: the warm processes of ``lingyi verify`` and ``serve`` (lingyi._warm)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Any

from lingyi._warm import place, wire
from lingyi.cli._app import EXIT_OK, App, Group, cli, entry, json_option
from lingyi.errors import LingyiError

HELP = f"""The warm processes that make `lingyi verify` and `lingyi serve` fast.

\b
What runs in the background: the first `lingyi verify` (POSIX only) runs as usual, then
starts one warm process for the user: a Python process that has imported lingyi and loaded
the policies, and forks a child for each later verify. `lingyi serve` goes the same way
(the first starts the warm process as it loads its policies; the warm process then imports
the MCP server stack too), so an MCP client gets `initialize` answered sooner. The child
takes over the caller's stdin, stdout, stderr, working directory, environment and
arguments, so output, exit codes and log records are those of a fresh process; policies
are reloaded when any policy file changes. It listens on a Unix socket in
$XDG_RUNTIME_DIR/lingyi-<uid> (or the temp dir; ${place.FOLDER} chooses another), a folder
only the user may enter.

\b
For how long: until {place.IDLE_DEFAULT_S:.0f} s pass without a call (${place.IDLE} sets
the seconds), or until lingyi's files, the interpreter or its start-up environment change
(then a new one starts for the new kind of process and the old one idles out).

\b
How to stop it: `lingyi daemon stop` (servers it started keep running until their clients
leave); `{place.SWITCH}=0` runs every verify and serve in-process and starts none;
`[cli] warm = false` in a config: its verify and serve calls start none, and a warm
process that serves one exits."""


@cli.group(
    "daemon", cls=Group, short_help="The warm processes of lingyi verify and serve.", help=HELP
)
def daemon_group() -> None:
    pass


@daemon_group.command("status", short_help="List this user's warm processes.")
@json_option
@entry
def status(app: App, as_json: bool) -> int:
    """List this user's warm processes: pid, calls served, idle time, warm policies and
    stacks, and the calls and servers running from it; the one a verify from here would use
    is marked."""
    found = [_ask(path, "status") for path in _sockets()]
    mine = _mine()
    running = [{**s, "current": s["socket"] == mine} for s in found if s is not None]
    if as_json:
        app.json({"enabled": place.enabled(), "socket": mine, "running": running})
        return EXIT_OK
    app.out(_state_line(mine))
    for s in running:
        app.out(_line(s))
    if not running:
        app.out("no warm process running")
    return EXIT_OK


@daemon_group.command("stop", short_help="Stop this user's warm processes.")
@json_option
@entry
def stop(app: App, as_json: bool) -> int:
    """Stop every warm process of this user (calls already handed over, and the servers it
    started, run on until they end)."""
    stopped = [s for path in _sockets() if (s := _ask(path, "stop")) is not None]
    if as_json:
        app.json({"stopped": [{"pid": s["pid"], "socket": s["socket"]} for s in stopped]})
    else:
        app.out("\n".join(f"stopped pid {s['pid']} ({s['socket']})" for s in stopped) or
                "no warm process running")  # fmt: skip
    return EXIT_OK


def _state_line(mine: str | None) -> str:
    if not place.supported():
        return "warm processes: not supported on this platform (every verify runs in-process)"
    if not place.enabled():
        return f"warm processes: off ({place.SWITCH}=0 or an unusual interpreter flag)"
    return f"warm processes: on; a verify from here uses {mine}"


def _line(s: dict[str, Any]) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(s["started"])))
    warm = ", ".join(w["folder"] for w in s["warm_policies"]) or "-"
    mark = "* " if s["current"] else "  "
    return (
        f"{mark}pid {s['pid']}  since {since}  {s['calls']} call(s)  idle {s['idle_s']} s "
        f"(exits after {s['idle_timeout_s']:.0f} s)\n    socket {s['socket']}\n    "
        f"policies warm: {warm}\n    stacks warm: {', '.join(s.get('warm_stacks', []))}"
        f"\n    running: {_children(s.get('children', []))}"
    )


def _children(children: list[dict[str, Any]]) -> str:
    """The calls and servers a warm process runs now: 'serve pid 12 since 10:04:31, …'."""
    shown = [
        f"{c['command'] or '?'} pid {c['pid']} since "
        + time.strftime("%H:%M:%S", time.localtime(float(c["since"])))
        for c in children
    ]
    return ", ".join(shown) or "-"


def _folder() -> str:
    try:
        return place.checked_folder(place.folder(), create=False)
    except place.Refused as exc:
        if not os.path.lexists(place.folder()):
            return ""
        raise LingyiError(f"warm process folder refused: {exc}") from exc


def _sockets() -> list[str]:
    if not place.supported() or not (where := _folder()):
        return []
    return sorted(os.path.join(where, n) for n in os.listdir(where) if n.endswith(".sock"))


def _mine() -> str | None:
    if not place.supported() or not _folder():
        return None
    return place.socket_path(create=False)


def _ask(path: str, op: str) -> dict[str, Any] | None:
    """A warm process's answer to ``op``; None when nothing listens there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        try:
            sock.connect(path)
            wire.send(sock, {"op": op})
            answer, _ = wire.receive(sock)
        except (OSError, ValueError):
            if op == "stop":  # nothing listens: a stale socket file, removed
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return None
    return answer
