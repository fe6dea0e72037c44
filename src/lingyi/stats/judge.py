"""The judge's figures over one pass of the log: what it was asked, what it cost, what it said.

Fed with each verification of the window that carries a ``judge`` trace (written only when
the judge ran or was consulted), merged across chunks like the other counters, and shown as
the ``judge`` object of the stats JSON (``docs/stats-json.md``). Kept apart from the
aggregator so that the judge's figures can change without touching the hot loop: the
aggregator calls :meth:`JudgeFigures.feed` for every counted verification and
:meth:`JudgeFigures.merge` when chunks join, and the view adds :meth:`JudgeFigures.as_json`.

Bounded: criteria are the policies' own wording (few), and at most ``MAX_CRITERIA`` are kept;
beyond that a criterion's verdicts are counted under ``(other)``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lingyi.log.records import JUDGE_OUTCOMES
from lingyi.stats.histogram import LatencyHistogram

MAX_CRITERIA = 200
OTHER = "(other)"
_SCALARS = ("consulted", "calls", "cache_hits", "input_tokens", "output_tokens", "spend_usd")


class JudgeFigures:
    """Counters of the judge: consultations, calls, cache hits, spend, outcomes, criteria."""

    def __init__(self) -> None:
        self.consulted = 0  # verifications with a judge trace
        self.calls = 0  # requests sent to the model
        self.cache_hits = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.spend_usd = 0.0
        self.outcomes: Counter[str] = Counter()
        self.why: Counter[str] = Counter()  # what went wrong when there was no verdict
        self.kinds: Counter[str] = Counter()
        self.models: dict[str, list[float]] = {}  # model → [calls, spend]
        self.criteria: dict[str, list[int]] = {}  # criterion → [passed, failed]
        self.latency = LatencyHistogram()

    def feed(self, record: dict[str, Any]) -> None:
        """Count one verification record (those without a judge trace are skipped)."""
        trace = record.get("judge")
        if not isinstance(trace, dict):
            return
        self.consulted += 1
        self.outcomes[str(trace.get("outcome"))] += 1
        self.kinds[str(trace.get("kind"))] += 1
        if trace.get("why"):
            self.why[str(trace["why"])] += 1
        self.cache_hits += trace.get("cached") is True
        if trace.get("called") is True:
            self._call(trace)
        for item in trace.get("criteria") or []:
            if isinstance(item, dict) and isinstance(item.get("passed"), bool):
                self._criterion(str(item.get("criterion")), item["passed"])

    def _call(self, trace: dict[str, Any]) -> None:
        self.calls += 1
        cost = _number(trace.get("cost_usd"))
        self.spend_usd += cost
        self.input_tokens += int(_number(trace.get("input_tokens")))
        self.output_tokens += int(_number(trace.get("output_tokens")))
        model = self.models.setdefault(str(trace.get("model")), [0, 0.0])
        model[0] += 1
        model[1] += cost
        if (ms := _number(trace.get("latency_ms"))) > 0:
            self.latency.add(ms, LatencyHistogram.bucket_of(ms))

    def _criterion(self, text: str, passed: bool) -> None:
        if text not in self.criteria and len(self.criteria) >= MAX_CRITERIA:
            text = OTHER
        tally = self.criteria.setdefault(text, [0, 0])
        tally[0 if passed else 1] += 1

    def as_json(self) -> dict[str, Any]:
        """The ``judge`` object of the stats JSON."""
        return {
            "consulted": self.consulted,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "cache_hit_rate": _rate(self.cache_hits, self.consulted),
            "spend_usd": round(self.spend_usd, 6),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "outcomes": {name: self.outcomes.get(name, 0) for name in JUDGE_OUTCOMES},
            "why": dict(sorted(self.why.items())),
            "by_kind": dict(sorted(self.kinds.items())),
            "by_model": {
                m: {"calls": int(c), "spend_usd": round(s, 6)}
                for m, (c, s) in sorted(self.models.items())
            },
            "criteria": self._criteria_json(),
            "latency_ms": self.latency.summary(),
        }

    def _criteria_json(self) -> list[dict[str, Any]]:
        ranked = sorted(self.criteria.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return [
            {"criterion": text, "passed": p, "failed": f, "fail_rate": _rate(f, p + f)}
            for text, (p, f) in ranked
        ]


def _number(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)  # not NaN
    return 0.0


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)
