"""Verification latency against a large session ledger (the evidence checks' indexes).

    python benchmarks/bench_ledger.py [--sizes 100,10000,100000] [--n 2000] [--json]

For each size, one session is filled with that many tool results (knowledge-base hits,
analyses, data-set shapes, audits, traces, commits; one piece of evidence each, all
distinct), then a mix of assertions is verified against it with the shipped policies:
facts citing evidence, facts resting on the session's evidence by subject, ids and URLs in
the text (recorded and fabricated), contradictions, questions. Every assertion text is
distinct (a week number in front, and the evidence it names chosen at random), so the
canonical-text and entity caches do not make it cheap. Reported: p50/p99 of the four evidence checks alone (``run_check``) and of the
whole ``ConstraintLayer.verify`` (all checks of the member; the council record holds a few
messages: its index is measured elsewhere), each in CPU time of the thread and in wall time
(on a shared machine the wall clock also counts other processes' turns on the core).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lingyi.checks._registry import CheckContext, Services
from lingyi.config import defaults_dir
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer, run_check
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence
from lingyi.policy import PolicySet, load_policies

ROOT = Path(__file__).resolve().parent.parent
SESSION = "bench"
TOPICS = ["气功", "八段锦", "太极拳", "论语", "孟子", "道德经", "心经", "传习录", "庄子", "五禽戏"]
EVIDENCE_CHECKS = (
    "evidence.cited_ids_exist",
    "evidence.id_patterns",
    "evidence.urls_recorded",
    "evidence.subject_supported",
)


def _hex(i: int, digits: int) -> str:
    """A trace id or commit SHA as tools return them: random-looking hex, unique per i."""
    return hashlib.sha1(str(i).encode()).hexdigest()[:digits].rjust(digits, "0")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _result(i: int) -> tuple[str, str, dict[str, Any], Evidence]:
    """The i-th tool result: a different tool, topic, id and numbers each time."""
    topic = TOPICS[i % len(TOPICS)]
    kind = i % 6
    if kind == 0:
        ev = Evidence(
            id=f"kb:t-{i}",
            title=f"{topic}第{i % 97}讲",
            snippet=f"{topic}源流与要义，共{i % 40 + 2}章。",
            url=f"https://kb.example.net/t/{i}",
        )
        return "lingzhi", "search_knowledge", {"query": topic}, ev
    if kind == 1:
        snippet = (
            f"n={i % 900 + 100} per variant; B accuracy 0.{i % 900 + 100}, A 0.{i % 800 + 100}"
        )
        ev = Evidence(id=f"an-{i}", title="A/B accuracy", snippet=snippet)
        return "lingresearch", "analyze_data", {"source": "experiment_logs"}, ev
    if kind == 2:
        ev = Evidence(id=f"ds-{i}", title="dataset_v3_labels", snippet=f"{i} rows; 7 classes")
        return "lingresearch", "access_data_source", {"source": "dataset_v3_labels"}, ev
    if kind == 3:
        ev = Evidence(id=f"audit-v{i}.0", title=f"v{i}.0 audit", snippet=f"{i % 5} low findings")
        return "lingflow", "generate_audit_report", {"version": f"v{i}.0"}, ev
    if kind == 4:
        ev = Evidence(id=_hex(i, 32), title=f"checkout p99 {i % 900}ms", snippet="pool exhausted")
        return "lingflow", "query_traces", {"service": "checkout"}, ev
    ev = Evidence(id=_hex(i, 40), title=f"docs: notes {i}", snippet="1 file changed")
    return "lingflow", "git_commit", {"repo_path": "var/repos/x", "message": "docs"}, ev


def build_ledger(size: int) -> Ledger:
    ledger = Ledger()
    for i in range(size):
        member, tool, arguments, evidence = _result(i)
        ledger.record(SESSION, member, tool, arguments, [evidence])
    return ledger


def assertions(size: int, n: int, seed: int = 7) -> list[Assertion]:
    """A mix of n distinct assertions about evidence in a ledger of ``size`` entries."""
    rng = random.Random(seed)
    makers: list[Callable[[int], tuple[str, str, list[str]]]] = [
        lambda i: ("lingzhi", f"《{TOPICS[i % 10]}第{i % 97}讲》共{i % 40 + 2}章（kb:t-{i}）", []),
        lambda i: ("lingzhi", f"知识库里有一篇讲{TOPICS[i % 10]}的文章，共{i % 40 + 2}章", []),
        lambda i: ("lingresearch", f"B accuracy 0.{i % 900 + 100} in an-{i}", []),
        lambda i: ("lingresearch", f"dataset_v3_labels has {i} rows", [f"ds-{i}"]),
        lambda i: ("lingflow", f"checkout p99 {i % 900}ms: trace {_hex(i, 32)}", []),
        lambda i: ("lingflow", f"checkout p99 {i % 900}ms: trace {_hex(-i, 32)}", []),
        lambda i: ("lingzhi", f"出处 https://kb.example.net/t/{i}/", []),
        lambda i: ("lingflow", f"v{i}.0 审计没有发现任何问题", []),
        lambda i: ("lingzhi", f"知识库里有没有讲{TOPICS[i % 10]}的文章？", []),
    ]
    out = []
    for k in range(n):
        make = makers[k % len(makers)]
        # the index of an entry of the maker's kind, chosen at random in the whole ledger
        kind = [0, 0, 1, 2, 4, 4, 0, 3, 0][k % len(makers)]
        i = rng.randrange(max(1, size // 6)) * 6 + kind
        member, content, cited = make(i)
        content = f"第{k}周：{content}"  # every text new, as in a real session (caches miss)
        out.append(
            Assertion(
                member=member, type="fact", content=content, session=SESSION, evidence_ids=cited
            )
        )
    return out


def _layer(policies: PolicySet) -> ConstraintLayer:
    council = MemoryCouncil(
        [
            CouncilMessage.model_validate(
                {"id": "m-1", "from": "lingflow", "content": "v0.16 审计已完成"}
            )
        ]
    )
    services = Services(data_sources=["experiment_logs", "dataset_v3_labels"])
    return ConstraintLayer(policies, council, services=services, language="en")


Timing = tuple[list[float], list[float]]  # (wall ms, cpu ms) per assertion


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one call. On a shared machine the wall clock also
    counts the time other processes held the core; the thread's CPU time does not."""
    wall, cpu = time.perf_counter(), time.thread_time()
    run()
    return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000


