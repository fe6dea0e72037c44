"""The fast paths of ``lingyi stats --full`` give exactly what the plain paths give.

Each hostile line below is crafted as a forger would (its hash recomputed over its own
bytes) and sits among valid records, outside the periods asked for (where lines are
verified without being parsed) or inside them (where they are parsed): the fast path must
count and report it exactly as the line-by-line pass does, whatever it tries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lingyi.log import GENESIS, KeyRing, LogOptions, VerificationLog, canonical, verify_chain
from lingyi.log.chain import ChainVerifier, tail_match
from lingyi.log.reader import decode_line, raw_lines
from lingyi.stats import StatsView, compute_stats, week_window
from lingyi.stats.aggregate import WindowsPass
from lingyi.stats.scanloop import feed_range
from tests.test_stats import UTC_ZONE, vrec, write_log

OUTSIDE = "2026-11-02T10:00:00.000Z"  # W45: before both periods
INSIDE = "2026-11-24T10:00:00.000Z"  # W48: the period asked for
WINDOWS = [week_window("2026-W48", UTC_ZONE), week_window("2026-W47", UTC_ZONE)]
Forge = Callable[[str, str], bytes]  # (prev, ts) -> the line


def _line(text: str, hashed: str | None = None, end: str = "\n") -> bytes:
    """``text`` (a record's JSON without its hash) laid out as the writer does, with the
    sha256 of ``hashed`` (default: of ``text`` itself, as a forger recomputes it)."""
    digest = hashlib.sha256((hashed or text).encode()).hexdigest()
    return (text[:-1] + f',"hash":"{digest}"}}{end}').encode()


def _body(prev: str, ts: str, **change: Any) -> dict[str, Any]:
    return {**vrec(ts), "v": 1, "id": "forged", "prev": prev, **change}


def _text(prev: str, ts: str, **change: Any) -> str:
    return canonical(_body(prev, ts, **change))


def _nested(prev: str, ts: str, key: str, value: str, top: str | None = None) -> bytes:
    """A line whose tool arguments hold ``key``; ``top`` replaces the record's own link."""
    call = {"name": "search_knowledge", "arguments": {key: value}}
    return _line(_text(top or prev, ts, tool_call=call))


def _capital_hash(line: bytes) -> bytes:
    return line[:-67] + line[-67:-3].upper() + line[-3:]


HOSTILE: list[tuple[str, Forge]] = [
    ("as written", lambda p, ts: _line(_text(p, ts))),
    ("wrong link", lambda p, ts: _line(_text("1" * 64, ts))),
    ("wrong link, right one nested", lambda p, ts: _nested(p, ts, "prev", p, "1" * 64)),
    ("wrong link, right one nested before it",  # "fallback" sorts before "prev"
     lambda p, ts: _line(_text("1" * 64, ts, fallback={"prev": p}))),
    ("right link, a wrong one nested", lambda p, ts: _nested(p, ts, "prev", "1" * 64)),
    ("prev twice", lambda p, ts: _line(_text(p, ts).replace('"prev":', f'"prev":"{"1" * 64}","prev":'))),
    ("an appeal", lambda p, ts: _line(_text(p, ts, kind="appeal", appeal_of="x"))),
    ("an appeal, a verification nested before it",
     lambda p, ts: _line(_text(p, ts, kind="appeal", appeal_of="x", fallback={"kind": "verification"}))),
    ("an appeal nested", lambda p, ts: _nested(p, ts, "kind", "appeal")),
    ("kind twice", lambda p, ts: _line(_text(p, ts).replace('"kind":', '"kind":"appeal","kind":'))),
    ("a key rotation, not keyed", lambda p, ts: _line(_text(p, ts, kind="key_rotation", to="k" * 16))),
    ("another kind", lambda p, ts: _line(_text(p, ts, kind="future_kind"))),
    ("key_id nested", lambda p, ts: _nested(p, ts, "key_id", "k" * 16)),
    ("key_id of its own", lambda p, ts: _line(_text(p, ts, key_id="k" * 16))),
    ("edited after hashing", lambda p, ts: _line(_text(p, ts, decision="rejected"), _text(p, ts))),
    ("hash in capitals", lambda p, ts: _capital_hash(_line(_text(p, ts)))),
    ("schema from the future", lambda p, ts: _line(_text(p, ts, v=2))),
    ("timestamp not ASCII", lambda p, ts: _line(_text(p, ts[:21] + "éZ"))),
    ("timestamp of another layout", lambda p, ts: _line(_text(p, ts[:19] + "+00:00"))),
    ("CRLF", lambda p, ts: _line(_text(p, ts), end="\r\n")),
    ("no newline (torn)", lambda p, ts: _line(_text(p, ts))[:-40]),
    ("not JSON", lambda p, ts: b"not json at all\n"),
    ("an empty line", lambda p, ts: b"\n"),
    ("a JSON array", lambda p, ts: b"[1, 2]\n"),
    ("a hash of a lone surrogate", lambda p, ts: _line(_text(p, ts))[:-67] + b'\\ud800"}\n'),
    ("prev escaped, right one nested",
     lambda p, ts: _nested(p, ts, "prev", p, "1" * 64).replace(b'"prev":"1', b'"pr\\u0065v":"1')),
]  # fmt: skip


def _hash_of(line: bytes) -> str:
    try:
        value = json.loads(line).get("hash")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) and value.isascii() else ""


