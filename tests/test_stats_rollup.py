"""The rollup beside the log: the same figures as a full pass, on clean and damaged logs alike.

Every test compares the figures from the rollup (``rollup=True``, what ``lingyi stats``
uses) with those of the windowed pass over the whole log (``lingyi stats --full``), whole
JSON against whole JSON, and checks what the rollup read: only what was appended since, or
everything again when the log no longer matches it. Real logs written by the real writer,
damaged as a crash, an editor or an attacker would; nothing is mocked but a failing disk.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from lingyi.log import KeyRing, LogOptions, VerificationLog, file_appeal, resolve_appeal
from lingyi.stats import (
    LatencyHistogram,
    Window,
    compute_stats,
    range_window,
    resolve_zone,
    rollup_path,
    store,
    week_window,
)
from lingyi.stats import builder as builder_module
from lingyi.stats import rollup as rollup_module
from lingyi.stats.days import ZoneDays
from tests.test_stats import (
    BERLIN,
    LOS_ANGELES,
    R1,
    R2,
    R3,
    R5,
    SHANGHAI,
    UTC_ZONE,
    WEEK,
    _messy_log,
    _rewrite_line,
    run_lingyi,
    vrec,
    write_config,
    write_log,
)

KOLKATA = "Asia/Kolkata"  # a half-hour zone: its days do not start on a UTC hour
KEY_A, KEY_B = "a1" * 32, "b2" * 32


def stats(path: Path, window: Window, *, rollup: bool, **kw: Any) -> dict[str, Any]:
    result = compute_stats(path, window, rollup=rollup, workers=1, **kw)
    result.pop("generated_at")
    return result


def agree(path: Path, window: Window | None = None, **kw: Any) -> dict[str, Any]:
    """The rollup's figures, after checking they are the full pass's, field by field."""
    window = window or week_window("2026-W48", UTC_ZONE)
    rolled, full = stats(path, window, rollup=True, **kw), stats(path, window, rollup=False, **kw)
    for key in full:
        assert rolled[key] == full[key], key
    assert rolled == full
    return rolled


class Reads:
    """Counts the lines the rollup builder parses (what stats really read)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines: list[int] = []
        real = builder_module.RollupBuilder.feed_raw

        def spy(builder: Any, lineno: int, raw: bytes) -> None:
            self.lines.append(lineno)
            real(builder, lineno, raw)

        monkeypatch.setattr(builder_module.RollupBuilder, "feed_raw", spy)

    def take(self) -> list[int]:
        taken, self.lines = self.lines, []
        return taken


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    return Reads(monkeypatch)


def _week_with_appeals(path: Path) -> None:
    written = write_log(path, WEEK)
    ids = [r["id"] for r in written]
    file_appeal(path, ids[2], "the question was about fault diagnosis", by="alice")
    resolve_appeal(path, ids[2], "overturned", "not medical", by="bob")
    appeal5 = file_appeal(path, ids[5], "push was fine", by="alice")
    resolve_appeal(path, appeal5["id"], "upheld", "outside the roots", by="bob")
    file_appeal(path, ids[3], "LingFlow did say so", by="carol")
    with VerificationLog(path) as vlog:  # another tool's appeal, without a snapshot
        vlog.append({"kind": "appeal", "appeal_of": ids[1], "reason": "r", "by": "x"})
        vlog.append({"kind": "appeal", "appeal_of": "no-such-id", "reason": "r", "by": "x"})


# --------------------------------------------------------------------------- figures


@pytest.mark.parametrize("zone", ["UTC", "Asia/Shanghai", "America/Los_Angeles", KOLKATA])
@pytest.mark.parametrize("member", [None, "lingzhi", "lingyi", "nobody"])
def test_rollup_agrees_with_the_full_pass(tmp_path: Path, zone: str, member: str | None) -> None:
    """Every figure, per member and in zones whose days start at any hour, as --full gives."""
    path = tmp_path / "log.jsonl"
    _week_with_appeals(path)
    for week in ("2026-W47", "2026-W48", "2026-W49"):
        agree(path, week_window(week, _zone(zone)), member=member)
    s = agree(path, week_window("2026-W48", _zone(zone)))
    assert s["appeals"]["filed"] >= 3 and s["integrity"]["invalid"] == 1  # the unknown id


def _zone(name: str) -> Any:
    return resolve_zone(name)


