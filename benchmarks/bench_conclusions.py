"""Cost of verifying structured conclusions, and what a trace lookup costs and is bounded by.

    python benchmarks/bench_conclusions.py [--n 2000] [--json]

1. Each deterministic conclusion check alone (``conclusion.schema``, ``.fabricated_evidence``,
   ``.corroboration``, ``.verify_first``, ``.rules``; ``.traces`` with every id in the ledger,
   so no lookup) on a typical conclusion (4 findings, 2 hypotheses) and a large one (40
   findings of 25 ids each, 20 hypotheses of 5 actions).
2. The whole verification (``ConstraintLayer.verify`` with the shipped policies, every check of
   灵通) of the typical conclusion, next to a baseline run interleaved in the same loop: the
   same conclusion with 灵通's conclusion.* entries left out (the content checks only). The
   ratio is what the conclusion's own checks add.
3. Trace lookups against a Tempo-compatible server on loopback: a first lookup, a cached one,
   and one the server does not answer (wall time = the timeout, not the server's delay).

Figures are median and p99 over ``--n`` runs (the first of each excluded: cold caches), wall
time in microseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.server
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from lingyi.checks import REGISTRY, load_builtin_checks
from lingyi.checks._registry import CheckContext, Services
from lingyi.conclusions import KIND
from lingyi.config import defaults_dir
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Evidence
from lingyi.policy import PolicySet, load_policies

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CODES = (
    "conclusion.schema",
    "conclusion.fabricated_evidence",
    "conclusion.corroboration",
    "conclusion.verify_first",
    "conclusion.traces",
    "conclusion.rules",
)


def typical() -> dict[str, Any]:
    return {
        "id": "c-1", "session": "b", "member": "lingflow",
        "conclusion": {
            "summary": "checkout 的 502 源于 v2.3 发布后数据库连接池耗尽", "confidence": "高",
            "evidence_ids": [TRACE, "met-1", "dep-1"], "environment": "prod", "incident_id": "INC-1",
            "hypotheses": [
                {"text": "v2.3 把连接池上限调成了 5", "risk_level": "high",
                 "actions": [{"name": "rollback", "args": {"to": "v2.2"}, "verify_first": True}]},
                {"text": "主库 CPU 饱和", "risk_level": "low", "actions": [{"name": "open_ticket"}]},
            ],
        },
        "findings": {
            "trace_finding": {"evidence_ids": [TRACE]},
            "metric_finding": {"evidences": [{"id": "met-1", "value": 5}]},
            "deploy_finding": {"evidence_ids": ["dep-1"], "fallback": False},
            "log_finding": {"fallback": True},
        },
    }  # fmt: skip


def large() -> dict[str, Any]:
    given = typical()
    ids = [f"ev-{i}-{j}" for i in range(40) for j in range(25)]
    given["findings"] = {
        f"f{i}_finding": {"evidence_ids": ids[i * 25 : (i + 1) * 25]} for i in range(40)
    }
    given["conclusion"]["evidence_ids"] = ids[::5]
    hypothesis = given["conclusion"]["hypotheses"][0]
    hypothesis["actions"] = [dict(hypothesis["actions"][0], name=f"rollback_{k}") for k in range(5)]
    given["conclusion"]["hypotheses"] = [copy.deepcopy(hypothesis) for _ in range(20)]
    return given


Samples = tuple[list[float], list[float]]  # wall and this thread's CPU time, µs


def timed(fn: Callable[[], object], n: int) -> Samples:
    fn()  # cold caches: excluded
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(n):
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        cpu.append((time.thread_time() - start_cpu) * 1e6)
        wall.append((time.perf_counter() - start) * 1e6)
    return wall, cpu


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return round(statistics.median(ordered), 1), round(p99, 1)


def figures(samples: Samples) -> dict[str, float]:
    """Median and p99 of wall time and of CPU time (on a shared machine the wall-time p99
    mostly measures other processes)."""
    (median, p99), (cpu_median, cpu_p99) = _quantiles(samples[0]), _quantiles(samples[1])
    return {"median_us": median, "p99_us": p99, "cpu_median_us": cpu_median, "cpu_p99_us": cpu_p99}


def ledger_for(given: dict[str, Any]) -> Ledger:
    ledger = Ledger()
    ledger.record("b", "lingflow", "query_traces", {"service": "checkout"}, [Evidence(id=TRACE)])
    return ledger


def per_check(policies: PolicySet, given: dict[str, Any], n: int) -> dict[str, dict[str, float]]:
    member = policies.members["lingflow"]
    assertion = KIND.assertion(given)
    ctx = CheckContext(
        assertion, member, policies, ledger_for(given), MemoryCouncil(), Services(), "zh"
    )
    out = {}
    for code in CODES:
        entry = next(e for e in member.checks if e.check == code)
        ctx.code = code
        out[code] = figures(timed(lambda e=entry: REGISTRY[e.check].func(ctx, e.parsed), n))
    return out


def without_conclusion_checks(policies: PolicySet) -> PolicySet:
    """The same policies with 灵通's conclusion.* entries left out: the content checks only."""
    member = policies.members["lingflow"]
    kept = [e for e in member.checks if not e.check.startswith("conclusion.")]
    members = {**policies.members, "lingflow": member.model_copy(update={"checks": kept})}
    return policies.model_copy(update={"members": members})


