"""structlog to stderr, always: stdout belongs to results and to the MCP protocol.

structlog is imported on the first event logged, not at start: its package imports
``structlog.stdlib`` and ``_native``, which import asyncio (about 50 ms together, a tenth of
``lingyi verify``, which usually logs nothing). lingyi's modules therefore take their logger
from :func:`get_logger` here, never from structlog directly (``tests/test_logging.py``), and
:func:`configure` applies its settings at once when structlog is already loaded, else when the
first event loads it: either way before anything is written, so nothing reaches stdout.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

# The level configure() was last asked for while structlog was not loaded yet.
_pending: list[int] = []
# Methods of structlog's filtering logger that log at a fixed level.
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40,
           "critical": 50, "fatal": 50}  # fmt: skip


def _drop(*_args: Any, **_kwargs: Any) -> None:
    """An event below the configured level: what structlog's filtering logger does with it."""


class _Stderr:
    """Look up sys.stderr at each write, so a replaced stderr (tests, daemons) is honoured."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(*, verbose: bool = False) -> None:
    """Log at WARNING (DEBUG with ``verbose``) to stderr: now if structlog is loaded, else
    with the first event."""
    level = logging.DEBUG if verbose else logging.WARNING
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    if "structlog" in sys.modules:
        _apply(level)
    else:
        _pending[:] = [level]


def _apply(level: int) -> None:
    import structlog

    _pending.clear()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def _structlog() -> Any:
    """structlog, configured as :func:`configure` last asked; when nothing configured it (lingyi
    used as a library), WARNING to stderr, since structlog's own default writes to stdout."""
    import structlog

    if _pending:
        _apply(_pending[0])
    elif not structlog.is_configured():  # lingyi used as a library: stderr, never stdout
        _apply(logging.WARNING)
    return structlog


class _LazyLogger:
    """Stands in for ``structlog.get_logger(*args)`` until its first use."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        self._args = args
        self._logger: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._logger is None:
            if _pending and _LEVELS.get(name, 100) < _pending[0]:
                return _drop  # filtered out anyway: not worth loading structlog for
            self._logger = _structlog().get_logger(*self._args)
        return getattr(self._logger, name)


def get_logger(*args: Any) -> Any:
    """A module's logger (``structlog.get_logger(*args)``), structlog loaded on first use."""
    return _LazyLogger(args)
