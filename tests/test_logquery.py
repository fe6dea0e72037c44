"""`lingyi log tail` / `log query`: filters, order, output formats, unreadable lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lingyi.log import Query, Skipped, file_appeal, format_human, query_log, record_hash, tail_log
from tests.test_stats import R1, R2, R3, R4, R5, R6, run_lingyi, vrec, write_config, write_log


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path / "log.jsonl"
    records = [R1, R2, R3, R4, R5, R6, vrec("2026-11-26T10:00:00.000Z", session="s2",
                                            content="关于失眠的问题")]  # fmt: skip
    return path, write_log(path, records)


def ids(records: Any) -> list[str]:
    return [r["id"] for r in records]


def test_each_filter(log: tuple[Path, list[dict[str, Any]]]) -> None:
    """member, decision, failed code (glob), tool (glob), session and text each narrow."""
    path, w = log

    def q(**kw: Any) -> list[str]:
        return ids(query_log(path, Query(**kw)))

    assert q(member="lingyi") == ids([w[2], w[3]])
    assert q(decision="fallback") == ids([w[3]])
    assert q(code="boundary.*") == ids([w[1], w[4]])
    assert q(code="inference.labelled") == ids([w[3], w[5]])
    assert q(tool="git_*") == ids([w[4], w[5]])
    assert q(session="s2") == ids([w[6]])
    assert q(text="失眠") == ids([w[6]])
    assert q(text="DOMAIN.SCOPE FAILED") == ids([w[4]])  # check reasons, any case
    assert q(member="lingflow", decision="approved") == ids([w[5]])


def test_time_range_is_half_open_in_utc(log: tuple[Path, list[dict[str, Any]]]) -> None:
    """start <= ts < end; the bounds are instants, so zones only matter when parsing."""
    path, w = log
    start = datetime(2026, 11, 24, tzinfo=UTC)
    end = datetime(2026, 11, 25, 9, tzinfo=UTC)
    assert ids(query_log(path, Query(start=start, end=end))) == ids([w[2]])


def test_tail_keeps_the_last_n_in_order(log: tuple[Path, list[dict[str, Any]]]) -> None:
    """tail returns the last N matches, oldest first; limit stops query early."""
    path, w = log
    assert ids(tail_log(path, Query(), 2)) == ids(w[-2:])
    assert ids(tail_log(path, Query(member="lingzhi"), 1)) == ids([w[6]])
    assert ids(query_log(path, Query(), limit=3)) == ids(w[:3])


def test_appeals_match_through_their_subject(log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Appeal records are found by the appealed verification's member and codes."""
    path, w = log
    appeal = file_appeal(path, w[1]["id"], "not medical", by="alice")
    found = ids(query_log(path, Query(kind="appeal", member="lingzhi", code="boundary.*")))
    assert found == [appeal["id"]]
    assert ids(query_log(path, Query(kind="appeal", member="lingyi"))) == []
    assert appeal["id"] in ids(query_log(path, Query(kind="all", text="not medical")))


def test_unreadable_lines_are_counted(log: tuple[Path, list[dict[str, Any]]]) -> None:
    """A torn line is skipped but counted, so the CLI can say so."""
    path, w = log
    with path.open("ab") as handle:
        handle.write(b'{"torn":')
    skipped = Skipped()
    assert len(list(query_log(path, Query(), skipped=skipped))) == len(w)
    assert skipped.count == 1 and "torn" in skipped.first[0]


def test_human_line_shows_local_time(log: tuple[Path, list[dict[str, Any]]]) -> None:
    """Human output: local time, verdict, member, type, tool, failed codes, reason, id."""
    line = format_human(log[1][1], ZoneInfo("Asia/Shanghai"))
    assert line.startswith("2026-11-23 19:00:00+08:00  REJECTED  lingzhi      fact")
    assert "search_knowledge  boundary.medical  blocked" in line
    assert line.endswith(f"[{log[1][1]['id']}]")


def test_cli_query_jsonl_and_tail(log: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    """`log query --json` prints the records as JSONL; `log tail -n` the last ones; local
    days of --since/--until are taken in --tz."""
    path, w = log
    base = ["--config", write_config(tmp_path), "--log", path, "log"]
    done = run_lingyi(*base, "query", "--decision", "rejected", "--json")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [w[1], w[2], w[4]]
    tail = run_lingyi(*base, "tail", "-n", "2", "--tz", "UTC").stdout.splitlines()
    assert len(tail) == 2 and tail[0].startswith("2026-11-29 23:59:59+00:00  APPROVED")
    day = ["--since", "2026-11-24", "--until", "2026-11-24", "--tz", "Asia/Shanghai"]
    assert len(run_lingyi(*base, "query", *day).stdout.splitlines()) == 1  # R3: 17:00 local


def test_tail_and_query_never_show_a_secret_an_older_record_holds(
    log: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """A record written before redaction covered a format (here appended raw, as an older
    version or another tool would) is shown with markers, in both formats; ids stay."""
    path, _ = log
    old = vrec(
        "2026-11-30T08:00:00.000Z", content="deploy with ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    )
    old["id"], old["tool_call"] = (
        "old-1",
        {
            "name": "git_push",
            "arguments": {"password": "hunter2-correct-horse"},
        },
    )
    last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    old |= {"prev": last["hash"], "seq": last["seq"] + 1}  # chained, as an older writer did
    old["hash"] = record_hash(old)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(old, ensure_ascii=False) + "\n")
    base = ["--config", write_config(tmp_path), "--log", path, "log"]
    for args in (("tail", "-n", "1"), ("tail", "-n", "1", "--json"), ("query", "--json")):
        out = run_lingyi(*base, *args).stdout
        assert "ghp_0123456789" not in out and "hunter2" not in out, args
        assert "old-1" in out, args
        assert "[REDACTED:" in out or "--json" not in args, args  # the human line has no text


def test_cli_reports_skipped_lines_on_stderr(
    log: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Unreadable lines are never silently dropped: stderr says how many and where."""
    path, _ = log
    with path.open("ab") as handle:
        handle.write(b"garbage\n")
    done = run_lingyi("--log", path, "--config", write_config(tmp_path), "log", "tail")
    assert done.returncode == 0, done.stderr
    assert "skipped 1 unreadable line(s) (line 8: not JSON" in done.stderr


def test_tail_names_every_line_the_index_passed_over(
    log: tuple[Path, list[dict[str, Any]]],
) -> None:
    """tail gives the last N matches, oldest first; every damaged line of the log (the
    index read them all, once) is named by its line number."""
    path, w = log
    rows = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join([rows[0], "early garbage\n", *rows[1:5], "late garbage\n",
                             *rows[5:]]), encoding="utf-8")  # fmt: skip
    garbage = (
        "not JSON (an interrupted write, or corrupted): Expecting value: line 1 column 1 (char 0)"
    )
    for query, expected in ((Query(), w[-2:]), (Query(member="lingflow"), w[4:6])):
        skipped = Skipped()
        assert ids(tail_log(path, query, 2, skipped=skipped)) == ids(expected)
        assert (skipped.count, skipped.first) == (2, [f"line 2: {garbage}", f"line 7: {garbage}"])