def _log(path: Path, forge: Forge, ts: str) -> None:
    """Valid records before, the hostile line, then valid records chained to it."""
    written = write_log(path, [vrec(OUTSIDE), vrec(INSIDE), vrec(OUTSIDE)])
    line = forge(written[-1]["hash"], ts)
    with path.open("ab") as handle:
        handle.write(line)
    prev = _hash_of(line) or written[-1]["hash"]
    after = [_line(_text(prev, t)) for t in (OUTSIDE, INSIDE)]
    after.append(_line(_text(_hash_of(after[0]), OUTSIDE)))
    with path.open("ab") as handle:
        handle.write(b"".join(after))
    write_log(path, [vrec(OUTSIDE), vrec(INSIDE)])


def _line_by_line(path: Path, start: int, prev: str | None) -> tuple[WindowsPass, int]:
    """The reference: every line through ``WindowsPass.feed_raw``, as before the hot loop."""
    found, lines = WindowsPass(WINDOWS, None, prev), 0
    for lines, _, raw in raw_lines(path, start):
        if raw.strip():
            found.feed_raw(lines, raw)
    found.settle()
    return found, lines


def _hot_loop(path: Path, start: int, prev: str | None) -> tuple[WindowsPass, int]:
    found = WindowsPass(WINDOWS, None, prev)
    with path.open("rb") as handle:
        handle.seek(start)
        lines = feed_range(found, handle, start, None)
    found.settle()
    return found, lines


def _state(found: WindowsPass, lines: int) -> dict[str, Any]:
    chain = found.chain
    figures = [StatsView(agg).as_json() for agg in found.aggregators]
    for f in figures:
        f.pop("generated_at")
    return {
        "lines": lines,
        "chain": (chain.prev, chain.key_id, chain.seq, chain.last, chain.first_link),
        "report": chain.report.as_json(),
        "figures": figures,
        "pending appeals": [agg.pending_subjects for agg in found.aggregators],
    }


