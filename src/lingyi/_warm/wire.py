"""Frames on the warm process's socket: a 4-byte length, then a :mod:`marshal`-ed dict.

The call's descriptors (stdin, stdout, stderr) travel with the first frame as
``SCM_RIGHTS``; the child answers with ``{"pid": N}`` when it starts and ``{"exit": CODE}``
when the command is done. marshal, not JSON: it is built in (json would import ``re``, a
tenth of the client's budget) and carries any ``str`` (undecodable file names in the
environment included). Only this user's processes can reach the socket (its folder is 0700),
and a malformed frame is a ValueError.
"""

from __future__ import annotations

import _socket  # socket.py's wrappers (enum, selectors) are not needed for this
import marshal
import os
import struct

TYPE_CHECKING = False  # not typing's (see lingyi/__init__.py)
if TYPE_CHECKING:
    from typing import Any

HEAD = struct.Struct("!I")
INT = struct.Struct("i")  # a descriptor in SCM_RIGHTS data
MAX_FRAME = 64 * 1024 * 1024  # an environment is kilobytes; anything this large is not ours
MAX_FDS = 3


def send(sock: _socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """One frame, with ``fds`` passed alongside its first bytes."""
    body = marshal.dumps(message)
    head = HEAD.pack(len(body))
    if fds:
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
        sent = sock.sendmsg([head + body], rights)
        sock.sendall((head + body)[sent:])
    else:
        sock.sendall(head + body)


def receive(sock: _socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """The next frame and the descriptors that came with it; ``None`` at the end of the
    stream. A malformed frame raises ValueError (its descriptors are closed first)."""
    head, fds = _first(sock, max_fds)
    try:
        if not head:
            return None, fds
        head += _exactly(sock, HEAD.size - len(head))
        (size,) = HEAD.unpack(head)
        if size > MAX_FRAME:
            raise ValueError(f"frame of {size} bytes")
        message = marshal.loads(_exactly(sock, size))
        if not isinstance(message, dict):
            raise ValueError("a frame must hold a dict")
        return message, fds
    except (ValueError, EOFError, TypeError, OSError) as exc:
        close(fds)
        raise ValueError(f"malformed frame: {exc}") from exc


def _first(sock: _socket.socket, max_fds: int) -> tuple[bytes, list[int]]:
    if not max_fds:
        return sock.recv(HEAD.size), []
    size = _socket.CMSG_SPACE(max_fds * INT.size)
    head, ancillary, _flags, _addr = sock.recvmsg(HEAD.size, size)
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            count = len(data) // INT.size  # a truncated last descriptor is not one
            fds += struct.unpack(f"{count}i", data[: count * INT.size])
    return head, fds


def _exactly(sock: _socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ValueError("the stream ended inside a frame")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def close(fds: list[int]) -> None:
    for fd in fds:
        try:  # noqa: SIM105  (contextlib would import collections and functools)
            os.close(fd)
        except OSError:
            pass
