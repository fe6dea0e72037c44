"""The client side: ``lingyi verify`` hands its call to the warm process, or runs in-process.

With a warm process listening, the call goes there whole (arguments, working directory, the
environment, and stdin, stdout and stderr themselves) and this process only waits for the
exit code. Without one, the call runs in this process exactly as before and then starts a
warm process, detached, for the next call. A call handed over is never run a second time:
a child that ends without an exit code may already have logged, so that is an error (70).
"""

from __future__ import annotations

import _socket  # not socket: see wire
import os
import sys

from lingyi._warm import place, wire

TYPE_CHECKING = False  # not typing's (see lingyi/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable

    Run = Callable[[list[str]], int]

# Signals a fresh process would get from a terminal or a ``kill`` (Ctrl-C is KeyboardInterrupt).
FORWARDED = ("SIGTERM", "SIGHUP", "SIGQUIT")
# The commands a warm process runs: a verify (one call, ~0.5 s of start-up saved) and a
# serve (an MCP client starts one per session and waits for its ``initialize``).
COMMANDS = ("verify", "serve")
# What the warm process keeps of the environment it was started from (see parent_env): the
# start-up variables that are part of the socket's name, and where its folders are.
PARENT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TEMP", "TMP", "TZ",
              place.FOLDER, place.IDLE, place.SWITCH)  # fmt: skip
PARENT_PREFIX = (*place.START_ENV, "XDG_")
EXIT_LOST = 70  # EX_SOFTWARE: the warm process ended the call without an exit code
# The global options of the top group, with a value and without (lingyi.cli._app._GLOBALS).
WITH_VALUE = ("--config", "--log", "--color")
FLAGS = ("-v", "--verbose")
LOST = (
    "lingyi: error: the warm process (lingyi daemon) ended this call without an exit code; "
    "the call is not repeated (it may have been logged already). "
    "LINGYI_DAEMON=0 runs it in-process; lingyi daemon --help says more.\n"
)


def command(args: list[str]) -> str | None:
    """The command named in ``args``, past the global options (None: none, or help)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in WITH_VALUE:
            i += 2
        elif arg in FLAGS or arg.startswith(tuple(f"{o}=" for o in WITH_VALUE)):
            i += 1
        else:
            return None if arg.startswith("-") else arg
    return None


def wanted(args: list[str]) -> bool:
    """Hand this call to a warm process: a command of :data:`COMMANDS`, where a warm process
    may be used, with this process's own stdio (a redirected ``sys.stdout`` would not see the
    child's output)."""
    own = sys.stdin is sys.__stdin__ and sys.stdout is sys.__stdout__
    own = own and sys.stderr is sys.__stderr__
    return own and command(args) in COMMANDS and place.enabled() and _cwd() is not None


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed: a fresh process would fail the same way here
        return None


def run(args: list[str], in_process: Run) -> int:
    """Run ``args`` in the warm process, or here (then start one for the next call)."""
    try:
        path = place.socket_path()
    except place.Refused as exc:
        _refused(exc)
        return in_process(args)
    sock = connect(path)
    if sock is not None:
        try:
            code = through(sock, args)
        finally:
            sock.close()
        return in_process(args) if code is None else code  # None: it could not fork, ran nothing
    from lingyi import _warm
    from lingyi._warm import policies

    if command(args) == "serve":  # it may run for hours: warm the next one while it starts
        policies.record(then=lambda key: _spawn_once(path, key))
        return in_process(args)
    policies.record()  # the folders this call loads: the warm process loads them first
    code = in_process(args)
    if not _warm.declined:  # [cli] warm = false in the config this call used
        spawn(path, policies.misses)
    return code


def parent_env() -> dict[str, str]:
    """The warm process's own environment: what it needs to find its socket, its caches and
    its interpreter, nothing more. Each child takes its caller's whole environment, so the
    secrets of the first caller (``LINGYI_LOG_KEY``, tokens, API keys) need not live on in
    a process that outlasts it."""
    return {k: v for k, v in os.environ.items() if k in PARENT_ENV or k.startswith(PARENT_PREFIX)}


def _spawn_once(path: str, key: tuple[str, bool, bool]) -> None:
    """The first policy set an in-process ``serve`` loads: start the warm process with it
    and the server stack (its config has been read by then: ``declined`` is known)."""
    from lingyi import _warm

    if not _warm.declined and not _spawned:
        _spawned.append(path)
        spawn(path, [key], stacks=["serve"])


_spawned: list[str] = []  # the socket an in-process serve started a warm process for


