"""Precision and recall of the shipped policies on labelled transcripts.

    python benchmarks/eval_decisions.py [FILES ...] [--json]

Default files: examples/eval/*.jsonl, a set written from the design document alone (not
from the checks). Each assertion carries "expect" and "problem" (unverified, fabricated,
out_of_bounds, inference). "Blocked" means rejected or fallback: precision is the share of
blocked assertions that should have been blocked (a guard that blocks good work gets switched
off), recall the share of those that should be blocked that were. Exact is the share whose
decision matched exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from lingyi.config import load_config
from lingyi.council import MemoryCouncil
from lingyi.errors import TranscriptError
from lingyi.guard import Guard
from lingyi.replay import Replayer, read_events

ROOT = Path(__file__).resolve().parent.parent


def run(path: Path, log: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(assertion event, verdict) for every assertion of one transcript."""
    config = load_config(ROOT / "config" / "lingyi.toml", log=log)
    replayer = Replayer(Guard.from_config(config, source="eval", council=MemoryCouncil()))
    lines = path.read_text(encoding="utf-8").splitlines()
    events = {n: e for n, e in read_events(lines) if not isinstance(e, TranscriptError)}
    return [(events[n], out) for n, out in replayer.run(lines) if isinstance(out, dict)]


def tally(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]], by: str = "problem"
) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for event, out in pairs:
        for group in (str(event.get(by, "?")), "all"):
            c = counts.setdefault(group, Counter())
            should, did = event["expect"] != "approved", out["decision"] != "approved"
            c["tp" if should and did else "fp" if did else "fn" if should else "tn"] += 1
            c["exact"] += event["expect"] == out["decision"]
    return counts


def figures(c: Counter[str]) -> dict[str, Any]:
    n = c["tp"] + c["fp"] + c["tn"] + c["fn"]
    blocked, should = c["tp"] + c["fp"], c["tp"] + c["fn"]
    return {
        "cases": n,
        "precision": round(c["tp"] / blocked, 3) if blocked else None,
        "recall": round(c["tp"] / should, 3) if should else None,
        # The two figures: legitimate work that passes, violations intercepted.
        "legit_pass": round(c["tn"] / (c["tn"] + c["fp"]), 3) if c["tn"] + c["fp"] else None,
        "intercepted": round(c["tp"] / should, 3) if should else None,
        "false_positives": c["fp"],
        "false_negatives": c["fn"],
        "exact": round(c["exact"] / n, 3) if n else None,
    }


def mismatches(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    return [
        f"{e['id']} [{e.get('problem')}] expected {e['expect']}, got {o['decision']}: {e.get('content')}"
        for e, o in pairs
        if e["expect"] != o["decision"]
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--by", default="problem", help="group by this event field (category)")
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "examples" / "eval").glob("*.jsonl"))
    with tempfile.TemporaryDirectory() as tmp:
        pairs = [p for f in files for p in run(f, Path(tmp) / "log.jsonl")]
    table = {group: figures(c) for group, c in sorted(tally(pairs, args.by).items())}
    if args.json:
        sys.stdout.write(
            json.dumps(
                {"figures": table, "mismatches": mismatches(pairs)}, ensure_ascii=False, indent=2
            )
            + "\n"
        )
        return 0
    sys.stdout.write(
        f"{args.by:<22}{'cases':>6}{'precision':>11}{'recall':>8}{'legit pass':>12}"
        f"{'FP':>5}{'FN':>5}{'exact':>7}\n"
    )
    for group, f in table.items():
        sys.stdout.write(
            f"{group:<22}{f['cases']:>6}{f['precision']!s:>11}{f['recall']!s:>8}"
            f"{f['legit_pass']!s:>12}{f['false_positives']:>5}{f['false_negatives']:>5}"
            f"{f['exact']!s:>7}\n"
        )
    sys.stdout.write("".join(f"  {m}\n" for m in mismatches(pairs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
