"""The decisions on every shipped transcript and labelled set, pinned.

A refactoring must not change what the guard decides. ``tests/golden/decisions.json`` holds,
for each assertion of ``examples/**/*.jsonl``, the decision and the codes of the checks that
failed. A change that is meant to change decisions regenerates the file
(``python tests/test_golden_decisions.py``) and says why in its commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lingyi.config import load_config
from lingyi.council import MemoryCouncil
from lingyi.guard import Guard
from lingyi.replay import Replayer

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "decisions.json"
SETS = (
    "council-*.jsonl",
    "eval/*.jsonl",
    "holdout/*.jsonl",
    "holdout2/*.jsonl",
    "holdout3/*.jsonl",
)


def decisions(log: Path) -> dict[str, dict[str, Any]]:
    """file → assertion id → {decision, failed codes}, replayed from an empty ledger."""
    config = load_config(ROOT / "config" / "lingyi.toml", log=log)
    out: dict[str, dict[str, Any]] = {}
    for pattern in SETS:
        for path in sorted((ROOT / "examples").glob(pattern)):
            guard = Guard.from_config(config, source="golden", council=MemoryCouncil())
            lines = path.read_text(encoding="utf-8").splitlines()
            rows = [o for _, o in Replayer(guard).run(lines) if isinstance(o, dict)]
            out[path.relative_to(ROOT).as_posix()] = {
                str(r["id"]): [
                    r["decision"],
                    sorted(c["code"] for c in r["checks"] if not c["passed"]),
                ]
                for r in rows
            }
            guard.close()
    return out


def test_decisions_match_the_golden_file(tmp_path: Path) -> None:
    """Every example and labelled assertion gets the decision and failed codes pinned for it."""
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = decisions(tmp_path / "log.jsonl")
    changed = [
        f"{f}:{i}: golden {expected[f].get(i)}, now {v}"
        for f, rows in got.items()
        for i, v in rows.items()
        if expected.get(f, {}).get(i) != v
    ]
    assert sorted(got) == sorted(expected)
    assert not changed, "\n".join(changed[:40])


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.write_text(
            json.dumps(decisions(Path(tmp) / "log.jsonl"), ensure_ascii=False, indent=0) + "\n",
            encoding="utf-8",
        )
    sys.stdout.write(f"wrote {GOLDEN}\n")
