"""Precision and recall of the shipped policies on labelled transcripts.

    python benchmarks/eval_decisions.py [FILES ...] [--repos] [--json]

Default files: examples/eval/*.jsonl, a set written from the design document alone (not
from the checks). Each assertion carries "expect" and "problem" (unverified, fabricated,
out_of_bounds, inference). "Blocked" means rejected or fallback: precision is the share of
blocked assertions that should have been blocked (a guard that blocks good work gets switched
off), recall the share of those that should be blocked that were. Exact is the share whose
decision matched exactly. Uncertain is the share of decisions in which a check could not
settle its claim (the log record lists it under ``uncertain``).

``--repos`` first makes the git repositories the transcripts name under ``var/repos/``
(benchmarks/_eval_repos.py: whatever the label of the event naming them), so that their git
calls meet real repositories; the blind sets (examples/blind1, blind2) are measured so.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _eval_repos import make_repos

ROOT = Path(__file__).resolve().parent.parent


def run(
    path: Path, log: Path, repos: Path | None = None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(assertion event, verdict) for every assertion of one transcript."""
    config = load_config(ROOT / "config" / "lingyi.toml", log=log)
    if repos is not None:
        config = config.model_copy(update={"repo_roots": [repos]})
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


def uncertain_share(log: Path) -> float | None:
    """The share of the logged verifications in which a check could not settle its claim."""
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    verifications = [r for r in records if r.get("kind", "verification") == "verification"]
    if not verifications:
        return None
    return round(sum(bool(r.get("uncertain")) for r in verifications) / len(verifications), 3)


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
    parser.add_argument("--repos", action="store_true", help="make the repositories named first")
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "examples" / "eval").glob("*.jsonl"))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        repos = make_repos(Path(tmp), files) if args.repos else None
        pairs = [p for f in files for p in run(f, log, repos)]
        unsure = uncertain_share(log)
    table = {group: figures(c) for group, c in sorted(tally(pairs, args.by).items())}
    table["all"]["uncertain"] = unsure
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
    sys.stdout.write(
        f"uncertain (share of decisions no rule settled): {table['all']['uncertain']}\n"
    )
    sys.stdout.write("".join(f"  {m}\n" for m in mismatches(pairs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
