"""One call in a forked child of the warm process: become the caller's process, run, answer.

The child takes the caller's stdin, stdout and stderr (the descriptors passed over the
socket, put on 0, 1 and 2, so ``sys.stdout`` and friends write to them), its working
directory, umask and environment (``os.environ`` replaced, then ``time.tzset()``), its ``argv``;
runs :func:`lingyi.cli.run` as a fresh process would run ``main``; runs the atexit handlers
registered during the call, waits for the call's own threads, flushes; sends the exit code
(also when the command ends with :func:`lingyi._warm.exit_now`); tells the parent, a JSON
line at a time, what to warm next (the policy sets it had to load the slow way, as it loads
them; the server's modules, for a ``serve``) and whether to exit (the call's config says
``[cli] warm = false``); and ends with ``os._exit`` (the parent's atexit handlers and
buffers are not the call's). A caller that goes away mid-call (killed) ends the call.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, NoReturn

from lingyi import _warm
from lingyi._warm import client, policies, wire


def run(
    conn: socket.socket,
    call: dict[str, Any],
    fds: list[int],
    report: int,
    inherited: list[int],
    selector: selectors.BaseSelector,
    warm: policies.Warm,
) -> NoReturn:
    """The child's whole life; it never returns."""
    code, done = 70, threading.Event()
    try:
        _leave_parent(inherited, selector)
        _become_caller(call, fds)
        wire.send(conn, {"pid": os.getpid()})
        _watch_caller(conn, done)
        args = [str(a) for a in call.get("args", [])]
        if client.command(args) == "serve":  # the parent warms the server's modules next
            _tell(report, {"stacks": ["serve"]})
        warm.serve(then=lambda key: _tell(report, {"misses": [key]}))
        _warm.exiting.append(lambda given: _end(conn, done, given))
        _warm.declining.append(lambda: _tell(report, {"stop": True}))  # now: a serve is long
        code = _command(args)
    except BaseException:  # the child must answer whatever happened, never unwind into the parent
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            sys.stderr.flush()
    finally:
        _end(conn, done, code)
        os._exit(0)


def _end(conn: socket.socket, done: threading.Event, code: int) -> None:
    """Once: the exit code to the caller. (The parent has been told, as they happened, what
    was loaded the slow way and whether to stop.)"""
    if done.is_set():
        return
    done.set()  # first: the caller closes its end once it has the code (see _watch_caller)
    with contextlib.suppress(BaseException):
        wire.send(conn, {"exit": code})
        conn.close()


def _tell(report: int, message: dict[str, Any]) -> None:
    """One JSON line to the parent (it acts on each line as it arrives)."""
    with contextlib.suppress(OSError):
        os.write(report, json.dumps(message).encode() + b"\n")


def _watch_caller(conn: socket.socket, done: threading.Event) -> None:
    """The caller gone before the call ended (killed, so its socket closed): the call ends
    too, by SIGTERM (a server drains its running calls first), as it would have in the
    caller's own process. Nothing else reaches it: it runs in the warm process's session."""

    def wait() -> None:
        with contextlib.suppress(OSError):
            conn.recv(1)  # the caller sends nothing more: this returns when it goes
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="lingyi-warm-caller", daemon=True).start()


def _leave_parent(inherited: list[int], selector: selectors.BaseSelector) -> None:
    """Close what belongs to the parent; signals back to a fresh process's defaults."""
    selector.close()
    for fd in inherited:
        with contextlib.suppress(OSError):
            os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # subprocesses must be waited for again
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _become_caller(call: dict[str, Any], fds: list[int]) -> None:
    """The caller's descriptors on 0, 1, 2, its folder, environment and argv."""
    given = [int(fd) for fd in call.get("fds", [])]
    for target, fd in zip(given, fds, strict=False):
        os.dup2(fd, target)
    for fd in fds:
        if fd not in (0, 1, 2):
            os.close(fd)
    for target in {0, 1, 2} - set(given[: len(fds)]):  # closed in the caller: closed here
        with contextlib.suppress(OSError):
            os.close(target)
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        with contextlib.suppress(Exception):  # a terminal is line-buffered, as at a fresh start
            stream.reconfigure(line_buffering=fd == 2 or os.isatty(fd))  # type: ignore[union-attr]
    os.chdir(str(call["cwd"]))
    os.umask(int(call.get("umask", 0o022)))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(call["env"]).items()})
    time.tzset()
    if "tempfile" in sys.modules:  # it keeps the temp dir it found first: find it again
        import tempfile

        tempfile.tempdir = None
    sys.argv = [str(a) for a in call.get("argv", ["lingyi"])] or ["lingyi"]
    atexit._clear()  # the parent's handlers are not this call's


def _command(args: list[str]) -> int:
    """Run the command as a fresh ``lingyi`` would, exit code included."""
    from lingyi.cli import run as run_command

    try:
        code = run_command(args)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for thread in threading.enumerate():  # a fresh interpreter waits for these at exit
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    return _flushed(code)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    sys.stderr.write(f"{value}\n")
    return 1


def _flushed(code: int) -> int:
    """Flush stdout and stderr; a fresh interpreter that cannot flush stdout exits 120."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        code = code or 120
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    return code
