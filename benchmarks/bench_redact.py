"""What redaction costs per log record, before and after the catalogue (issue 9).

    python benchmarks/bench_redact.py [--rounds 40] [--json]

Records: every verification the example transcripts produce (``examples/**/*.jsonl``
replayed through the guard, as the server writes them), each also in two dirty variants: one
secret pasted into its content, and five secrets in content and arguments plus a secret-keyed
argument (``tests/secret_cases.py``). For each record, in-process and in the same run:

- the redaction step exactly as the log writer runs it on the JSON text it hashes, before
  (``benchmarks/_baseline_redact.py``: hint test, then the walk) and after
  (``lingyi.redact.redact_record``), re-serialising when something was replaced;
- a whole ``VerificationLog.append`` with each redactor in place.

Prints median and p99 in microseconds of this thread's CPU time (``time.thread_time``: on a
shared, loaded machine wall time mostly measures the other processes), and how many of the
secrets put in each set each redactor left in the written text.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.secret_cases: the made-up secrets

from tests.secret_cases import BY_FORMAT, ISSUE_FORMATS, PERSONAL  # noqa: E402

import _baseline_redact as before  # noqa: E402
import lingyi.log.writer as writer  # noqa: E402
from lingyi.config import load_config  # noqa: E402
from lingyi.council import MemoryCouncil  # noqa: E402
from lingyi.guard import Guard  # noqa: E402
from lingyi.log import VerificationLog, canonical  # noqa: E402
from lingyi.redact import redact_record  # noqa: E402
from lingyi.replay import Replayer  # noqa: E402

Record = dict[str, Any]


def records() -> list[Record]:
    """The records the guard writes for every example transcript (redaction not involved)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        config = load_config(ROOT / "config" / "lingyi.toml", log=log)
        for path in sorted((ROOT / "examples").rglob("*.jsonl")):
            guard = Guard.from_config(config, source="bench", council=MemoryCouncil())
            list(Replayer(guard).run(path.read_text(encoding="utf-8").splitlines()))
            guard.close()
        rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        for key in ("v", "id", "ts", "hash"):
            row.pop(key, None)
    return rows


def dirty(rows: list[Record], secrets: int) -> list[Record]:
    out = []
    for i, row in enumerate(rows):
        row = copy.deepcopy(row)
        cases = [BY_FORMAT[ISSUE_FORMATS[(i + k) % len(ISSUE_FORMATS)]] for k in range(secrets)]
        row["content"] = f"{row.get('content') or ''} {cases[0].sentence}"
        if secrets > 1:
            call = row.get("tool_call") or {"name": "search_knowledge", "arguments": {}}
            args = dict(call.get("arguments") or {})
            args |= {f"note{k}": c.sentence for k, c in enumerate(cases[1:])}
            row["tool_call"] = {**call, "arguments": args | {"client_secret": "pw-42"}}
        out.append(row)
    return out


def step_before(record: Record) -> str:
    body = canonical(record)
    if before.may_hold_secret(body):
        record.update(before.redact(record))
        body = canonical(record)
    return body


def step_after(record: Record) -> str:
    body = canonical(record)
    if redact_record(record, body=body):
        body = canonical(record)
    return body


def _before_record(record: Record, *, body: str | None = None, key: bytes | None = None) -> bool:
    """The old redactor behind the writer's new call, for the append comparison."""
    if body is not None and not before.may_hold_secret(body):
        return False
    record.update(before.redact(record))
    return True


def paired(
    rows: list[Record], steps: tuple[Callable[[Record], object], ...], rounds: int
) -> list[list[float]]:
    """Each step on each record, interleaved (a, b, a, b, …) so both see the same load."""
    out: list[list[float]] = [[] for _ in steps]
    for _ in range(rounds):
        for row in rows:
            for times, step in zip(out, steps, strict=True):
                fresh = copy.deepcopy(row)  # the step mutates; the copy is not timed
                start = time.thread_time()
                step(fresh)
                times.append((time.thread_time() - start) * 1e6)
    return out


def appends(rows: list[Record], rounds: int) -> list[list[float]]:
    """Whole appends, the old and the new redactor behind the writer's call, interleaved."""
    with tempfile.TemporaryDirectory() as tmp:
        logs = [VerificationLog(Path(tmp) / f"{n}.jsonl") for n in ("before", "after")]
        redactors = (_before_record, writer.redact_record)

        def with_redactor(index: int) -> Callable[[Record], object]:
            def step(record: Record) -> object:
                writer.redact_record = redactors[index]  # type: ignore[assignment]
                return logs[index].append(record)

            return step

        try:
            return paired(rows, (with_redactor(0), with_redactor(1)), rounds)
        finally:
            writer.redact_record = redactors[1]  # type: ignore[assignment]
            for log in logs:
                log.close()


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"median_us": round(statistics.median(values), 1), "p99_us": round(p99, 1)}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*_strings(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def leaks(rows: list[Record], step: Callable[[Record], str] | None) -> int:
    """How many of the secrets put in ``rows`` are in what the step writes (``None``: all that
    were put in). Counted in the decoded strings: a PEM block's newlines are escaped in JSON."""
    secrets = [BY_FORMAT[f].secret for f in ISSUE_FORMATS] + ["pw-42"]
    secrets += [c.secret for c in PERSONAL]
    secrets += [base64.b64encode(BY_FORMAT[f].sentence.encode()).decode() for f in ISSUE_FORMATS]
    texts = [step(copy.deepcopy(r)) if step else canonical(r) for r in rows]
    found = [s for text in texts for s in _strings(json.loads(text))]
    return sum(text.count(s) for text in found for s in secrets)


def personal(rows: list[Record]) -> list[Record]:
    """Each record with one item of personal data in its content and, in an argument, a
    secret's sentence base64-encoded (issue 24: the spellings the catalogue did not find)."""
    out = []
    for i, row in enumerate(rows):
        row = copy.deepcopy(row)
        row["content"] = f"{row.get('content') or ''} {PERSONAL[i % len(PERSONAL)].sentence}"
        call = row.get("tool_call") or {"name": "search_knowledge", "arguments": {}}
        case = BY_FORMAT[ISSUE_FORMATS[i % len(ISSUE_FORMATS)]]
        blob = base64.b64encode(case.sentence.encode()).decode()
        row["tool_call"] = {**call, "arguments": {**(call.get("arguments") or {}), "blob": blob}}
        out.append(row)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    clean = records()
    sets = {
        "no secret": clean,
        "1 secret": dirty(clean, 1),
        "5 secrets + key": dirty(clean, 5),
        "personal + base64 secret": personal(clean),
    }
    result: dict[str, Any] = {"records": len(clean), "rounds": args.rounds}
    for name, rows in sets.items():
        step_times = paired(rows, (step_before, step_after), args.rounds)
        append_times = appends(rows, max(1, args.rounds // 4))
        result[name] = {
            "redaction before": summary(step_times[0]),
            "redaction after": summary(step_times[1]),
            "append before": summary(append_times[0]),
            "append after": summary(append_times[1]),
            "secrets put in": leaks(rows, None),
            "secrets left before": leaks(rows, step_before),
            "secrets left after": leaks(rows, step_after),
        }
    sys.stdout.write(json.dumps(result, indent=None if args.json else 2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