def test_rollup_agrees_on_a_damaged_log(tmp_path: Path) -> None:
    """A garbage line, an edited and a deleted record, in several zones and for one member."""
    path = tmp_path / "log.jsonl"
    _messy_log(path)
    for zone in (UTC_ZONE, SHANGHAI, LOS_ANGELES, BERLIN):
        for member in (None, "灵通", "edited"):
            s = agree(path, week_window("2026-W48", zone), member=member)
    i = s["integrity"]
    assert (i["edited"], i["relinked"], i["unreadable"]) == (1, 1, 1)


DAMAGES: dict[str, Callable[[Path], None]] = {}


def damage(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    DAMAGES[fn.__name__] = fn
    return fn


@damage
def torn_last_line(path: Path) -> None:
    with path.open("ab") as handle:
        handle.write(b'{"kind":"verification","decision":"appr')


@damage
def garbage_between(path: Path) -> None:
    with path.open("ab") as handle:
        handle.write(b"not json at all\n\n[1, 2]\n")
    write_log(path, [R3])


@damage
def edited_decision(path: Path) -> None:
    _rewrite_line(path, 1, {"decision": "approved"})


@damage
def deleted_record(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:2] + lines[3:]), encoding="utf-8")


@damage
def reordered(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    path.write_text("".join(lines), encoding="utf-8")


@damage
def older_schema(path: Path) -> None:
    old = {
        "ts": "2026-11-24T10:00:00+00:00", "member": "lingzhi", "type": "fact",
        "decision": "rejected", "reason": "old", "latency_ms": 5,
        "checks": [{"code": "boundary.medical", "passed": False}],
    }  # fmt: skip
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(old) + "\n")
    write_log(path, [R3])


@damage
def odd_records(path: Path) -> None:
    """Records another tool could write: odd members, values and timestamps."""
    write_log(
        path,
        [
            {**R1, "v": 99},
            {**R2, "decision": "maybe"},
            {**R3, "ts": "yesterday"},
            {**R1, "member": None, "latency_ms": "12"},
            {**R1, "member": "None", "latency_ms": 1e308},
            {**R2, "member": 7, "tool_call": {"name": None}},
            {**R1, "ts": "2026-11-25TAA:00:00.000Z"},  # the writer's length: compared as text
            {**R1, "ts": "2026-11-26T10:00:00"},  # no zone: UTC
            {**R1, "ts": "0000-01-01T00:00:00.000Z"},
            {**R2, "checks": "none", "reason": 5},
            {"kind": "future_kind", "ts": "2026-11-24T10:00:00.000Z"},
        ],
    )


@damage
def lookalike_keys(path: Path) -> None:
    """Nested "prev", "kind", "key_id" and "ts" keys, and a timestamp of the writer's length
    that is not ASCII, in and before the week: the fast paths must not take them for the
    record's own."""
    nested = {"prev": "0" * 64, "kind": "appeal", "key_id": "k" * 16,
              "ts": "2026-11-24T10:00:00.000Z"}  # fmt: skip
    write_log(
        path,
        [
            {**R1, "tool_call": {"name": "search_knowledge", "arguments": nested}},
            {
                **R2,
                "ts": "2026-11-02T10:00:00.000Z",
                "tool_call": {"name": "x", "arguments": nested},
            },
            {**R1, "ts": "2026-11-24T10:00:00.0éZ"},
            {**R3, "ts": "2026-11-03T10:00:00.0éZ"},
        ],
    )


@damage
def appeal_with_bad_subject(path: Path) -> None:
    with VerificationLog(path) as vlog:
        vlog.append(
            {"kind": "appeal", "appeal_of": "x", "reason": "r", "by": "x",
             "subject": {"ts": "nonsense", "member": "lingzhi"}}
        )  # fmt: skip
        vlog.append(
            {"kind": "appeal_resolution", "appeal_of": "y", "appeal_id": None,
             "outcome": "overturned", "note": "n", "by": "y",
             "subject": {"ts": "2026-11-24T09:00:00.000Z", "member": None, "codes": ["a", "a"],
                         "decision": "approved"}}
        )  # fmt: skip


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_rollup_agrees_after_each_damage(tmp_path: Path, name: str, reads: Reads) -> None:
    """Built before the damage and brought up to date after it, or built after: as --full."""
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    for path in (before, after):
        _week_with_appeals(path)
    agree(before)
    for path in (before, after):
        DAMAGES[name](path)
        for member in (None, "lingzhi", "None"):
            agree(path, member=member)
            agree(path, week_window("2026-W48", _zone(KOLKATA)), member=member)
        write_log(path, [R5])  # the writer carries on after the damage
        agree(path)
    assert reads.take()


