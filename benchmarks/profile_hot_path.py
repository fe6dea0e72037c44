"""Where a guarded tool call spends its time, in-process (no transport): per stage and cProfile.

Builds the server's runtime (:class:`lingyi.server.GuardApp`) over a temporary deployment of
the shipped policies and knowledge base, and runs ``search_knowledge`` through
``GuardApp.run_tool`` (verify → log → search → record evidence → the reply) the way the
server's worker thread does. Then times each stage on its own, interleaved call by call:

- ``verify``: ``ConstraintLayer.verify`` alone;
- ``record``: building the log record and ``VerificationLog.append``;
- ``search``: the knowledge-base call alone (what a bare server does);
- ``ledger``: recording the search's hits as the session's evidence (``Ledger.record``, one
  session growing past ``max_entries``, so forgetting is in it);
- ``reply``: the verdict and the tool result made into a ``CallToolResult``;
- ``run_tool``: all of it, as the worker thread runs it.

Thread CPU time, median, mean and p99 in µs. ``--profile`` prints the top of a cProfile of
``run_tool`` (cumulative), to find what to cut. No assertions.

    .venv/bin/python benchmarks/profile_hot_path.py [--calls 2000] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lingyi.config import load_config
from lingyi.demo import make_repo, write_config
from lingyi.log import verification_record
from lingyi.models import Assertion, AssertionType, ToolCall
from lingyi.server.app import Caller, GuardApp, Run
from lingyi.server.executors import search
from lingyi.verdict import Guarded, success, verdict_of

QUERIES = ("气功", "庄子逍遥游", "科学方法论", "meditation", "太极拳", "儒家 仁义")


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def stages(app: GuardApp) -> dict[str, Callable[[int], Any]]:
    """One callable per stage; each takes the call number (to rotate the queries)."""
    caller = Caller("profile")
    owner = app.policies.tool_owner("search_knowledge")
    assert owner is not None
    layer, log = app.guard.layer, app.guard.log

    def assertion(i: int) -> Assertion:
        call = ToolCall(name="search_knowledge", arguments={"query": QUERIES[i % len(QUERIES)]})
        return Assertion(member=owner.id, type=AssertionType.ACTION, tool_call=call, session="p")

    def record(i: int) -> None:
        a = assertion(i)
        log.append(verification_record(a, verified, "server", owner.id))

    def ledger(i: int) -> None:
        _, evidence = found
        app.ledger.record("ledger", owner.id, "search_knowledge", {"query": "q"}, evidence)

    def reply(i: int) -> None:
        hits, _ = found
        success(Guarded(verdict=verdict_of(verified, owner.id, "original"), result=hits))

    verified = layer.verify(assertion(0), app.ledger)
    found = search(Run(app, owner, {"query": QUERIES[0]}))
    return {
        "verify": lambda i: layer.verify(assertion(i), app.ledger),
        "record": record,
        "search": lambda i: search(Run(app, owner, {"query": QUERIES[i % len(QUERIES)]})),
        "ledger": ledger,
        "reply": reply,
        "run_tool": lambda i: app.run_tool(
            caller, "search_knowledge", {"query": QUERIES[i % len(QUERIES)]}, search
        ),
    }


def timed(steps: dict[str, Callable[[int], Any]], calls: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(calls):
        for name, step in steps.items():  # interleaved: drift touches every stage alike
            started = time.thread_time()
            step(i)
            times[name].append((time.thread_time() - started) * 1e6)
    return times


def report(times: dict[str, list[float]]) -> str:
    rows = [f"{'stage':<10} {'median µs':>10} {'mean µs':>9} {'p99 µs':>9}"]
    rows += [
        f"{n:<10} {statistics.median(v):>10.1f} {statistics.mean(v):>9.1f} {p99(v):>9.1f}"
        for n, v in times.items()
    ]
    return "\n".join(rows)


def profile(step: Callable[[int], Any], calls: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for i in range(calls):
        step(i)
    prof.disable()
    out = pstats.Stats(prof)
    out.sort_stats("cumulative").print_stats(45)
    return ""


@contextlib.contextmanager
def deployed_app(prefix: str) -> Iterator[GuardApp]:
    """A GuardApp over the demo's deployment in a temporary folder (a real git repo, KB, log)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp)
        make_repo(root)
        app = GuardApp(load_config(str(write_config(root, root / "log.jsonl"))))
        try:
            yield app
        finally:
            app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile", action="store_true", help="cProfile run_tool")
    args = parser.parse_args()
    with deployed_app("lingyi-profile-") as app:
        steps = stages(app)
        timed(steps, 100)  # warm-up: caches, the KB index
        if args.profile:
            profile(steps["run_tool"], args.calls)
        else:
            sys.stdout.write(report(timed(steps, args.calls)) + "\n")


if __name__ == "__main__":
    main()