def connect(path: str) -> _socket.socket | None:
    """A connection to the warm process at ``path``; None when none listens (a missing or a
    stale socket: the warm process started next replaces it)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def through(sock: _socket.socket, args: list[str]) -> int | None:
    """Send the call, wait for its exit code; None when the warm process could not start a
    child (nothing ran: run it here). Ctrl-C and the signals of :data:`FORWARDED` are passed
    on to the child: this process then ends as the child did, as a fresh one would have."""
    fds = [fd for fd in (0, 1, 2) if _is_open(fd)]
    mask = os.umask(0o077)  # read it (there is no other way), then put it back
    os.umask(mask)
    call: dict[str, object] = {"argv": list(sys.argv), "args": args, "cwd": _cwd()}
    call["env"] = dict(os.environ)
    call["umask"] = mask  # the modes of the files the call creates (a log, a cache)
    live: list[int] = []  # the child while it runs: where a forwarded signal goes
    caught: list[int] = []  # the signals forwarded
    try:
        wire.send(sock, {**call, "fds": fds}, fds)
        return _replies(sock, live, caught)
    except KeyboardInterrupt:
        return _interrupted(sock, live, caught)
    except (OSError, ValueError):
        return _lost(live, caught)


def _replies(sock: _socket.socket, live: list[int], caught: list[int]) -> int | None:
    """The child's pid (then signals go to it), then its exit code."""
    while True:
        reply, _ = wire.receive(sock)
        if reply is None:
            return _lost(live, caught)
        if "exit" in reply:
            live.clear()  # ended: its pid may be reused, nothing more goes to it
            return int(reply["exit"])
        if reply.get("not_run") and not live:
            return None
        if "pid" in reply and not live:
            live.append(int(reply["pid"]))
            _forward(live, caught)


def _interrupted(sock: _socket.socket, live: list[int], caught: list[int]) -> int:
    """Ctrl-C: the child gets SIGINT, and this process waits for it to end as a fresh one
    would (a server finishes its running calls first); a second Ctrl-C stops waiting."""
    if not live:
        sys.stderr.write("\nlingyi: interrupted\n")
        return 130
    _interrupt(live[0])
    try:
        code = _replies(sock, live, caught)
    except KeyboardInterrupt:
        if live:
            _interrupt(live[0])
        sys.stderr.write("\nlingyi: interrupted\n")
        return 130
    except (OSError, ValueError):
        return _lost(live, caught)
    return 130 if code is None else code


def _lost(live: list[int], caught: list[int]) -> int:
    """The connection ended without an exit code: of a signal we forwarded, or lost."""
    live.clear()
    if caught:  # the child ended of a signal sent to us: so do we
        return _die_of(caught[0])
    sys.stderr.write(LOST)
    return EXIT_LOST


def _forward(live: list[int], caught: list[int]) -> None:
    """From now on, a signal of :data:`FORWARDED` sent to this process goes to the child in
    ``live`` while it is there (the child runs in the warm process's session: a terminal's
    hangup or a ``kill`` of this process would not reach it), and is noted in ``caught``."""
    import signal

    def forward(signum: int, _frame: object) -> None:
        caught.append(signum)
        for pid in live:
            try:  # noqa: SIM105  (contextlib would import collections and functools)
                os.kill(pid, signum)
            except OSError:
                pass

    for name in FORWARDED:
        if (signum := getattr(signal, name, None)) is not None:
            signal.signal(signum, forward)


def _die_of(signum: int) -> int:
    """End this process by ``signum``, with its default action; 128 + ``signum`` (the
    shell's code for it) if that does not end it."""
    import signal

    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum


def _interrupt(pid: int) -> None:
    import signal

    try:  # noqa: SIM105  (contextlib would import collections and functools)
        os.kill(pid, signal.SIGINT)
    except OSError:
        pass


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _refused(exc: place.Refused) -> None:
    """Say once per call why no warm process is used: someone may be tampering."""
    from lingyi import _logging

    _logging.get_logger().warning("warm process not used: unsafe socket folder", reason=str(exc))


def spawn(path: str, warm: list[tuple[str, bool, bool]], stacks: list[str] | None = None) -> None:
    """Start the warm process for ``path``, detached (its own session, stdio on the null
    device), with the policy sets and the stacks (``"serve"``: the MCP server's modules) to
    load first; a failure to start only costs speed."""
    import json
    import subprocess

    flags = [f for f, on in (("-B", sys.flags.dont_write_bytecode),
                             ("-s", sys.flags.no_user_site),
                             ("-P", getattr(sys.flags, "safe_path", False))) if on]  # fmt: skip
    argv = [sys.executable, *flags, "-m", "lingyi._warm.server", path]
    argv += [json.dumps(place.import_path()), json.dumps(warm), json.dumps(stacks or [])]
    try:
        started = subprocess.Popen(
            argv,
            env=parent_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return
    if stacks:  # from a serve, which outlives it: reap it when it exits (no zombie is left)
        import threading

        threading.Thread(target=started.wait, name="lingyi-warm-reaper", daemon=True).start()
