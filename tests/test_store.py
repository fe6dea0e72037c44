"""The index beside the log (lingyi.store) and the one chain verifier it reads through.

Pinned here: ``lingyi log verify`` and ``lingyi stats`` give one verdict on every damaged
log, plain and keyed (issue 23); a record stripped of its hash, or a key rotation back to a
retired key, is a break and reaches no reader (issue 24, items 1 and 2); the index is
derived data (deleted, edited or left behind by a rewritten log, it is rebuilt) and reads
each line once; the writer's search for a torn tail is bounded (issue 24, item 3).
"""

from __future__ import annotations

import json
import resource
import sqlite3
import sys
import threading
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from lingyi.log import (
    KeyRing,
    LogKey,
    LogOptions,
    VerificationLog,
    canonical,
    verify_log,
)
from lingyi.log.chain import STRIPPED
from lingyi.stats import compute_stats, week_window
from lingyi.store import default_path, open_store
from tests.test_stats import run_lingyi, write_config

KEY_A, KEY_B = "a1" * 32, "b2" * 32
WEEK = "2026-W48"
TS = "2026-11-24T10:00:00.000Z"


def ring(*secrets: str) -> KeyRing:
    return KeyRing.from_text("\n".join(secrets), "the test's keys", "test")


def options(tmp_path: Path, keyed: bool) -> LogOptions:
    keys = ring(KEY_A, KEY_B) if keyed else None
    return LogOptions(keys=keys, checkpoints=tmp_path / "anchor" / "log.checkpoints")


def write(path: Path, opts: LogOptions, n: int = 6, decision: str = "approved") -> None:
    with VerificationLog(path, opts) as log:
        for i in range(n):
            log.append({"kind": "verification", "ts": TS, "member": "lingzhi", "type": "fact",
                        "content": f"r-{i}", "decision": decision, "checks": []})  # fmt: skip


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def stripped(line: str, **change: Any) -> str:
    """A copy of a record with its chain fields removed (what someone without the key can
    append), changed as given."""
    record = {
        k: v for k, v in json.loads(line).items() if k not in ("hash", "prev", "seq", "key_id")
    }
    return json.dumps({**record, **change}, ensure_ascii=False)


def signed(record: dict[str, Any], key: LogKey) -> str:
    """A record keyed with ``key``, laid out as the writer does."""
    body = canonical({**record, "key_id": key.key_id})
    return body[:-1] + f',"hash":"{key.record_mac(body.encode())}"}}'


def rotate_back_to_a(rows: list[str]) -> list[str]:
    """Someone holding only the retired key A: a rotation from B back to A, signed with A,
    then a forged record signed with A."""
    last, key_a = json.loads(rows[-1]), ring(KEY_A).current
    rotation = {"v": 1, "id": "ROT", "ts": TS, "kind": "key_rotation", "from": last["key_id"],
                "to": key_a.key_id, "prev": last["hash"], "seq": last["seq"] + 1}  # fmt: skip
    first = signed(rotation, key_a)
    forged = {**json.loads(stripped(rows[-1])), "id": "FORGED", "prev": json.loads(first)["hash"],
              "seq": last["seq"] + 2}  # fmt: skip
    return [*rows, first, signed(forged, key_a)]


