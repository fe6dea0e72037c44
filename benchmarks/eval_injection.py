"""Recall of the injection detector at a false-positive rate of at most 1%.

    python benchmarks/eval_injection.py [SET.jsonl] [--json] [--misses]

Default set: examples/injection/set.jsonl, the held-out set (written blind by another
helper, from the brief alone: injection texts and benign tool outputs and descriptions, in
zh, en, ja, fr and mixed, plain and encoded). One JSON object a line: ``text``, ``label``
(``injection`` or ``benign``), ``lang``, ``form``, ``source``.

Two operating points are reported: the shipped threshold (what the gateway flags), and the
lowest threshold whose false-positive rate on the benign texts is at most 1% (the score is the
sum of the matched patterns' weights, :mod:`lingyi.gateway.injection`). Recall is given per
language and per form at the shipped threshold, false positives per source.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lingyi.gateway.injection import THRESHOLD, score

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "examples" / "injection" / "set.jsonl"


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def at(rows: list[dict[str, Any]], scores: list[float], threshold: float) -> dict[str, Any]:
    pos = [s for r, s in zip(rows, scores, strict=True) if r["label"] == "injection"]
    neg = [s for r, s in zip(rows, scores, strict=True) if r["label"] != "injection"]
    tp, fp = sum(s >= threshold for s in pos), sum(s >= threshold for s in neg)
    return {
        "threshold": threshold,
        "recall": round(tp / len(pos), 3) if pos else None,
        "fpr": round(fp / len(neg), 4) if neg else None,
        "caught": f"{tp}/{len(pos)}",
        "false_positives": f"{fp}/{len(neg)}",
    }


def best_under(rows: list[dict[str, Any]], scores: list[float], fpr: float) -> dict[str, Any]:
    """The lowest threshold (most recall) whose false-positive rate is at most ``fpr``."""
    for threshold in sorted({s for s in scores if s > 0} | {THRESHOLD}):
        point = at(rows, scores, threshold)
        if point["fpr"] is not None and point["fpr"] <= fpr:
            return point
    return at(rows, scores, float("inf"))


def by(rows: list[dict[str, Any]], scores: list[float], key: str) -> dict[str, str]:
    groups: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for r, s in zip(rows, scores, strict=True):
        groups[str(r.get(key))].append((r["label"] == "injection", s >= THRESHOLD))
    out = {}
    for name, pairs in sorted(groups.items()):
        pos = [hit for inj, hit in pairs if inj]
        neg = [hit for inj, hit in pairs if not inj]
        out[name] = f"recall {sum(pos)}/{len(pos)}, false positives {sum(neg)}/{len(neg)}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list what was missed or wrong")
    parser.add_argument(
        "--half", choices=["tuning", "held-out"], help="even lines (tuned on) or odd (never seen)"
    )
    args = parser.parse_args()
    rows = load(args.set)
    if args.half:
        rows = rows[0 if args.half == "tuning" else 1 :: 2]
    scores = [score(r["text"]) for r in rows]
    report = {
        "set": f"{args.set}" + (f" ({args.half} half)" if args.half else ""),
        "shipped": at(rows, scores, THRESHOLD),
        "at_fpr_1pct": best_under(rows, scores, 0.01),
        "by_lang": by(rows, scores, "lang"),
        "by_form": by(rows, scores, "form"),
        "by_source": by(rows, scores, "source"),
    }
    if args.misses:
        report["misses"] = [
            f"{r['id']} {r['label']} {r['lang']}/{r['form']} {s}: {r['text'][:160]!r}"
            for r, s in zip(rows, scores, strict=True)
            if (r["label"] == "injection") != (s >= THRESHOLD)
        ]
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for key, value in report.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        elif isinstance(value, list):
            print(f"{key}:", *value, sep="\n  ")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