def whole(policies: PolicySet, n: int) -> dict[str, Any]:
    """The conclusion through every check of 灵通, and its baseline interleaved: the same
    conclusion with the content checks only (what the conclusion's own checks add)."""
    full = ConstraintLayer(policies, MemoryCouncil(), language="zh")
    base = ConstraintLayer(without_conclusion_checks(policies), MemoryCouncil(), language="zh")
    conclusion = KIND.assertion(typical())
    ledger = ledger_for(typical())
    assert full.verify(conclusion, ledger).decision == "approved"
    runs: dict[str, Samples] = {"conclusion": ([], []), "content_only": ([], [])}
    layers = (("conclusion", full), ("content_only", base))
    for _, layer in layers:
        layer.verify(conclusion, ledger)  # cold
    for _ in range(n):
        for label, layer in layers:
            start, start_cpu = time.perf_counter(), time.thread_time()
            layer.verify(conclusion, ledger)
            runs[label][1].append((time.thread_time() - start_cpu) * 1e6)
            runs[label][0].append((time.perf_counter() - start) * 1e6)
    out: dict[str, Any] = {k: figures(v) for k, v in runs.items()}
    ratio = out["conclusion"]["cpu_median_us"] / out["content_only"]["cpu_median_us"]
    out["ratio_cpu_median"] = round(ratio, 2)
    return out


def lookups(n: int) -> dict[str, Any]:
    """A first lookup, a cached one, and one the backend never answers in time."""
    from lingyi.backends.traces import TraceBackend

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if "slow" in self.path or self.path.endswith("c" * 32):
                time.sleep(1.0)
            body = json.dumps({"batches": [{"scopeSpans": [{"spans": [{}]}]}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    backend = TraceBackend(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=0.2)
    counter = iter(range(10**9))
    first = timed(
        lambda: backend.exists([f"{next(counter):032x}".replace("0", "a", 1)]), min(n, 300)
    )
    cached = timed(lambda: backend.exists([TRACE]), n)
    start = time.perf_counter()
    with contextlib.suppress(Exception):  # the outage, as the check sees it
        backend.exists(["c" * 32])
    bounded = (time.perf_counter() - start) * 1e6
    backend.close()
    server.shutdown()
    return {
        "first": figures(first),
        "cached": figures(cached),
        "timeout_0.2s_wall_us": round(bounded, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_builtin_checks()
    policies = load_policies(defaults_dir() / "validators")
    result = {
        "checks_typical": per_check(policies, typical(), args.n),
        "checks_large": per_check(policies, large(), max(100, args.n // 10)),
        "verify": whole(policies, args.n),
        "trace_lookups": lookups(args.n),
    }
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    for block in ("checks_typical", "checks_large"):
        sys.stdout.write(f"{block}\n")
        for code, f in result[block].items():
            sys.stdout.write(
                f"  {code:<32} median {f['median_us']:>8.1f} µs  p99 {f['p99_us']:>8.1f} µs"
                f"  (cpu {f['cpu_median_us']:>7.1f} / {f['cpu_p99_us']:>7.1f})\n"
            )
    v = result["verify"]
    sys.stdout.write(
        f"verify conclusion median {v['conclusion']['median_us']} µs p99 {v['conclusion']['p99_us']} µs; "
        f"content checks only median {v['content_only']['median_us']} µs p99 {v['content_only']['p99_us']} µs; "
        f"ratio (cpu median) {v['ratio_cpu_median']}\n"
    )
    t = result["trace_lookups"]
    sys.stdout.write(
        f"trace lookup first median {t['first']['median_us']} µs p99 {t['first']['p99_us']} µs; "
        f"cached median {t['cached']['median_us']} µs; unanswered (timeout 0.2 s) {t['timeout_0.2s_wall_us']} µs\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
