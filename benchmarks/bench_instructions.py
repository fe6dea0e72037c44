"""Instructions per guarded call: the guard's own work, counted so that load cannot blur it.

Runs itself under ``valgrind --tool=callgrind`` and counts the instructions of ``--calls``
calls of each stage, in-process (no transport), the way the server's worker thread runs them
(the stages of ``benchmarks/profile_hot_path.py``, over a temporary deployment of the
shipped policies and knowledge base):

- ``guarded``: ``GuardApp.run_tool`` of ``search_knowledge`` (lingyi.pipeline: verify and
  log → approvals → search → record evidence → reply);
- ``bare``: the same searches through the executor alone (what a server without the guard
  does); ``guarded − bare`` is the guard's own work, the budget of issue 23 (≤ 2.0 M);
- ``verify``: ``ConstraintLayer.verify`` alone; ``record``: building the log record and
  ``VerificationLog.append``; ``ledger``: ``Ledger.record`` of the search's hits (one
  session past ``max_entries``, so forgetting is in it); ``reply``: the verdict and the
  result made into a ``CallToolResult``.

Only the calls are counted: each stage's loop runs inside a ctypes call, and callgrind
collects inside ``ffi_call`` only (``--toggle-collect``) and dumps each stage's count on
leaving it (``--dump-after``). Warm-up calls (caches, the KB index) run before, uncounted,
and the warmed heap is frozen (``gc.freeze``), so that the young collections the calls cause
are counted where they happen, but no full collection of the filled ledger lands in one stage.
No assertions.

    .venv/bin/python benchmarks/bench_instructions.py [--calls 50]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES = ("guarded", "bare", "verify", "record", "ledger", "reply")
_TOTALS = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def counted(step: Callable[[int], Any], calls: int) -> None:
    """``calls`` calls of ``step`` inside one ``ffi_call``: what callgrind counts."""

    def loop() -> None:
        for i in range(calls):
            step(i)

    ctypes.CFUNCTYPE(None)(loop)()


def fill(app: Any) -> None:
    """The sessions the stages record in, filled to ``max_entries``: a long session, where each
    call makes the ledger forget its oldest entry (the steady state of a busy server)."""
    from lingyi.server.app import Run
    from lingyi.server.executors import search

    owner = app.policies.tool_owner("search_knowledge")
    _, evidence = search(Run(app, owner, {"query": "气功"}))
    for _ in range(app.ledger.limits.max_entries or 0):
        for session in ("profile", "ledger"):
            app.ledger.record(session, owner.id, "search_knowledge", {"query": "q"}, evidence)


def inner(calls: int) -> None:
    """Under callgrind: warm up, then one counted loop per stage, in the order of STAGES."""
    sys.path.insert(0, str(Path(__file__).parent))
    from profile_hot_path import deployed_app, stages

    with deployed_app("lingyi-instructions-") as app:
        steps = stages(app)
        steps["guarded"], steps["bare"] = steps["run_tool"], steps["search"]
        fill(app)
        for i in range(50):  # warm-up: caches, the KB index
            for name in STAGES:
                steps[name](i)
        gc.collect()
        gc.freeze()  # a full collection of the filled heap would land in one stage's count
        for name in STAGES:
            counted(steps[name], calls)


def outer(calls: int) -> dict[str, float]:
    """Run :func:`inner` under callgrind; instructions per call of each stage."""
    with tempfile.TemporaryDirectory(prefix="lingyi-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=ffi_call",
            "--dump-after=ffi_call",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--inner",
            "--calls",
            str(calls),
        ]
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        totals = [int(m.group(1)) for p in dumps if (m := _TOTALS.search(p.read_bytes()))]
    counts = totals[-len(STAGES) :]  # an earlier ffi_call (an import) dumps first
    return {name: n / calls for name, n in zip(STAGES, counts, strict=True)}


def report(per_call: dict[str, float]) -> str:
    own = per_call["guarded"] - per_call["bare"]
    rows = [f"{'stage':<22} {'M instructions/call':>20}"]
    rows += [f"{name:<22} {n / 1e6:>20.3f}" for name, n in per_call.items()]
    rows.append(f"{'guarded − bare':<22} {own / 1e6:>20.3f}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.calls)
        return
    os.environ.setdefault("PYTHONHASHSEED", "0")  # the same dict layouts run to run
    sys.stdout.write(report(outer(args.calls)) + "\n")


if __name__ == "__main__":
    main()
