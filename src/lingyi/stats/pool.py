"""Running a pass over the log: in this process, or over chunks of a big log in worker processes.

A pass is the windowed one (:class:`~lingyi.stats.aggregate.WindowsPass`: the period and
the one before in one read) or the one that builds the rollup
(:class:`~lingyi.stats.builder.RollupBuilder`). A log over :data:`PARALLEL_MIN_BYTES` is
cut into byte ranges of about :data:`CHUNK_BYTES` at line starts, counted by worker
processes (one per CPU, at most :data:`MAX_WORKERS`) that take the next range as they finish
one, the last ranges first, so that the ranges where records are parsed (the window, at the
end of the log) are shared out instead of falling to one worker, and the cheap ones fill in
at the end; the chunks are merged in order, the chain link
between chunks included, so the result is the one a single pass gives. Progress (bytes
done, bytes total) is reported to the caller's thread: workers send theirs through a queue
that this process drains while it waits.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Any

from lingyi._logging import get_logger
from lingyi.log.chain import GENESIS
from lingyi.log.keys import KeyRing
from lingyi.log.reader import open_log, raw_lines
from lingyi.stats.aggregate import LogPass, WindowsPass
from lingyi.stats.builder import RollupBuilder
from lingyi.stats.days import ZoneDays
from lingyi.stats.scanloop import feed_range
from lingyi.stats.window import Window

log = get_logger(__name__)

Progress = Callable[[int, int], None]  # (bytes done, bytes total)

PARALLEL_MIN_BYTES = 256 << 20  # below this, starting workers costs more than it saves
CHUNK_BYTES = 32 << 20
MAX_CHUNKS = 256  # a range each; more only adds merges
MAX_WORKERS = 8
PROGRESS_BYTES = 4 << 20  # how often a pass reports how far it got
_POLL_S = 0.2


@dataclass(frozen=True)
class Task:
    """One byte range of the log to count; ``end`` None reads to the end (appends included).

    With ``zones`` (name and zone of each), the range is counted for the rollup, into the
    local days of each zone; otherwise for each of ``windows`` and ``member``.
    """

    index: int
    path: Path
    start: int
    end: int | None
    windows: tuple[Window, ...]
    member: str | None
    keys: KeyRing | None = None  # the log's keys: MACs checked as log verify does
    zones: tuple[tuple[str, tzinfo], ...] = ()

    def new_pass(self) -> LogPass | WindowsPass:
        prev = GENESIS if self.start == 0 else None
        if self.zones:
            return RollupBuilder([ZoneDays(n, z) for n, z in self.zones], prev, self.keys)
        return WindowsPass(self.windows, self.member, prev, self.keys)


def scan(task: Task, report: Callable[[int, int], None] | None = None) -> tuple[Any, int]:
    """Count one byte range; returns its pass and how many physical lines it had.

    ``report(index, bytes done in this range)`` is called every :data:`PROGRESS_BYTES`.
    """
    agg = task.new_pass()
    if isinstance(agg, WindowsPass):
        return agg, _scan_windows(agg, task, report)
    lineno = reported = done = 0
    for lineno, _, raw in raw_lines(task.path, task.start, task.end):
        done += len(raw)
        if raw[0] == 0x7B or raw.strip():  # "{": a record's line, not copied to be stripped
            agg.feed_raw(lineno, raw)
        if report is not None and done - reported >= PROGRESS_BYTES:
            report(task.index, done)
            reported = done
    return agg, lineno


def _scan_windows(found: WindowsPass, task: Task, report: Callable[[int, int], None] | None) -> int:
    """A windowed pass's range through its hot loop (:mod:`lingyi.stats.scanloop`)."""
    handle = open_log(task.path)
    if handle is None:
        return 0
    tell = None if report is None else lambda done: report(task.index, done)
    with handle:
        handle.seek(task.start)
        return feed_range(found, handle, task.start, task.end, tell, PROGRESS_BYTES)


def run_windows(
    path: Path,
    windows: Sequence[Window],
    member: str | None,
    chunks: int | None = None,
    progress: Progress | None = None,
    keys: KeyRing | None = None,
) -> WindowsPass:
    """One pass over the whole log at ``path`` for each of ``windows`` (a missing log counts
    as empty); ``chunks`` forces the number of byte ranges (1: in this process)."""
    size = _size(path)
    tasks = [
        Task(i, path, a, b, tuple(windows), member, keys)
        for i, (a, b) in enumerate(_split(path, size, chunks or _auto_chunks(size)))
    ]
    found: WindowsPass = _run(tasks, size, progress)[0]
    found.settle()
    return found


