"""The warm process: imports the command line once, then forks a child for each call.

Single-threaded on purpose (forking a process with threads can deadlock the child). The
parent accepts a connection, forks, closes its copies of the call's descriptors and goes
back to listening; it never waits on a child (SIGCHLD is ignored, so the kernel reaps them).
Between calls it loads the policy sets a child had to load the slow way (:mod:`.policies`).
After :data:`~lingyi._warm.place.IDLE` seconds without a call (600 by default) it removes
its socket and exits; ``lingyi daemon stop`` asks it to do so now.

Nothing that holds an OS resource is built before a fork: no log file, database or thread.
The parent logs through :mod:`lingyi._logging` only; its stdio is the null device.

    python -m lingyi._warm.server SOCKET SYS_PATH_JSON WARM_JSON [STACKS_JSON]
                                                        (started by the client)
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from lingyi._warm import child, client, place, policies, wire

# What a verify imports, loaded before the first fork so no child pays for it: the command
# line, the verify command, its JSON output and --context paths, the log writer, and the
# log's lock (filelock: lingyi._locks imports it with the first lock taken, 8-14 ms), and
# jsonschema (a tool's arguments that the quick check of lingyi.policy._quick cannot pass).
PRELOAD = ("lingyi.cli._app", "lingyi.cli.verify", "lingyi.cli.replay", "lingyi.replay",
           "lingyi.log.setup", "lingyi.guard", "lingyi.checks", "lingyi.answers",
           "lingyi.conclusions", "structlog", "filelock", "jsonschema")  # fmt: skip
# What a serve imports beyond a verify, loaded when a serve is first seen (the first one was
# in-process, or a child ran one): the MCP SDK, the server, both transports and the tools'
# backends. A user who only verifies never pays for them.
STACKS = {"serve": ("lingyi.cli.serve", "lingyi.server", "lingyi.server.executors",
                    "mcp.server.stdio", "mcp.server.streamable_http_manager",
                    "anyio._backends._asyncio", "anyio.streams.stapled", "uvicorn")}  # fmt: skip


class Server:
    """The listening socket, the children's reports, and the warm policy sets."""

    def __init__(self, path: str, listener: socket.socket, lock: int, idle_s: float) -> None:
        self.path, self.listener, self.lock, self.idle_s = path, listener, lock, idle_s
        self.inode = os.stat(path).st_ino
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.reports: dict[int, bytearray] = {}  # a child's report pipe → what it wrote
        self.running: dict[int, dict[str, Any]] = {}  # a child's report pipe → what it runs
        self.warm = policies.Warm()
        self.stacks: list[str] = []  # of STACKS: loaded, and wanted next
        self.stacks_wanted: list[str] = []
        self.started, self.calls, self.stopping = time.time(), 0, False
        self.last = time.monotonic()

    def serve(self) -> None:
        """Accept calls until idle for ``idle_s`` or asked to stop."""
        while not self.stopping:
            wanted = self.warm.wanted or self.stacks_wanted
            wait = 0.0 if wanted else self.last + self.idle_s - time.monotonic()
            events = self.selector.select(max(wait, 0.0))
            for key, _ in events:
                if key.fileobj is self.listener:
                    self.accept()
                else:
                    self.report(int(key.fd))
            if not events and wanted:
                self.warm_next()  # idle: load what the last child loaded the slow way
                self.last = time.monotonic()  # idle counts from the end of its own work
            elif not events and time.monotonic() - self.last >= self.idle_s:
                break

    def warm_next(self) -> None:
        """Load one wanted thing: a stack of modules first (a server waits on them), then a
        policy set."""
        if self.stacks_wanted:
            stack = self.stacks_wanted.pop(0)
            load_stack(stack)
            self.stacks.append(stack)
        else:
            self.warm.load_next()

    def want_stack(self, name: str) -> None:
        if name in STACKS and name not in self.stacks and name not in self.stacks_wanted:
            self.stacks_wanted.append(name)

    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            try:
                call, fds = wire.receive(conn, max_fds=3)
            except (OSError, ValueError) as exc:
                log().warning("warm process: a malformed call ignored", error=str(exc))
                return
            if call is not None:
                self.answer(conn, call, fds)

    def answer(self, conn: socket.socket, call: dict[str, Any], fds: list[int]) -> None:
        """A control request (status, stop), or a call: fork the child that runs it."""
        if "op" in call:
            wire.close(fds)
            self.control(conn, str(call["op"]))
            return
        self.last = time.monotonic()  # a call, not a status request, keeps the process alive
        try:
            read, write = os.pipe()
            pid = os.fork()
        except OSError as exc:  # no child, so nothing ran: the caller may run it itself
            log().warning("warm process: cannot fork", error=str(exc))
            wire.close(fds)
            with contextlib.suppress(OSError):
                wire.send(conn, {"not_run": True})
            return
        if pid == 0:  # the child never returns from here
            os.close(read)
            inherited = [self.listener.fileno(), self.lock, *self.reports]
            child.run(conn, call, fds, write, inherited, self.selector, self.warm)
        os.close(write)
        wire.close(fds)  # the caller's pipes must see EOF when the child is done
        self.calls += 1
        self.reports[read] = bytearray()
        command = client.command([str(a) for a in call.get("args", [])]) or ""
        self.running[read] = {"pid": pid, "command": command, "since": time.time()}
        self.selector.register(read, selectors.EVENT_READ, None)

    def control(self, conn: socket.socket, op: str) -> None:
        if op == "stop":
            self.stopping = True
        with contextlib.suppress(OSError):
            wire.send(conn, {**self.status(), "stopping": self.stopping})

    def status(self) -> dict[str, Any]:
        warm = [{"folder": k[0], "require_shared": k[1], "cache": k[2]} for k in self.warm.sets]
        return {"pid": os.getpid(), "socket": self.path, "started": self.started,
                "idle_timeout_s": self.idle_s, "idle_s": round(time.monotonic() - self.last, 1),
                "calls": self.calls, "python": sys.executable, "warm_policies": warm,
                "warm_stacks": ["verify", *self.stacks],
                "children": list(self.running.values())}  # fmt: skip

    def report(self, fd: int) -> None:
        """A child's JSON lines, acted on as each arrives (a serve's come hours before it
        ends): what it loaded the slow way, the stacks it used, whether to stop."""
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if data:
            self.reports[fd] += data
            *lines, rest = bytes(self.reports[fd]).split(b"\n")
            self.reports[fd] = bytearray(rest)
        else:  # the child is done: what is left is its last line
            lines = [bytes(self.reports.pop(fd))]
            self.running.pop(fd, None)
            self.selector.unregister(fd)
            os.close(fd)
        for line in lines:
            self.told(line)

    def told(self, line: bytes) -> None:
        """One report line; a malformed one is ignored (a child only costs its own warmth)."""
        try:
            told = json.loads(line) if line.strip() else {}
            keys = [(str(f), bool(r), bool(c)) for f, r, c in told.get("misses", [])]
            stacks = [str(name) for name in told.get("stacks", [])]
        except (ValueError, TypeError, AttributeError):
            return
        for key in keys:
            self.warm.want(key)
        for name in stacks:
            self.want_stack(name)
        if told.get("stop"):  # the call's config says [cli] warm = false
            self.stopping = True

    def close(self) -> None:
        """Remove the socket (if it is still ours), serve what is queued on it, and stop."""
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        self.listener.setblocking(False)
        while True:  # connected before the unlink: they are answered, not dropped
            try:
                conn, _ = self.listener.accept()
            except OSError:
                break
            conn.setblocking(True)
            with conn, contextlib.suppress(OSError, ValueError):
                call, fds = wire.receive(conn, max_fds=3)
                if call is not None:
                    self.answer(conn, call, fds)
        self.listener.close()
        os.close(self.lock)


