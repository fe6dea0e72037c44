"""Transcript replay: the design's contract, expectations, bad lines, logging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lingyi.cli import main
from lingyi.log import read_log, verify_chain
from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.jsonl"))


def lingyi(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "lingyi", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize("transcript", EXAMPLES, ids=lambda p: p.name)
def test_example_transcripts_meet_their_expectations(transcript: Path, tmp_path: Path) -> None:
    """Every shipped example transcript passes `lingyi replay --check` (policy tests)."""
    done = lingyi("--log", str(tmp_path / "log.jsonl"), "replay", str(transcript), "--check")
    assert done.returncode == 0, done.stderr
    assert "0 bad lines" in done.stderr


def test_output_follows_the_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One JSON object per assertion, in order, with the contract's fields."""
    transcript = ROOT / "examples" / "council-basics.jsonl"
    assert main(["--log", str(tmp_path / "log.jsonl"), "replay", str(transcript)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in rows] == [f"x{i}" for i in range(1, 29)]
    assert set(rows[0]) >= {"id", "decision", "reason", "recommendation", "fallback", "checks"}
    assert set(rows[0]["checks"][0]) >= {"stage", "code", "passed", "reason"}
    by_id = {r["id"]: r for r in rows}
    assert by_id["x12"]["decision"] == "approved" and by_id["x13"]["decision"] == "rejected"
    assert by_id["x17"]["fallback"]["content"].startswith("【推演】")


def test_replay_logs_every_assertion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replay appends one verification record per assertion, chained, as the server does."""
    log = tmp_path / "log.jsonl"
    main(["--log", str(log), "replay", str(ROOT / "examples" / "council-basics.jsonl")])
    records = [line.record for line in read_log(log) if line.record]
    assert len(records) == 28 and verify_chain(log).ok
    first = records[0]
    assert first["source"] == "replay" and first["assertion_id"] == "x1"
    for key in (
        "id",
        "ts",
        "session",
        "member",
        "type",
        "content",
        "tool_call",
        "decision",
        "checks",
        "reason",
        "latency_ms",
        "policy_version",
        "prev",
        "hash",
    ):
        assert key in first, key


def test_log_records_the_canonical_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An assertion by the alias LingYan is logged as lingresearch, with the name used kept."""
    log = tmp_path / "log.jsonl"
    main(["--log", str(log), "replay", str(ROOT / "examples" / "council-english.jsonl")])
    by_id = {line.record["assertion_id"]: line.record for line in read_log(log) if line.record}
    assert by_id["en-17"]["member"] == "lingresearch"
    assert by_id["en-17"]["member_as_given"] == "LingYan"
    assert "member_as_given" not in by_id["en-1"]


def test_malformed_lines_are_reported_and_the_rest_runs(tmp_path: Path) -> None:
    """Bad lines name their line number; every good assertion still gets a verdict."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "\n".join(
            [
                '{"event":"council_message","id":"m-1","from":"lingflow","content":"v0.16 审计已完成"}',
                '{"event":"assertion","id":"a-1","member":"lingyi","type":"communication","content":"灵通说v0.16审计已经完成"',
                '{"event":"assertion","id":"a-2","member":"lingyi","type":"opinion","content":"x"}',
                '["not", "an", "object"]',
                '{"event":"teleport"}',
                '{"event":"assertion","id":"a-3","member":"lingyi","type":"communication","content":"灵通说v0.16审计已经完成","extra":"ignored"}',
            ]
        ),
        encoding="utf-8",
    )
    done = lingyi("--log", str(tmp_path / "log.jsonl"), "replay", str(transcript))
    assert done.returncode == 2
    assert [json.loads(x)["id"] for x in done.stdout.splitlines()] == ["a-3"]
    for lineno, words in [(2, "not valid JSON"), (3, "type"), (4, "event"), (5, "unknown event")]:
        assert f"t.jsonl:line {lineno}: " in done.stderr and words in done.stderr


def test_check_reports_mismatches_and_fails(tmp_path: Path) -> None:
    """`--check` names each assertion whose decision differs from its expect, and exits 1."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        '{"event":"assertion","id":"a-1","member":"lingyi","type":"communication",'
        '"content":"灵通说v0.16审计已经完成","expect":"approved"}\n',
        encoding="utf-8",
    )
    done = lingyi("--log", str(tmp_path / "log.jsonl"), "replay", str(transcript), "--check")
    assert done.returncode == 1
    assert "a-1: expected approved, got rejected" in done.stderr
    assert "0 of 1 expectations met" in done.stderr


def test_replay_never_touches_the_server_council_record(tmp_path: Path) -> None:
    """Replay's council record is its own: the configured record is neither read nor written."""
    council = tmp_path / "council.jsonl"
    council.write_text(
        '{"id":"m-9","from":"lingflow","content":"v0.16 审计已完成"}\n', encoding="utf-8"
    )
    before = council.read_bytes()
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        '{"event":"assertion","id":"a-1","member":"lingyi","type":"communication",'
        '"content":"灵通说v0.16审计已经完成"}\n',
        encoding="utf-8",
    )
    env_run = subprocess.run(
        [
            sys.executable,
            "-m",
            "lingyi",
            "--log",
            str(tmp_path / "l.jsonl"),
            "replay",
            str(transcript),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**__import__("os").environ, "LINGYI_COUNCIL": str(council)},
    )
    assert json.loads(env_run.stdout)["decision"] == "rejected"  # m-9 was not consulted
    assert council.read_bytes() == before


# --------------------------------------------------------------------------- several transcripts

