"""What shadow mode and telemetry cost per verification, against the same guard without them.

    python benchmarks/bench_shadow_telemetry.py [--n 1500] [--json]

Three guards over the shipped policies, each with its own log and ledger, verify and log the
example transcripts' assertions (``Guard.check``: verify → log record → span):

* ``baseline``: the shipped policies;
* ``shadow``: the same plus a shared file in shadow (``pre.content`` with a short limit, which
  fails on about a third of the assertions), so the would-have decision is worked out;
* ``telemetry``: the shipped policies with telemetry on: a span per call through the SDK's
  batch processor, to an exporter that accepts and drops every batch (the collector's cost is
  in another thread and process in a real deployment, never on the call's path).

Calls are interleaved (each round times one call of each guard, in a rotating order), so
machine load falls on all three alike. Reports median and p99 per guard and each ratio to the
baseline.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from lingyi.config import defaults_dir
from lingyi.council import MemoryCouncil
from lingyi.guard import Guard
from lingyi.layer import ConstraintLayer
from lingyi.log import VerificationLog
from lingyi.models import Assertion
from lingyi.policy import load_policies
from lingyi.replay import Replayer, read_events
from lingyi.telemetry import Telemetry

ROOT = Path(__file__).resolve().parent.parent
ROLLOUT = (
    'mode = "shadow"\n[[checks]]\ncheck = "pre.content"\nstage = "pre_check"\n'
    'on_fail = "reject"\nparams = { max_length = 40 }\n'
)


class Dropping(SpanExporter):
    """Accepts every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def events() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted((ROOT / "examples").glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        found += [e for _, e in read_events(lines) if isinstance(e, dict)]
    return found


def guard(policies: Path, log: Path, telemetry: Telemetry | None = None) -> Guard:
    layer = ConstraintLayer(load_policies(policies), MemoryCouncil(), language="zh")
    return Guard(layer, VerificationLog(log), source="bench", telemetry=telemetry)


def measure(n: int, work: Path) -> dict[str, Any]:
    shipped = defaults_dir() / "validators"
    shadowed = work / "validators"
    shutil.copytree(shipped, shadowed)
    (shadowed / "_rollout.toml").write_text(ROLLOUT, encoding="utf-8")
    guards = {
        "baseline": guard(shipped, work / "baseline.jsonl"),
        "shadow": guard(shadowed, work / "shadow.jsonl"),
        "telemetry": guard(shipped, work / "telemetry.jsonl", Telemetry(Dropping(), "bench")),
    }
    given = events()
    facts = [json.dumps(e) for e in given if e["event"] in ("tool_result", "council_message")]
    replayers = {name: Replayer(g) for name, g in guards.items()}
    for replayer in replayers.values():
        list(replayer.run(facts))  # the evidence and council messages the assertions cite
    assertions = [Assertion.model_validate(e) for e in given if e["event"] == "assertion"]
    times: dict[str, list[float]] = {name: [] for name in guards}
    names = list(guards)
    for i, assertion in zip(range(n), itertools.cycle(assertions), strict=False):
        order = names[i % 3 :] + names[: i % 3]
        for name in order:
            copy = assertion.model_copy(deep=True)
            started = time.perf_counter()
            guards[name].check(copy, replayers[name].ledger)
            times[name].append((time.perf_counter() - started) * 1000)
    for g in guards.values():
        g.close()
    lines = (work / "shadow.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    changed = sum(r["shadow"]["decision"] != r["decision"] for r in records if "shadow" in r)
    return summary(times) | {"calls per guard": n, "shadow decision differs": changed}


def summary(times: dict[str, list[float]]) -> dict[str, Any]:
    base_median = statistics.median(times["baseline"])
    base_p99 = percentile(times["baseline"], 0.99)
    out: dict[str, Any] = {}
    for name, values in times.items():
        median, p99 = statistics.median(values), percentile(values, 0.99)
        out[name] = {
            "median ms": round(median, 4),
            "p99 ms": round(p99, 4),
            "ratio median": round(median / base_median, 3),
            "ratio p99": round(p99 / base_p99, 3),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=1500, help="timed calls per guard")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.n, Path(tmp))
    sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