def test_keyed_log_with_a_rotation(tmp_path: Path) -> None:
    """A keyed chain (MACs checked) rotated to a new key agrees; without the key it differs
    in what can be checked, and the rollup made with the key is not used without it."""
    path = tmp_path / "log.jsonl"
    ring_a = KeyRing.from_text(KEY_A, "test", "test")
    ring_ab = KeyRing.from_text(f"{KEY_A}\n{KEY_B}", "test", "test")
    with VerificationLog(path, LogOptions(keys=ring_a)) as vlog:
        for record in WEEK[:4]:
            vlog.append(record)
    s = agree(path, keys=ring_a)
    with VerificationLog(path, LogOptions(keys=ring_ab)) as vlog:
        for record in WEEK[4:]:
            vlog.append(record)
    s = agree(path, keys=ring_ab)
    assert s["integrity"]["chain_ok"] and s["integrity"]["other_kinds"] == {"key_rotation": 2}
    unkeyed = agree(path)
    assert unkeyed["totals"] == s["totals"]
    _rewrite_line(path, 3, {"decision": "approved"})
    assert not agree(path, keys=ring_ab)["integrity"]["chain_ok"]


# --------------------------------------------------------------------------- reading less


def test_only_what_was_appended_is_read(tmp_path: Path, reads: Reads) -> None:
    """Once the rollup exists, stats parse only the lines appended since it was saved."""
    path = tmp_path / "log.jsonl"
    _week_with_appeals(path)
    lines = len(path.read_bytes().splitlines())
    agree(path)
    assert reads.take() == list(range(1, lines + 1))
    agree(path)
    assert reads.take() == []
    write_log(path, [R1, R2])
    agree(path, member="lingzhi")
    assert reads.take() == [lines + 1, lines + 2]
    position = json.loads(rollup_path(path).read_bytes().split(b"\n")[1])["position"]
    last = json.loads(path.read_bytes().splitlines()[-1])
    assert (position["seq"], position["hash"]) == (last["seq"], last["hash"])
    assert position["offset"] == path.stat().st_size and position["lines"] == lines + 2


def test_a_torn_last_line_is_counted_but_not_kept(tmp_path: Path, reads: Reads) -> None:
    """A torn last line is in the figures, but the rollup stops before it: the writer will
    isolate it on its own line, and then it reads as a different problem."""
    path = tmp_path / "log.jsonl"
    write_log(path, [R1, R2])
    size = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b'{"kind":"verif')
    s = agree(path)
    assert s["integrity"]["unreadable"] == 1 and "torn" in s["integrity"]["examples"][0]["problem"]
    position = json.loads(rollup_path(path).read_bytes().split(b"\n")[1])["position"]
    assert position["offset"] == size
    reads.take()
    write_log(path, [R3])
    s = agree(path)
    assert reads.take()[0] == 3  # the torn line, read again now that it is whole
    assert (
        s["integrity"]["unreadable"] == 1 and "not JSON" in s["integrity"]["examples"][0]["problem"]
    )


REWRITES: dict[str, Callable[[Path], None]] = {
    "cut": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "emptied": lambda p: p.write_bytes(b""),
    "replaced": lambda p: (p.unlink(), write_log(p, [R2, R2, R2, R2, R2, R2, R2, R2, R3])),
    "edited_in_the_middle": lambda p: _rewrite_line(p, 2, {"member": "someone else"}),
    "last_record_rewritten": lambda p: _rewrite_line(p, -1, {"reason": "rewritten"}),
    "rotated_away": lambda p: (p.rename(p.with_suffix(".1")), write_log(p, [R1])),
}


@pytest.mark.parametrize("name", sorted(REWRITES))
def test_a_log_that_changed_under_the_rollup_is_read_again(
    tmp_path: Path, name: str, reads: Reads
) -> None:
    """Cut, emptied, replaced, rotated, or edited where a line grows or the last record is:
    the rollup no longer matches the log at its position and is rebuilt from line 1."""
    path = tmp_path / "log.jsonl"
    _week_with_appeals(path)
    agree(path)
    reads.take()
    REWRITES[name](path)
    agree(path)
    read = reads.take()
    assert read == [] if path.stat().st_size == 0 else read[0] == 1