def time_checks(layer: ConstraintLayer, ledger: Ledger, items: list[Assertion]) -> Timing:
    """Milliseconds of the four evidence checks, per assertion."""
    policies = layer.policies
    walls, cpus = [], []
    for assertion in items:
        member = policies.members[assertion.member]
        entries = [e for e in member.checks if e.check in EVIDENCE_CHECKS]
        ctx = CheckContext(assertion, member, policies, ledger, layer.council, layer.services, "en")
        wall, cpu = _timed(lambda: [run_check(ctx, e) for e in entries])  # noqa: B023
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus


def time_verify(layer: ConstraintLayer, ledger: Ledger, items: list[Assertion]) -> Timing:
    walls, cpus = [], []
    for assertion in items:
        wall, cpu = _timed(lambda: layer.verify(assertion, ledger))  # noqa: B023
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus


def measure(size: int, n: int, policies: PolicySet) -> dict[str, Any]:
    started = time.perf_counter()
    ledger = build_ledger(size)
    build_s = time.perf_counter() - started
    layer = _layer(policies)
    time_verify(layer, ledger, assertions(size, 50, seed=1))  # warm the lexicons and regexes
    checks = time_checks(layer, ledger, assertions(size, n, seed=2))
    whole = time_verify(layer, ledger, assertions(size, n, seed=3))
    row: dict[str, Any] = {"entries": size, "assertions": n, "build_s": round(build_s, 1)}
    for name, (walls, cpus) in (("evidence_checks", checks), ("verify", whole)):
        for clock, values in (("wall", walls), ("cpu", cpus)):
            row[f"{name}_{clock}"] = {
                "p50_ms": round(statistics.median(values), 3),
                "p99_ms": round(percentile(values, 0.99), 3),
                "max_ms": round(max(values), 3),
            }
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    policies = load_policies(defaults_dir() / "validators")
    rows = [measure(int(s), args.n, policies) for s in args.sizes.split(",")]
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    sys.stdout.write(f"{'entries':>8} {'build s':>8}  {'':<16} {'p50 ms':>8} {'p99 ms':>8}\n")
    for r in rows:
        for key in ("evidence_checks_cpu", "evidence_checks_wall", "verify_cpu", "verify_wall"):
            f = r[key]
            sys.stdout.write(
                f"{r['entries']:>8} {r['build_s']:>8}  {key:<16} {f['p50_ms']:>8} {f['p99_ms']:>8}\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
