"""The judge's overhead per verification against a loopback model, and a cache hit's cost.

    python benchmarks/bench_judge.py [--n 300] [--json]

A Messages API on 127.0.0.1 answers every request at once with a well-formed verdict (tool
use), so what is measured is the judge's own cost: building the prompt and the cache key,
the budget, the hop to the judge's event loop and back, the real ``AsyncAnthropic`` client,
HTTP on loopback, reading the verdict. The model's own thinking time (hundreds of
milliseconds to seconds for a real model) is not in it and cannot be measured here.

Interleaved in one process, one of each per round: a new question verified without the judge
(``none``) and with it (``miss``: a call), and a question asked before verified without the
judge (``none_same``) and with it (``hit``: a cached verdict, no call). Reported: p50 and p99
of each, and of the difference between the judged and the unjudged verification of the same
text in the same round (``miss_overhead``, ``hit_overhead``).
"""

from __future__ import annotations

import argparse
import http.server
import json
import statistics
import threading
import time
from typing import Any

from lingyi.checks import CheckContext
from lingyi.config import JudgeSection, defaults_dir
from lingyi.council import MemoryCouncil
from lingyi.judge import Judge
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import load_policies


class Model(http.server.BaseHTTPRequestHandler):
    """Answers every request with a satisfied verdict for the rubric it was sent.

    HTTP/1.1 keep-alive, as the real API: the client reuses its connection. Nagle is off, or
    the headers and the body (two writes) would wait ~40 ms for a delayed ACK.
    """

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        schema = body["tools"][0]["input_schema"]["properties"]["criteria"]["items"]
        ids = schema["properties"]["criterion"]["enum"]
        verdict = {
            "criteria": [{"criterion": i, "passed": True, "gap": ""} for i in ids],
            "verdict": "satisfied",
            "explanation": "loopback",
        }
        block = {"type": "tool_use", "id": "t", "name": "record_verdict", "input": verdict}
        raw = json.dumps(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [block],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 1200, "output_tokens": 150},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(layer: ConstraintLayer, ledger: Ledger, content: str) -> float:
    assertion = Assertion(member="lingyi", type="fact", content=content, session="bench")
    started = time.perf_counter()
    layer.verify(assertion, ledger)
    return (time.perf_counter() - started) * 1000


def run(n: int) -> dict[str, Any]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    policies = load_policies(defaults_dir() / "validators")
    config = JudgeSection(enabled=True, base_url=url, budget_session_usd=0, budget_day_usd=0)
    judge = Judge(config, api_key="bench-not-a-key")
    plain = ConstraintLayer(policies, MemoryCouncil(), language="en")
    judged = ConstraintLayer(policies, MemoryCouncil(), language="en", judge=judge)
    ledger = Ledger()
    for i in range(20):  # warm up: imports, the loop thread, the client's connection
        timed(judged, ledger, f"第{i}份预热纪要已发送")
    timed(judged, ledger, "反复询问的纪要已发送")
    rows: dict[str, list[float]] = {"none": [], "miss": [], "none_same": [], "hit": []}
    for i in range(n):
        rows["none"].append(timed(plain, ledger, f"第{i}份会议纪要已发送给所有成员"))
        rows["miss"].append(timed(judged, ledger, f"第{i}份会议纪要已发送给所有成员"))
        rows["none_same"].append(timed(plain, ledger, "反复询问的纪要已发送"))
        rows["hit"].append(timed(judged, ledger, "反复询问的纪要已发送"))
    rows["hit_judge_only"] = judge_only(judged, judge, ledger, n)
    judge.close()
    server.shutdown()
    return summary(rows)


def judge_only(layer: ConstraintLayer, judge: Judge, ledger: Ledger, n: int) -> list[float]:
    """The judge's own part of a cache hit (plan, request, key, lookup, result), alone."""
    assertion = Assertion(
        member="lingyi", type="fact", content="反复询问的纪要已发送", session="bench"
    )
    member = layer.policies.members["lingyi"]
    out = []
    for _ in range(n):
        ctx = CheckContext(
            assertion, member, layer.policies, ledger, layer.council, layer.services, "en"
        )
        started = time.perf_counter()
        judge(ctx)
        out.append((time.perf_counter() - started) * 1000)
    return out


def summary(rows: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in rows.items():
        out[name] = {"p50": statistics.median(values), "p99": percentile(values, 0.99)}
    for name, base in (("miss", "none"), ("hit", "none_same")):
        extra = [a - b for a, b in zip(rows[name], rows[base], strict=True)]
        out[f"{name}_overhead"] = {"p50": statistics.median(extra), "p99": percentile(extra, 0.99)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.n)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'':18} {'p50 ms':>9} {'p99 ms':>9}")
    for name, figures in result.items():
        print(f"{name:18} {figures['p50']:9.3f} {figures['p99']:9.3f}")


if __name__ == "__main__":
    main()
