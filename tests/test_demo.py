"""`lingyi demo`: from any directory, a scripted session against a real stdio server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lingyi.log import read_log, verify_chain


def test_demo_runs_from_any_directory_and_leaves_a_verifiable_log(tmp_path: Path) -> None:
    """Every scripted verdict is the expected one; the log stays behind and its chain verifies."""
    log = tmp_path / "demo-log.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    done = subprocess.run(
        [sys.executable, "-m", "lingyi", "--log", str(log), "demo"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for word in (
        "approved",
        "rejected",
        "fallback",
        "git_commit",
        "tool.args_schema",
        f"lingyi log verify {log}",
    ):
        assert word in done.stdout
    assert "expected" not in done.stdout  # no verdict differs from the script
    report = verify_chain(log)
    assert report.ok and report.records >= 16
    decisions = {line.record["decision"] for line in read_log(log) if line.record}
    assert decisions == {"approved", "rejected", "fallback"}
    assert not list(tmp_path.glob("lingyi-demo-*")), "the demo folder is cleaned up"


def test_demo_default_log_lives_outside_the_removed_demo_folder(tmp_path: Path) -> None:
    """Without --log the demo prints where its log is, and that file exists afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINGYI_")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "lingyi", "demo"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("verification log: "))
    log = Path(line.removeprefix("verification log: "))
    assert log.is_file() and verify_chain(log).ok
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