KB_EVIDENCE = (
    '{"event":"tool_result","session":"s1","member":"lingzhi","tool":"search_knowledge",'
    '"arguments":{"query":"气功"},"evidence":[{"id":"kb:qg-001","title":"气功源流"}]}\n'
)


def cites_kb(name: str, expect: str) -> str:
    return (
        f'{{"event":"assertion","id":"{name}","session":"s1","member":"lingzhi","type":"fact",'
        f'"content":"知识库中有关于气功的文章","evidence_ids":["kb:qg-001"],"expect":"{expect}"}}\n'
    )


def test_a_folder_replays_every_transcript_in_it(tmp_path: Path) -> None:
    """`replay --check DIR` runs every *.jsonl below DIR, subfolders too, like `opa test DIR`.

    (The labelled sets in examples/eval* are measurements with known misses, not policy
    tests; the shipped examples are copied into a folder tree instead.)
    """
    for i, transcript in enumerate(EXAMPLES):
        target = tmp_path / ("nested" if i % 2 else "") / transcript.name
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(transcript.read_bytes())
    (tmp_path / "notes.txt").write_text("not a transcript", encoding="utf-8")
    done = lingyi("--log", str(tmp_path / "l.jsonl"), "replay", "--check", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().endswith(f"0 bad lines in {len(EXAMPLES)} transcripts")


def test_each_transcript_starts_from_an_empty_ledger(tmp_path: Path) -> None:
    """Evidence recorded in one transcript does not back a claim in the next one."""
    (tmp_path / "a.jsonl").write_text(
        KB_EVIDENCE + cites_kb("backed", "approved"), encoding="utf-8"
    )
    (tmp_path / "b.jsonl").write_text(cites_kb("unbacked", "rejected"), encoding="utf-8")
    done = lingyi("--log", str(tmp_path / "l.jsonl"), "replay", "--check", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert [json.loads(x)["decision"] for x in done.stdout.splitlines()] == ["approved", "rejected"]
    assert "2 of 2 expectations met, 0 bad lines in 2 transcripts" in done.stderr


def test_json_mode_names_file_and_line_and_ends_with_a_summary(tmp_path: Path) -> None:
    """--json: each verdict carries its file, line and whether it met its expectation; bad
    lines are JSON lines too; the last line sums up."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        KB_EVIDENCE + "{broken\n" + cites_kb("ok", "approved") + cites_kb("wrong", "rejected"),
        encoding="utf-8",
    )
    done = lingyi(
        "--log", str(tmp_path / "l.jsonl"), "replay", "--check", "--json", str(transcript)
    )
    rows = [json.loads(x) for x in done.stdout.splitlines()]
    assert done.returncode == 2  # a bad line outranks a mismatch
    assert rows[0] == {"file": str(transcript), "line": 2, "error": rows[0]["error"]}
    assert [(r["id"], r["line"], r["met"]) for r in rows[1:3]] == [
        ("ok", 3, True),
        ("wrong", 4, False),
    ]
    assert rows[3] == {
        "summary": {"transcripts": 1, "assertions": 2, "expectations": 2, "met": 1, "bad_lines": 1}
    }


def test_an_unreadable_transcript_is_reported_and_the_others_run(tmp_path: Path) -> None:
    """A transcript that cannot be read is named on stderr (exit 2); the others still run."""
    good = tmp_path / "good.jsonl"
    good.write_text(KB_EVIDENCE + cites_kb("x", "approved"), encoding="utf-8")
    done = lingyi(
        "--log", str(tmp_path / "l.jsonl"), "replay", str(tmp_path / "gone.jsonl"), str(good)
    )
    assert done.returncode == 2
    assert "gone.jsonl: cannot read transcript" in done.stderr
    assert [json.loads(x)["id"] for x in done.stdout.splitlines()] == ["x"]


def test_a_line_that_is_not_utf8_is_one_bad_line(tmp_path: Path) -> None:
    """Invalid UTF-8 on one line is reported with its number; the lines after it still run."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(
        b'{"event":"assertion","content":"\xff"}\n' + cites_kb("after", "rejected").encode()
    )
    done = lingyi("--log", str(tmp_path / "l.jsonl"), "replay", str(transcript))
    assert done.returncode == 2 and "t.jsonl:line 1: not valid UTF-8" in done.stderr
    assert [json.loads(x)["id"] for x in done.stdout.splitlines()] == ["after"]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ('{"event":"assertion","member":"lingyi","type":"opinion"}', 'type: "opinion" is not allowed; valid values: fact, action, communication'),
        ('{"event":"assertion","type":"fact"}', "member: required key is missing"),
        ('{"event":"council_message","content":"x"}', "from: required key is missing"),
        ('{"event":"tool_result","evidence":[{"title":"t"}]}', "evidence[0].id: required key is missing"),
        ('{"event":"tool_result","evidence":"kb:1"}', 'evidence: must be a list, not "kb:1"'),
    ],
)  # fmt: skip
def test_a_bad_event_names_its_key_and_the_valid_values(
    tmp_path: Path, event: str, message: str
) -> None:
    """An event that does not fit its schema is reported as FILE:line N: key: what is wrong."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(event + "\n", encoding="utf-8")
    done = lingyi("--log", str(tmp_path / "l.jsonl"), "replay", str(transcript))
    assert done.returncode == 2 and f"t.jsonl:line 1: {message}" in done.stderr


def test_a_folder_without_transcripts_is_bad_input(tmp_path: Path) -> None:
    """An empty folder is exit 2 naming it, not a silent success with nothing tested."""
    done = lingyi("replay", "--check", str(tmp_path))
    assert done.returncode == 2 and "no transcripts (*.jsonl) in this folder" in done.stderr