def test_a_damaged_or_forged_rollup_is_not_used(tmp_path: Path, reads: Reads) -> None:
    """An edited rollup fails its seal; with a keyed log, one resealed without the key too."""
    path = tmp_path / "log.jsonl"
    ring = KeyRing.from_text(KEY_A, "test", "test")
    with VerificationLog(path, LogOptions(keys=ring)) as vlog:
        for record in WEEK:
            vlog.append(record)
    real = agree(path, keys=ring)
    target = rollup_path(path)
    seal, body = target.read_bytes().split(b"\n", 1)
    forged_body = body.replace(b'"totals":[1,', b'"totals":[9,', 1)
    assert forged_body != body
    for forged in (
        seal + b"\n" + forged_body,
        store._seal(forged_body, None) + forged_body,  # resealed by someone without the key
        b"garbage",
    ):
        target.write_bytes(forged)
        reads.take()
        assert agree(path, keys=ring) == real
        assert reads.take()[0] == 1


# --------------------------------------------------------------------------- zones, windows


def test_zones_are_kept_side_by_side_and_the_oldest_dropped(tmp_path: Path, reads: Reads) -> None:
    """Each zone asked for gets its days (once); beyond four, the one used least recently
    is dropped and rebuilt when it is asked for again."""
    path = tmp_path / "log.jsonl"
    _week_with_appeals(path)
    names = ["UTC", "Asia/Shanghai", KOLKATA, "America/Los_Angeles", "Europe/Berlin"]
    for name in names:
        agree(path, week_window("2026-W48", _zone(name)))
    reads.take()
    for name in names[1:]:
        agree(path, week_window("2026-W48", _zone(name)))
    assert reads.take() == []
    header = json.loads(rollup_path(path).read_bytes().split(b"\n")[1])
    assert [z for z, _ in header["zones"]] == [*reversed(names[1:])]
    agree(path, week_window("2026-W48", UTC_ZONE))
    assert reads.take()[0] == 1


def test_days_across_a_dst_change(tmp_path: Path) -> None:
    """Berlin's W43 of 2026 has a 25-hour Sunday: its records are in the right days."""
    path = tmp_path / "log.jsonl"
    # Saturday 23:30 CEST, Sunday 23:30 CET (25 hours later), Monday 00:30 CET
    times = ["2026-10-24T21:30:00.000Z", "2026-10-25T22:30:00.000Z", "2026-10-25T23:30:00.000Z"]
    write_log(path, [vrec(ts) for ts in times])
    s = agree(path, week_window("2026-W43", BERLIN))
    assert [d["total"] for d in s["by_day"]][-2:] == [1, 1]
    assert agree(path, week_window("2026-W44", BERLIN))["totals"]["total"] == 1


def test_windows_not_made_of_whole_days_take_the_full_pass(tmp_path: Path) -> None:
    """A window cut at another time of day is counted by the full pass, rightly."""
    path = tmp_path / "log.jsonl"
    write_log(path, WEEK)
    window = range_window("2026-11-23T10:30:00", "2026-11-26T09:00:00", UTC_ZONE)
    s = agree(path, window)
    assert s["totals"]["total"] == 3 and not rollup_path(path).exists()


def test_no_rollup_without_a_log_or_for_a_bare_offset(tmp_path: Path) -> None:
    """A log not written yet gets no rollup; nor does a zone that is only an offset (it
    could not be found again by name): both are counted by the full pass."""
    missing = tmp_path / "none.jsonl"
    assert agree(missing)["totals"]["total"] == 0 and not rollup_path(missing).exists()
    path = tmp_path / "log.jsonl"
    write_log(path, WEEK)
    nepal = timezone(timedelta(hours=5, minutes=45))
    assert agree(path, week_window("2026-W48", nepal))["totals"]["total"] == 6
    assert not rollup_path(path).exists()


def test_day_of_a_timestamp_is_found_as_a_window_compares() -> None:
    """Days are found by comparing keys as text, as a window does: odd keys included."""
    zone = ZoneDays(KOLKATA, _zone(KOLKATA))
    assert zone.day_name("2026-11-23T18:29:59.999Z") == "2026-11-23"
    assert zone.day_name("2026-11-23T18:30:00.000Z") == "2026-11-24"
    assert zone.day_name("2026-11-23TZZ:00:00.000Z") == "2026-11-24"  # 'Z' > '1'
    assert zone.day_name("2026-13-45T00:00:00.000Z") == "2027-01-01"  # after 12-31T18:30Z
    assert zone.day_name("0000-01-01T00:00:00.000Z") is None
    assert zone.day_name("9999-12-31T23:00:00.000Z") == "9999-12-31"