@pytest.mark.parametrize("ts", [OUTSIDE, INSIDE], ids=["outside", "inside"])
@pytest.mark.parametrize("forge", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_the_hot_loop_counts_every_hostile_line_as_feeding_it_does(
    tmp_path: Path, forge: Forge, ts: str
) -> None:
    """A hostile line outside or inside the periods, among valid ones: the hot loop gives
    the line-by-line pass's chain, report and figures, from the start and from mid-log."""
    path = tmp_path / "log.jsonl"
    _log(path, forge, ts)
    assert _state(*_hot_loop(path, 0, GENESIS)) == _state(*_line_by_line(path, 0, GENESIS))
    middle = len(path.read_bytes().splitlines(keepends=True)[0])
    assert _state(*_hot_loop(path, middle, None)) == _state(*_line_by_line(path, middle, None))


CAUGHT = {
    "wrong link": "relinked",
    "wrong link, right one nested": "relinked",
    "edited after hashing": "edited",
    "hash in capitals": "edited",
    "a hash of a lone surrogate": "edited",  # and the next line, which cannot link to it
}


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_a_damaged_line_outside_the_periods_is_reported_as_log_verify_does(
    tmp_path: Path, name: str
) -> None:
    """The lines that break the chain are breaks of the hot loop's report, as in log verify."""
    path = tmp_path / "log.jsonl"
    _log(path, dict(HOSTILE)[name], OUTSIDE)
    report = _hot_loop(path, 0, GENESIS)[0].chain.report
    assert getattr(report, CAUGHT[name]) >= 1
    assert report.break_count == verify_chain(path).break_count


def test_stats_full_survives_a_hash_no_line_can_link_to(tmp_path: Path) -> None:
    """A forged "hash" of a lone surrogate (json reads it, UTF-8 cannot hold it) is reported
    by stats --full as log verify reports it; it used to crash the pass (the next line's
    link was encoded to be looked for)."""
    path = tmp_path / "log.jsonl"
    _log(path, dict(HOSTILE)["a hash of a lone surrogate"], OUTSIDE)
    got = compute_stats(path, WINDOWS[0], rollup=False)["integrity"]
    assert got["chain_breaks"] == verify_chain(path).break_count >= 1


def test_the_hot_loop_stops_where_the_next_range_starts(tmp_path: Path) -> None:
    """``end``: the lines that start before it, no more; progress up to the bytes read."""
    path = tmp_path / "log.jsonl"
    write_log(path, [vrec(OUTSIDE) for _ in range(30)])
    lines = path.read_bytes().splitlines(keepends=True)
    end = sum(map(len, lines[:12])) - 5  # inside line 12: it starts before end
    done: list[int] = []
    with path.open("rb") as handle:
        found = WindowsPass(WINDOWS, None, GENESIS)
        assert feed_range(found, handle, 0, end, done.append, every=1000) == 12
    assert found.chain.report.records == 12 and found.skimmed == 12
    assert done and done[-1] <= sum(map(len, lines[:12])) and done == sorted(done)


def _chain(chain: ChainVerifier) -> tuple[Any, ...]:
    return (chain.prev, chain.key_id, chain.seq, chain.last, chain.first_link, chain.report)


def _keyed_log(path: Path, forge: Forge, ts: str) -> None:
    """A keyed log (its rotation record first), then the hostile line chained to it."""
    ring = KeyRing.from_text("c3" * 32, "test", "test")
    with VerificationLog(path, LogOptions(keys=ring)) as vlog:
        written = [vlog.append(vrec(t)) for t in (OUTSIDE, INSIDE)]
    with path.open("ab") as handle:
        handle.write(forge(written[-1]["hash"], ts))


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize("start", [0, 1], ids=["from the start", "mid-log"])
@pytest.mark.parametrize("forge", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_the_exact_check_of_a_written_line_is_feeds(
    tmp_path: Path, forge: Forge, start: int, keyed: bool
) -> None:
    """feed_written (a parsed line with its writer's tail) finds what feed finds, the same
    problem for every line, and leaves the chain as feed does (link, key, seq, counts)."""
    path = tmp_path / "log.jsonl"
    (_keyed_log if keyed else _log)(path, forge, INSIDE)
    ring = KeyRing.from_text("c3" * 32, "test", "test") if keyed else None
    exact = ChainVerifier(GENESIS if start == 0 else None, ring)
    fast = ChainVerifier(GENESIS if start == 0 else None, ring)
    for lineno, _, raw in raw_lines(path):
        if lineno > start and raw.strip():
            line = decode_line(lineno, raw)
            assert fast.feed_written(line, tail_match(raw)) == exact.feed(line)
            assert _chain(fast) == _chain(exact)
    assert fast.finish() == exact.finish() and _chain(fast) == _chain(exact)