def log() -> Any:
    from lingyi import _logging

    return _logging.get_logger("lingyi.warm")


def lock(path: str) -> int | None:
    """An exclusive lock beside the socket for this process's lifetime; None when another
    warm process holds it (two started at once: one wins, the other exits)."""
    import fcntl  # POSIX only; every lingyi module imports without it (tests/test_vlog.py)

    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def bind(path: str) -> socket.socket:
    """Listen at ``path``; with the lock held, a socket file already there is stale."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is the user's only, whatever the folder allows
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get(place.IDLE, place.IDLE_DEFAULT_S)))
    except ValueError:
        return place.IDLE_DEFAULT_S


def preload() -> None:
    """Import what a verify needs, so that children start with it."""
    _import(PRELOAD)
    from lingyi.redact import redact_value

    # The packaged secret catalogue (a package file: its mtime is in the socket's key) is
    # parsed, and its hint automaton built, on first use: every log record needs it.
    redact_value({"content": "token=ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"})


def load_stack(name: str) -> None:
    """Import the stack ``name`` of :data:`STACKS` (and what it loads by name when it starts)."""
    _import(STACKS[name])
    if name == "serve":
        _uvicorn_protocols()


def _import(modules: tuple[str, ...]) -> None:
    import importlib

    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _uvicorn_protocols() -> None:
    """uvicorn imports its HTTP protocol, event loop and lifespan classes by name when it
    starts: its ``Config.load`` does that (and binds nothing, starts nothing)."""
    with contextlib.suppress(Exception):
        import uvicorn

        uvicorn.Config(_no_app, log_config=None).load()


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI app for :func:`_uvicorn_protocols` to load against; never served."""


def main(argv: list[str]) -> int:
    """Start: the same kind of process as the caller (or exit), one per socket, then serve."""
    path, sys.path[:], warm = argv[0], json.loads(argv[1]), json.loads(argv[2])
    stacks = json.loads(argv[3]) if len(argv) > 3 else []
    try:
        if place.socket_path() != path:  # not what the caller would run fresh: do not serve
            return 1
    except place.Refused:
        return 1
    held = lock(path)
    if held is None:
        return 0
    os.chdir("/")  # hold no caller's folder busy; each child goes to its caller's
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # our session has no terminal; be sure
    server = Server(path, bind(path), held, idle_seconds())
    try:
        preload()
        for name in stacks:
            server.want_stack(str(name))
        for folder, require_shared, cache in warm:
            server.warm.want((str(folder), bool(require_shared), bool(cache)))
        server.serve()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
