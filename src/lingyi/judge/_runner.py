"""The judge's own event loop: async calls to the model, awaited by synchronous verifications.

The layer is synchronous and runs in worker threads (the MCP server's ``anyio.to_thread``
pool, or the main thread of the CLI and replay). The judge is async end to end
(``AsyncAnthropic``) on one event loop it owns, in one daemon thread: a verification submits
its call with :func:`asyncio.run_coroutine_threadsafe` and blocks its own thread on the result
until the deadline. Why this and not the alternatives:

* ``asyncio.run`` per call would build a loop, a client and a connection pool per call, and
  nothing would bound the calls in flight across threads.
* The server's event loop is not there for the CLI and replay, and a verification called on
  that loop's thread would deadlock waiting for a coroutine scheduled behind it.
* One loop keeps one client with one pooled connection set, and one ``asyncio.Semaphore``
  bounds the calls in flight across every thread.

Admission is bounded too, before anything blocks: at most ``max_in_flight`` calls run and
``max_waiting`` more wait for a slot; a verification beyond that gets :class:`Busy` at once
(and ``on_error``), so judge calls can tie up at most ``max_in_flight + max_waiting`` worker
threads and other verifications are never held up behind them. The deadline covers the wait
for a slot and the call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
GRACE_S = 1.0  # the loop's own deadline fires first; this only guards against a stuck loop


class Busy(Exception):
    """Every slot is taken and the waiting line is full."""


class JudgeLoop:
    """One event loop in one daemon thread, with a bounded number of calls in flight."""

    def __init__(
        self, make_client: Callable[[], Any], max_in_flight: int, max_waiting: int
    ) -> None:
        self._make_client = make_client
        self.max_in_flight, self.max_waiting = max_in_flight, max_waiting
        self._lock = threading.Lock()
        self._admitted = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._slots: asyncio.Semaphore | None = None

    def run(self, call: Callable[[Any], Awaitable[T]], timeout_s: float) -> T:
        """Run ``call(client)`` on the loop; block this thread until it returns or the
        deadline passes (``TimeoutError``). Raises :class:`Busy` when admission is full."""
        with self._lock:
            if self._admitted >= self.max_in_flight + self.max_waiting:
                raise Busy()
            self._admitted += 1
            loop = self._started()
        try:
            future = asyncio.run_coroutine_threadsafe(self._bounded(call, timeout_s), loop)
            try:
                return future.result(timeout_s + GRACE_S)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise TimeoutError() from None
        finally:
            with self._lock:
                self._admitted -= 1

    async def _bounded(self, call: Callable[[Any], Awaitable[T]], timeout_s: float) -> T:
        if self._slots is None:  # made on the loop, by the loop's only thread
            self._slots = asyncio.Semaphore(self.max_in_flight)
            self._client = self._make_client()
        async with asyncio.timeout(timeout_s):
            async with self._slots:
                return await call(self._client)

    def _started(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="lingyi-judge", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    def close(self) -> None:
        """Close the client and stop the loop (calls still running are cancelled)."""
        with self._lock:
            loop, thread, client = self._loop, self._thread, self._client
            self._loop = self._thread = self._client = self._slots = None
        if loop is None or thread is None:
            return
        if client is not None:
            closing = asyncio.run_coroutine_threadsafe(client.close(), loop)
            with contextlib.suppress(Exception):  # best effort: the process is going away
                closing.result(GRACE_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(GRACE_S)
        if not thread.is_alive():
            loop.close()