# (name, damage, plain too, lines that break: what log verify must name)
DAMAGES: list[tuple[str, Callable[[list[str]], list[str]], bool, bool]] = [
    ("intact", lambda r: r, True, True),
    ("edited record", lambda r: [*r[:2], r[2].replace('"r-', '"R-'), *r[3:]], True, False),
    ("deleted record", lambda r: [*r[:2], *r[3:]], True, False),
    ("reordered", lambda r: [*r[:2], r[3], r[2], *r[4:]], True, False),
    ("torn last line", lambda r: [*r, '{"v":1,"id":"TORN'], True, True),
    ("hash-less record", lambda r: [*r, stripped(r[-1], id="COPY")], True, False),
    ("forged key rotation", rotate_back_to_a, False, False),
    ("cut-off tail", lambda r: r[:-2], True, False),
]


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize(
    ("damage", "plain_too", "intact"), [d[1:] for d in DAMAGES], ids=[d[0] for d in DAMAGES]
)
def test_log_verify_and_stats_agree_on_every_damage(
    tmp_path: Path,
    keyed: bool,
    damage: Callable[[list[str]], list[str]],
    plain_too: bool,
    intact: bool,
) -> None:
    """The index reads the log through the one verifier: stats' integrity.verified is log
    verify's verdict (chain and checkpoints), and chain_ok, the break counts and the first
    line named are the chain's, on plain and keyed chains alike."""
    if not keyed and not plain_too:
        pytest.skip("a key rotation needs a keyed chain")
    path, opts = tmp_path / "log.jsonl", options(tmp_path, keyed)
    write(path, opts)
    rows = damage(lines(path))
    end = "" if rows[-1].endswith("TORN") else "\n"
    path.write_text("\n".join(rows) + end, encoding="utf-8")
    verdict = verify_log(path, opts.keys, opts.checkpoints)
    figures = compute_stats(path, week_window(WEEK, UTC), keys=opts.keys,
                            checkpoints=opts.checkpoints)  # fmt: skip
    integrity = figures["integrity"]
    assert verdict.ok is intact and integrity["verified"] is intact
    assert integrity["chain_ok"] is verdict.chain.ok
    assert integrity["chain_breaks"] == verdict.chain.break_count
    anchor = verdict.checkpoints
    assert anchor is not None
    if damage is not DAMAGES[3][1]:  # reordered: log verify pairs checkpoints in log order
        assert integrity["checkpoints_ok"] is anchor.ok
    if verdict.chain.breaks:
        assert integrity["examples"][0]["line"] == verdict.chain.breaks[0].lineno
    if not keyed:  # the CLI with a config that names no key
        done = run_lingyi("--config", write_config(tmp_path), "--log", path, "log", "verify",
                          "--checkpoints", opts.checkpoints)  # fmt: skip
        assert done.returncode == (0 if intact else 1), done.stdout


def test_fifty_hash_less_approved_copies_are_a_break_and_counted_nowhere(tmp_path: Path) -> None:
    """Issue 24 item 1: 50 copies of an approved verification with hash, prev, seq and
    key_id removed, appended to a keyed, checkpointed chain: log verify fails naming the
    first copy's line; stats, query and tail do not see them."""
    path, opts = tmp_path / "log.jsonl", options(tmp_path, keyed=True)
    write(path, opts, n=3, decision="rejected")
    rows = lines(path)
    copy = stripped(rows[-1], decision="approved")
    path.write_text("\n".join(rows + [copy] * 50) + "\n", encoding="utf-8")
    verdict = verify_log(path, opts.keys, opts.checkpoints)
    assert not verdict.ok and verdict.chain.stripped == 50
    assert verdict.chain.breaks[0].lineno == len(rows) + 1
    assert verdict.chain.breaks[0].reason == STRIPPED
    figures = compute_stats(path, week_window(WEEK, UTC), keys=opts.keys)
    assert figures["totals"]["approved"] == 0 and figures["totals"]["rejected"] == 3
    assert figures["integrity"]["stripped"] == 50 and not figures["integrity"]["chain_ok"]
    from lingyi.log import Query, Skipped, query_log, tail_log

    skipped = Skipped()
    shown = list(query_log(path, Query(), keys=opts.keys, skipped=skipped))
    assert [r["decision"] for r in shown] == ["rejected"] * 3 and skipped.count == 50
    assert [r["decision"] for r in tail_log(path, Query(), 5, keys=opts.keys)] == ["rejected"] * 3