def test_a_rollup_that_cannot_be_saved_still_gives_the_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: Reads
) -> None:
    """A full disk or a read-only directory: right figures, no rollup, a warning; a reader
    who may not write uses a rollup that exists, without saving it."""
    path = tmp_path / "log.jsonl"
    write_log(path, WEEK)
    real_write, real_writable = store._write_atomically, rollup_module._writable

    def refuse(target: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "_write_atomically", refuse)
    agree(path)
    assert not rollup_path(path).exists()
    monkeypatch.setattr(rollup_module, "_writable", lambda p: False)
    reads.take()
    agree(path)
    assert reads.take() == []  # the full pass, not a rollup built to be thrown away
    monkeypatch.setattr(store, "_write_atomically", real_write)
    monkeypatch.setattr(rollup_module, "_writable", real_writable)
    agree(path)  # a rollup, now that it can be saved
    saved = rollup_path(path).read_bytes()
    write_log(path, [R1])
    monkeypatch.setattr(rollup_module, "_writable", lambda p: False)
    reads.lines = []
    agree(path)
    assert len(reads.take()) == 1 and rollup_path(path).read_bytes() == saved


def test_histograms_merged_in_any_order_give_the_same_mean() -> None:
    """The sum behind the mean is exact, so days added in any order agree to the digit."""
    values = [0.1, 0.2, 0.3, 1e-3, 12345.678, 0.7] * 50
    forward, backward = LatencyHistogram(), LatencyHistogram()
    parts = [LatencyHistogram() for _ in range(7)]
    for i, v in enumerate(values):
        forward.add(v)
        parts[i % 7].add(v)
    for part in reversed(parts):
        backward.merge(part)
    assert forward.summary() == backward.summary()
    state = LatencyHistogram.from_state(json.loads(json.dumps(forward.as_state())))
    assert state.summary() == forward.summary() and state.buckets == forward.buckets


# --------------------------------------------------------------------------- entry points


def test_cli_stats_and_full_agree_and_full_leaves_the_rollup(tmp_path: Path) -> None:
    """`lingyi stats --json` (rollup) and `--full --json` print the same figures; --full
    neither reads nor writes the rollup."""
    path = tmp_path / "log.jsonl"
    now = datetime.now(UTC) - timedelta(minutes=5)
    recent = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    write_log(path, [vrec(recent), vrec(recent, decision="rejected"), R1])
    base = ["--config", write_config(tmp_path), "--log", path, "stats", "--days", "7", "--json"]
    full = run_lingyi(*base, "--full")
    assert full.returncode == 0, full.stderr
    assert not rollup_path(path).exists()
    rolled = run_lingyi(*base)
    assert rolled.returncode == 0, rolled.stderr
    saved = rollup_path(path).read_bytes()
    again = run_lingyi(*base, "--full")
    assert rollup_path(path).read_bytes() == saved
    printed = [json.loads(d.stdout) for d in (full, rolled, again)]
    for s in printed:
        s.pop("generated_at")
    assert printed[0] == printed[1] == printed[2] and printed[0]["totals"]["total"] == 2


def test_parallel_rebuild_gives_the_single_pass_rollup(tmp_path: Path) -> None:
    """A rollup built by worker processes over chunks is the one a single pass builds."""
    path = tmp_path / "log.jsonl"
    _messy_log(path)
    _week_with_appeals(path)
    window = week_window("2026-W48", SHANGHAI)
    many = compute_stats(path, window, rollup=True, workers=3)
    os.unlink(rollup_path(path))
    one = compute_stats(path, window, rollup=True, workers=1)
    full = compute_stats(path, window, workers=1)
    for s in (many, one, full):
        s.pop("generated_at")
    assert many == one == full


def test_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    """Peak memory of stats from the rollup over 20,000 records is about that of 2,000
    (the same members, days and spread of latencies: the rollup holds counters of those)."""
    peaks = []
    for count in (2_000, 20_000):
        path = tmp_path / f"log-{count}.jsonl"
        write_log(
            path,
            [vrec(f"2026-11-2{3 + i % 7}T10:00:00.000Z", latency=i % 997) for i in range(count)],
        )
        window = week_window("2026-W48", UTC_ZONE)
        compute_stats(path, window, workers=1, rollup=True)
        write_log(path, [R1])
        tracemalloc.start()
        compute_stats(path, window, workers=1, rollup=True)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < peaks[0] * 1.5 + 64_000, peaks