def run_rollup_pass(
    path: Path,
    zones: list[ZoneDays],
    end: int,
    workers: int | None = None,
    progress: Progress | None = None,
    keys: KeyRing | None = None,
) -> tuple[RollupBuilder, int]:
    """The rollup builder of the log's first ``end`` bytes (a line boundary), and its lines."""
    named = tuple((z.name, z.zone) for z in zones)
    ranges = _split(path, end, workers or _auto_chunks(end))
    tasks = [
        Task(i, path, a, b if b is not None else end, (), None, keys, named)
        for i, (a, b) in enumerate(ranges)
    ]
    builder, lines = _run(tasks, end, progress)
    return builder, lines


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _run(tasks: list[Task], size: int, progress: Progress | None) -> tuple[Any, int]:
    meter = _Meter(size, len(tasks), progress)
    if len(tasks) == 1:
        result = scan(tasks[0], meter.update)
    else:
        result = _merge_parts(_run_chunks(tasks, meter))
    meter.finish()
    return result


class _Meter:
    """Adds up the bytes done per chunk and tells the caller (never more than the total)."""

    def __init__(self, total: int, chunks: int, progress: Progress | None) -> None:
        self.total, self.progress = total, progress
        self.done = [0] * chunks

    def update(self, index: int, done: int) -> None:
        self.done[index] = done
        if self.progress is not None:
            self.progress(min(sum(self.done), self.total), self.total)

    def finish(self) -> None:
        if self.progress is not None:
            self.progress(self.total, self.total)


def _run_chunks(tasks: list[Task], meter: _Meter) -> list[tuple[Any, int]]:
    try:
        return run_workers(tasks, meter.update)
    except (OSError, BrokenProcessPool) as exc:  # e.g. a sandbox that allows no processes
        log.warning("stats.workers_failed", error=str(exc))
        return [scan(t, meter.update) for t in tasks]


# Set in each worker process by the pool's initializer: where to send progress.
_progress_queue: Any = None


def _init_worker(channel: Any) -> None:
    global _progress_queue
    _progress_queue = channel


def _scan_in_worker(task: Task) -> tuple[Any, int]:
    channel = _progress_queue
    return scan(task, None if channel is None else lambda i, done: channel.put((i, done)))


def run_workers(tasks: list[Task], update: Callable[[int, int], None]) -> list[tuple[Any, int]]:
    """Count the tasks in worker processes (one per CPU), each task as a worker comes free,
    the last first; results in task order."""
    context = multiprocessing.get_context(start_method())
    channel = context.Queue()
    try:
        with ProcessPoolExecutor(
            max_workers=min(len(tasks), _cpus(), MAX_WORKERS),
            mp_context=context,
            initializer=_init_worker,
            initargs=(channel,),
        ) as pool:
            # The last ranges first: the periods asked for are usually the latest, where
            # lines are parsed (a range there costs about four outside them), so the cheap
            # ranges fill in at the end instead of one worker finishing a costly one alone.
            futures = [pool.submit(_scan_in_worker, t) for t in reversed(tasks)]
            _wait_reporting(futures, channel, update)
            return [f.result() for f in reversed(futures)]
    finally:
        channel.close()
        channel.join_thread()


def start_method() -> str:
    """How worker processes start: ``fork`` on Linux when this process runs one thread (the
    CLI), so a worker costs a fork instead of a fresh interpreter importing ``lingyi.stats``
    (about 0.6 s of CPU each); ``spawn`` otherwise. A process with threads (the MCP server,
    its thread pool) must not fork: a lock another thread holds would stay held in the child.
    macOS and Windows keep ``spawn`` (fork is unsafe or missing there)."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "spawn"


def _wait_reporting(futures: list[Future[Any]], channel: Any, update: Callable[..., None]) -> None:
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
        _drain(channel, update)
        if any(f.exception() is not None for f in done):
            return  # f.result() raises it in the caller


def _drain(channel: Any, update: Callable[[int, int], None]) -> None:
    while True:
        try:
            index, done = channel.get_nowait()
        except queue.Empty:
            return
        update(index, done)


def _cpus() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpus or 1


def _auto_chunks(size: int) -> int:
    """One range below :data:`PARALLEL_MIN_BYTES` or on one CPU, else ranges of about
    :data:`CHUNK_BYTES` (a few per worker, so that the costly ones are shared out)."""
    if size < PARALLEL_MIN_BYTES or _cpus() < 2:
        return 1
    return max(2, min(MAX_CHUNKS, size // CHUNK_BYTES))


def _split(path: Path, size: int, parts: int) -> list[tuple[int, int | None]]:
    """Byte ranges that start at line starts; the last one is open-ended."""
    starts = [0]
    if parts > 1:
        with path.open("rb") as handle:
            for i in range(1, parts):
                handle.seek(size * i // parts)
                handle.readline()  # skip to the start of the next line
                if starts[-1] < handle.tell() < size:
                    starts.append(handle.tell())
    ends: list[int | None] = [*starts[1:], None]
    return list(zip(starts, ends, strict=True))


def _merge_parts(parts: list[tuple[Any, int]]) -> tuple[Any, int]:
    """The chunks merged in order, and the lines they had together."""
    total, offset = parts[0][0], parts[0][1]
    for agg, lines in parts[1:]:
        total.merge(agg, offset)
        offset += lines
    return total, offset