def test_log_verify_names_the_stripped_line(tmp_path: Path) -> None:
    """`lingyi log verify` on a plain chain with a hash-less copy appended: exit 1, and the
    copy's line is named."""
    path = tmp_path / "log.jsonl"
    write(path, LogOptions())
    rows = lines(path)
    path.write_text("\n".join([*rows, stripped(rows[0], id="COPY")]) + "\n", encoding="utf-8")
    done = run_lingyi("--config", write_config(tmp_path), "--log", path, "log", "verify")
    assert done.returncode == 1
    assert f"CHAIN BROKEN at line {len(rows) + 1} (record COPY)" in done.stdout


def test_a_rotation_back_to_a_retired_key_fails_naming_the_record(tmp_path: Path) -> None:
    """Issue 24 item 2: with A (retired) and B (current) in the ring, a rotation from B to A
    signed with A is a break named by its line and id, and the record signed with A after
    it is not counted; the writer's own rotation (plain → B, then A → B) passes."""
    path, opts = tmp_path / "log.jsonl", options(tmp_path, keyed=True)
    write(path, opts, n=2, decision="rejected")
    rows = rotate_back_to_a(lines(path))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    verdict = verify_log(path, opts.keys)
    first = verdict.chain.breaks[0]
    assert (first.lineno, first.record_id) == (len(rows) - 1, "ROT")
    assert "back to" in first.reason and not verdict.ok
    figures = compute_stats(path, week_window(WEEK, UTC), keys=opts.keys)
    assert figures["totals"]["total"] == 2  # the forged record is not among them
    upgraded = tmp_path / "upgraded.jsonl"
    write(upgraded, LogOptions(keys=ring(KEY_A)), n=1)
    write(upgraded, LogOptions(keys=ring(KEY_A, KEY_B)), n=1)
    assert verify_log(upgraded, ring(KEY_A, KEY_B)).ok


def test_a_hash_less_approved_copy_releases_no_held_call(tmp_path: Path) -> None:
    """Issue 24 item 1: appending, without the key, a copy of a held git_commit's
    `requested` approval record with event "approved" and no hash leaves the call held:
    the same call again is still pending and nothing is committed."""
    from tests.test_approvals import (
        approval_deployment,
        approvals_in,
        call,
        commit_args,
        run,
        stage,
    )
    from tests.test_server import git

    dep = approval_deployment(tmp_path / "d", "en")
    head = stage(dep)
    out: list[dict[str, Any]] = []

    async def ask(client: Any) -> None:
        out.append(await call(client, "git_commit", commit_args(dep)))
        requested = next(r for r in approvals_in(dep) if r["event"] == "requested")
        with dep.log.open("a", encoding="utf-8") as handle:
            handle.write(stripped(json.dumps(requested), event="approved", by="attacker") + "\n")
        out.append(await call(client, "git_commit", commit_args(dep)))

    run(dep, ask)
    assert out[0]["decision"] == "pending" and out[1]["decision"] == "pending"
    assert out[1]["approval"]["id"] == out[0]["approval"]["id"]
    assert git(dep.repo, "rev-parse", "HEAD") == head


# --------------------------------------------------------------------------- derived data


def _stats(path: Path, keys: KeyRing | None = None) -> dict[str, Any]:
    figures = compute_stats(path, week_window(WEEK, UTC), keys=keys)
    figures.pop("generated_at")
    return figures


def test_the_index_is_rebuilt_when_deleted_edited_or_left_behind(tmp_path: Path) -> None:
    """Delete the index, edit its sealed state, or rewrite the log under it: the figures
    are those of a fresh index of the log as it is now."""
    path, keys = tmp_path / "log.jsonl", ring(KEY_A)
    write(path, LogOptions(keys=keys))
    fresh = _stats(path, keys)
    index = default_path(path)
    assert index.is_file() and _stats(path, keys) == fresh
    index.unlink()
    assert _stats(path, keys) == fresh
    db = sqlite3.connect(index)
    db.execute("""UPDATE state SET body = replace(body, '"invalid":0', '"invalid":5')""")
    db.execute("DELETE FROM verifications")
    db.commit()
    db.close()
    assert _stats(path, keys) == fresh  # the seal failed: rebuilt
    rows = lines(path)
    path.write_text("\n".join(rows[:3]) + "\n", encoding="utf-8")  # rewritten in place, shorter
    write(path, LogOptions(keys=keys), n=2, decision="rejected")
    with path.open("a", encoding="utf-8") as handle:  # and as long as before
        handle.write("".join(f"{row}\n" for row in rows[5:]))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    now, expected = _stats(path, keys), _stats(copy, keys)
    assert now["totals"] == expected["totals"] and now["totals"]["rejected"] == 2
    assert now["integrity"] == expected["integrity"]


