"""Where the warm process listens, and whether this process may use one at all.

One socket per user and per *kind of process*: its name is a hash of everything that makes a
process that started earlier behave differently from a fresh one (the interpreter, its
flags, lingyi's own files and their newest mtime, the import path, the environment variables
read at start-up, the groups, the resource limits, the control groups). What a call can
carry itself (working directory, umask, environment, stdio) it does, per call. A changed
checkout, another venv or ``PYTHONPATH`` pointing elsewhere (``benchmarks/bench_start.py
--baseline``) therefore never reaches a process started for something else. The folder is
refused unless it is a real folder (not a link), owned by the user, with no group or other
permission bits: the socket hands over the caller's terminal.
"""

from __future__ import annotations

import _socket  # not socket: its enum and selectors imports cost more than this whole path
import os
import stat
import sys
import zlib

SWITCH = "LINGYI_DAEMON"  # "0": never use or start a warm process
FOLDER = "LINGYI_WARM_DIR"  # the socket folder instead of $XDG_RUNTIME_DIR/lingyi-<uid>
IDLE = "LINGYI_DAEMON_IDLE"  # seconds without a call before the warm process exits
IDLE_DEFAULT_S = 600.0
# A Unix socket path must fit sockaddr_un: 104 bytes on macOS and the BSDs, 108 on Linux.
MAX_PATH = 100
# Interpreter flags under which a warm process is not what the caller asked for (a debug or
# verbose interpreter, -O, -I, -E, -X options, -W warnings): such a call runs in-process.
UNUSUAL_FLAGS = ("debug", "inspect", "interactive", "optimize", "verbose", "bytes_warning",
                 "dev_mode", "no_site", "ignore_environment", "isolated")  # fmt: skip
# Environment variables the interpreter reads at start-up (encodings, hash seed, paths).
START_ENV = ("PYTHON", "LANG", "LC_")


class Refused(Exception):
    """The socket folder is not safe to use (the reason says why); run in-process."""


def supported() -> bool:
    """A platform with fork and descriptor passing over Unix sockets (not Windows)."""
    return (
        hasattr(_socket.socket, "sendmsg") and hasattr(os, "fork") and hasattr(_socket, "AF_UNIX")
    )


def unusual() -> bool:
    """This interpreter runs with a flag a warm process would not honour."""
    flags = any(getattr(sys.flags, name, 0) for name in UNUSUAL_FLAGS)
    return flags or bool(sys._xoptions) or bool(sys.warnoptions)


def enabled() -> bool:
    """Use (and start) a warm process: supported here, not switched off, no unusual flag."""
    return os.environ.get(SWITCH, "1") != "0" and supported() and not unusual()


def folder() -> str:
    """``$LINGYI_WARM_DIR``, else ``lingyi-<uid>`` in ``$XDG_RUNTIME_DIR`` or the temp dir
    (``/tmp`` when that would make the socket path too long, as macOS's $TMPDIR can)."""
    if given := os.environ.get(FOLDER):
        return given
    name = f"lingyi-{os.getuid()}"
    base = os.environ.get("XDG_RUNTIME_DIR") or _tempdir()
    if len(os.fsencode(os.path.join(base, name))) > MAX_PATH - 20:
        base = "/tmp"
    return os.path.join(base, name)


def _tempdir() -> str:
    """The temp dir as :func:`tempfile.gettempdir` finds it, without importing tempfile."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        if (value := os.environ.get(var)) and os.path.isdir(value):
            return value
    return "/tmp"


def checked_folder(path: str, *, create: bool) -> str:
    """``path``, made (mode 0700) if asked; :class:`Refused` unless it is a folder (not a
    link) owned by this user with no group or other permission bits."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise Refused(f"{path}: cannot create the folder: {exc.strerror}") from exc
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"{path}: not a folder (a symbolic link or a file)")
    if st.st_uid != os.getuid():
        raise Refused(f"{path}: owned by uid {st.st_uid}, not by this user ({os.getuid()})")
    if st.st_mode & 0o077:
        raise Refused(f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets others in (needs 0700)")
    return path


def socket_path(*, create: bool = True) -> str:
    """The socket of the warm process for this kind of process, its folder checked."""
    where = checked_folder(folder(), create=create)
    path = os.path.join(where, f"v-{key()}.sock")
    if len(os.fsencode(path)) > MAX_PATH:
        raise Refused(f"{path}: longer than a Unix socket path may be ({MAX_PATH} bytes)")
    return path


def key() -> str:
    """A short hash of what makes a process started earlier differ from a fresh one."""
    parts = [sys.executable, sys.version, repr(sys.flags), *import_path(), *_package()]
    parts += [str(os.getgid()), repr(sorted(os.getgroups()))]  # the group of files it creates
    parts += [*_limits(), control_groups()]
    parts += sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(START_ENV))
    data = "\0".join(parts).encode("utf-8", "surrogateescape")
    # Two checksums, 64 bits: names, not secrets (the folder's owner and mode keep others out),
    # and hashlib would load OpenSSL.
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def control_groups(path: str = "/proc/self/cgroup") -> str:
    """The control groups this process is in (Linux; '' elsewhere): their memory, CPU and
    process limits apply to what a process in them starts, and a warm process started in
    one would run a service's calls (a ``serve`` under ``MemoryMax=``) outside it."""
    try:
        with open(path, "rb") as found:
            return found.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


def _limits() -> list[str]:
    """The resource limits (soft and hard): a warm process started under ``ulimit -f``
    would hand them to every call, and a child cannot raise a hard limit back."""
    import resource  # POSIX only, like the warm process

    names = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
    return [f"{n}={resource.getrlimit(getattr(resource, n))}" for n in names]


def import_path() -> list[str]:
    """``sys.path`` as this process resolves it ('' is the working directory)."""
    return [entry or os.getcwd() for entry in sys.path]


def _package() -> list[str]:
    """lingyi's folder and the newest mtime of its files (a checkout edited since)."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    return [root, str(newest_mtime(root))]


def newest_mtime(root: str) -> int:
    """The newest mtime (ns) of the files under ``root``, bytecode caches left out."""
    newest = 0
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                else:
                    newest = max(newest, entry.stat().st_mtime_ns)
    return newest
