"""The warm fork server of ``lingyi verify`` and ``lingyi serve`` (POSIX only; issue 10).

A fresh ``lingyi verify`` spends most of its half second importing pydantic, the models and
the checks and loading the policies, before it does the few milliseconds of work. A process
that has done all that once (:mod:`.server`, started in the background by the first call)
forks a child per call; the child takes over the caller's stdin, stdout and stderr (passed
over a Unix socket), its working directory, environment and arguments, runs the ordinary
command line, and sends back the exit code (:mod:`.client`). Output, exit codes and log
records are those of a fresh process; policy sets are reused only while every file they were
read from is unchanged (:mod:`.policies`). A ``serve`` is the same: an MCP client that starts
``lingyi serve`` gets a forked child that runs the ordinary server on the client's stdio;
the warm process imports the MCP server stack only once it has seen a serve.

This package imports only the standard library until a child runs the command: the client
must cost no more than the interpreter's own start.
"""

from __future__ import annotations

# Set by a verify or serve whose config says ``[cli] warm = false`` (:func:`decline`): the
# in-process call starts no warm process, and a warm process's child tells its parent to exit.
declined = False

TYPE_CHECKING = False  # not typing's (see lingyi/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

# Run by :func:`exit_now` before the process ends: in a warm process's child, the one that
# tells the caller the exit code (a fresh process's exit code needs no telling).
exiting: list[Callable[[int], None]] = []
# Run by :func:`decline`: in a warm process's child, the one that tells the parent to exit.
declining: list[Callable[[], None]] = []


def decline() -> None:
    """This call's config says ``[cli] warm = false``: no warm process for it or after it."""
    global declined
    declined = True
    for hook in declining:
        hook()


def exit_now(code: int) -> NoReturn:
    """End the process at once with ``code`` (``os._exit``: no atexit handlers, no threads
    waited for), the caller told of it first when the call came through a warm process."""
    import os

    for hook in exiting:
        hook(code)
    os._exit(code)