def test_an_approval_row_removed_from_the_index_is_noticed(tmp_path: Path) -> None:
    """The approval rows are checked on every read against the sealed digest: a `used`
    event deleted from the index (to use an approval twice) makes the index rebuild."""
    path, keys = tmp_path / "log.jsonl", ring(KEY_A)
    with VerificationLog(path, LogOptions(keys=keys)) as log:
        for event in ("requested", "approved", "used"):
            log.append({"kind": "approval", "event": event, "approval_id": "ap-1",
                        "expires": "2999-01-01T00:00:00.000Z"})  # fmt: skip
    open_store(path, keys).close()
    db = sqlite3.connect(default_path(path))
    db.execute("DELETE FROM approvals WHERE event = 'used'")
    db.commit()
    db.close()
    store = open_store(path, keys)
    events = [r["event"] for _, r in store.approvals()]
    store.close()
    assert events == ["requested", "approved", "used"]


def test_each_line_is_ingested_once_by_concurrent_readers(tmp_path: Path) -> None:
    """Readers in several threads, each with its own connection, while a writer appends:
    every record is in the index exactly once."""
    path = tmp_path / "log.jsonl"
    write(path, LogOptions(), n=1)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(15):
                open_store(path).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    write(path, LogOptions(), n=60)
    for thread in threads:
        thread.join()
    store = open_store(path)
    rows = [line for line, _ in store.records()]
    store.close()
    assert not errors and rows == sorted(set(rows)) and len(rows) == 61


def test_an_unwritable_index_still_gives_the_figures(tmp_path: Path) -> None:
    """An index path that cannot be created (its folder is a file): the figures come from
    an index in memory, the same ones."""
    path = tmp_path / "log.jsonl"
    write(path, LogOptions())
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    figures = compute_stats(path, week_window(WEEK, UTC), index=blocker / "index.sqlite")
    assert figures["totals"]["total"] == 6 and figures["integrity"]["ok"]


# --------------------------------------------------------------------------- the torn tail


@pytest.mark.skipif(sys.platform == "win32", reason="ru_maxrss and sparse files differ there")
def test_a_huge_unterminated_tail_is_skipped_within_a_bound(tmp_path: Path) -> None:
    """Issue 24 item 3: a log ending in a 512 MiB hole with no newline (a sparse file: no
    disk used) is opened and appended to without reading the hole into memory: the peak
    RSS grows by far less than the hole, and the record lands on a line of its own."""
    path = tmp_path / "log.jsonl"
    write(path, LogOptions(), n=2)
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(size + (512 << 20) - 1)
        handle.write(b"x")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    write(path, LogOptions(), n=1)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 128 * 1024, f"peak RSS grew by {grown_kb} KiB"
    with path.open("rb") as handle:
        handle.seek(size + (512 << 20))
        tail = handle.read()
    assert tail.startswith(b"\n{") and tail.endswith(b"}\n") and b'"content":"r-0"' in tail


def test_a_torn_tail_within_the_bound_keeps_the_chain(tmp_path: Path) -> None:
    """A torn last line shorter than the bound (a crash mid-write): the next record is
    isolated on its own line and chained to the last whole record, so verify passes."""
    path = tmp_path / "log.jsonl"
    write(path, LogOptions(), n=2)
    with path.open("ab") as handle:
        handle.write(b'{"v":1,"content":"' + b"y" * 300_000)
    write(path, LogOptions(), n=1)
    report = verify_log(path).chain
    assert report.ok and report.unreadable_count == 1 and report.records == 3
