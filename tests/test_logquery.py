"""`lingyi log tail` / `log query`: filters, order, output formats, unreadable lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lingyi.appeals import file_appeal
from lingyi.cli import main
from lingyi.logquery import Query, Skipped, format_human, query_log, tail_log
from tests.test_stats import R1, R2, R3, R4, R5, R6, vrec, write_config, write_log


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


def test_cli_query_jsonl_and_tail(
    log: tuple[Path, list[dict[str, Any]]], tmp_path: Path, capsys: Any
) -> None:
    """`log query --json` prints the records as JSONL; `log tail -n` the last ones."""
    path, w = log
    base = ["--config", str(write_config(tmp_path)), "--log", str(path), "log"]
    assert main([*base, "query", "--decision", "rejected", "--json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [w[1], w[2], w[4]]
    assert main([*base, "tail", "-n", "2", "--tz", "UTC"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("2026-11-29 23:59:59+00:00  APPROVED")
    args = [
        *base,
        "query",
        "--since",
        "2026-11-24",
        "--until",
        "2026-11-24",
        "--tz",
        "Asia/Shanghai",
    ]
    assert main(args) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # only R3 (17:00 local on 11-24)


def test_cli_reports_skipped_lines_on_stderr(
    log: tuple[Path, list[dict[str, Any]]], tmp_path: Path, capsys: Any
) -> None:
    """Unreadable lines are never silently dropped: stderr says how many and where."""
    path, _ = log
    with path.open("ab") as handle:
        handle.write(b"garbage\n")
    assert main(["--log", str(path), "--config", str(write_config(tmp_path)), "log", "tail"]) == 0
    err = capsys.readouterr().err
    assert "skipped 1 unreadable line(s) (line 8: not JSON" in err
