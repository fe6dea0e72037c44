"""An authenticated, anchored log: a rewrite, a deletion and a cut-off tail are all found.

The attacks are the ones that passed `lingyi log verify` before (issue 9): whoever can write
the log flips a rejection to an approval, deletes a record, recomputes every prev/hash; or
keeps the first 40 of 50 records. Each must now fail the guarantee that covers it, and the
legitimate uses (an intact log, a key rotation, a plain log that gets a key, a crash) must
keep passing. Real files, real keys, the real writer and verifier; nothing is mocked.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lingyi.cli import main
from lingyi.errors import ConfigError, LogError
from lingyi.log import (
    GENESIS,
    KeyRing,
    LogOptions,
    VerificationLog,
    canonical,
    read_log,
    record_hash,
    verify_log,
)
from lingyi.stats import compute_stats, week_window
from tests.conftest import SHIPPED_POLICIES

KEY_A = "a1" * 32
KEY_B = "b2" * 32
ATTACKER = "ee" * 32
N = 50  # verification records in each log (after the key_rotation record that starts it)


def keys(*secrets: str) -> KeyRing:
    return KeyRing.from_text("\n".join(secrets), "the test's keys", "test")


def options(tmp_path: Path, *secrets: str, checkpoints: bool = True) -> LogOptions:
    return LogOptions(
        keys=keys(*secrets) if secrets else None,
        checkpoints=tmp_path / "anchor" / "log.checkpoints" if checkpoints else None,
    )


def write(path: Path, n: int, opts: LogOptions, tag: str = "r") -> None:
    with VerificationLog(path, opts) as log:
        for i in range(n):
            decision = "rejected" if i % 5 == 0 else "approved"
            log.append({"kind": "verification", "content": f"{tag}-{i}", "decision": decision})


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def save(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write records as the writer lays them out (sorted keys, hash last)."""
    lines = []
    for row in rows:
        body = {k: v for k, v in row.items() if k != "hash"}
        lines.append(canonical(body)[:-1] + f',"hash":"{row["hash"]}"}}')
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def recompute(rows: list[dict[str, Any]], mac: Callable[[bytes], str] | None = None) -> None:
    """What a forger does: relink every record and recompute every hash (plain, or with a
    key of their own)."""
    prev = GENESIS
    for seq, row in enumerate(rows, start=1):
        row["prev"], row["seq"] = prev, seq
        body = canonical({k: v for k, v in row.items() if k != "hash"}).encode()
        row["hash"] = mac(body) if mac else hashlib.sha256(body).hexdigest()
        prev = row["hash"]


def flip(rows: list[dict[str, Any]]) -> dict[str, Any]:
    target = next(r for r in rows if r.get("decision") == "rejected")
    target["decision"] = "approved"
    return target


# --- the attacks ------------------------------------------------------------------------------


def flip_and_recompute(rows: list[dict[str, Any]], _anchor: Path) -> None:
    flip(rows)
    recompute(rows)


def flip_and_recompute_as_plain(rows: list[dict[str, Any]], _anchor: Path) -> None:
    for row in rows:
        row.pop("key_id", None)
    rows[:] = [r for r in rows if r.get("kind") != "key_rotation"]
    flip(rows)
    recompute(rows)


def delete_and_recompute(rows: list[dict[str, Any]], _anchor: Path) -> None:
    del rows[10]
    recompute(rows)


def keep_first_40(rows: list[dict[str, Any]], _anchor: Path) -> None:
    del rows[41:]  # the rotation record and 40 verifications


def delete_everything(rows: list[dict[str, Any]], _anchor: Path) -> None:
    rows.clear()  # an empty log (or none): the checkpoints still say what was there


def forge_own_key(rows: list[dict[str, Any]], _anchor: Path) -> None:
    """Rotate to a key of the attacker's own, in a record that looks like the writer's."""
    from lingyi.log.keys import LogKey

    mine = LogKey.from_secret(ATTACKER.encode())
    for row in rows:
        row["key_id"] = mine.key_id
    rows[0]["to"] = mine.key_id
    flip(rows)
    recompute(rows, lambda body: mine.record_mac(body))


def edit_in_place(rows: list[dict[str, Any]], _anchor: Path) -> None:
    flip(rows)  # no recomputation: the stored MAC no longer matches


def forge_a_checkpoint(rows: list[dict[str, Any]], anchor: Path) -> None:
    """Cut the tail, then append a checkpoint that claims the cut log is complete."""
    del rows[41:]
    line = {"seq": 41, "hash": rows[-1]["hash"], "ts": "2026-12-01T00:00:00.000Z"}
    line |= {"key_id": rows[-1]["key_id"], "mac": "0" * 64}
    with anchor.open("a", encoding="utf-8") as handle:
        handle.write(canonical(line) + "\n")


def strip_checkpoint_macs(rows: list[dict[str, Any]], anchor: Path) -> None:
    del rows[41:]
    kept = [json.loads(x) for x in anchor.read_text(encoding="utf-8").splitlines()][:40]
    forged = [{k: v for k, v in c.items() if k not in ("mac", "key_id")} for c in kept]
    forged.append({"seq": 41, "hash": rows[-1]["hash"], "ts": "2026-12-01T00:00:00.000Z"})
    anchor.write_text("".join(canonical(c) + "\n" for c in forged), encoding="utf-8")


Attack = Callable[[list[dict[str, Any]], Path], None]
# (name, attack, how each guarantee ends: hash chain, keyed chain, checkpoints)
ATTACKS: list[tuple[str, Attack, tuple[str, str, str]]] = [
    ("flip a rejection, recompute every hash", flip_and_recompute, ("failed", "failed", "failed")),
    ("flip, recompute as a plain chain", flip_and_recompute_as_plain, ("ok", "failed", "failed")),
    ("delete a record, recompute every hash", delete_and_recompute, ("failed", "failed", "failed")),
    ("keep the first 40 of 50", keep_first_40, ("ok", "ok", "failed")),
    ("empty the log", delete_everything, ("ok", "ok", "failed")),
    ("rotate to the attacker's own key", forge_own_key, ("ok", "failed", "failed")),
    ("flip a rejection in place", edit_in_place, ("failed", "failed", "ok")),
    ("cut the tail, forge a checkpoint", forge_a_checkpoint, ("ok", "ok", "failed")),
    ("cut the tail, rewrite unsigned checkpoints", strip_checkpoint_macs, ("ok", "ok", "failed")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("attack", "expected"), [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS]
)
def test_rewrites_deletions_and_cut_tails_are_found(
    tmp_path: Path, attack: Attack, expected: tuple[str, str, str]
) -> None:
    """Each attack on a keyed, checkpointed log fails the guarantee that covers it; `log
    verify` fails and names a bad record or checkpoint."""
    path, opts = tmp_path / "log.jsonl", options(tmp_path, KEY_A)
    write(path, N, opts)
    assert verify_log(path, opts.keys, opts.checkpoints).ok  # before: intact
    rows = records(path)
    assert opts.checkpoints is not None
    attack(rows, opts.checkpoints)
    save(path, rows)
    result = verify_log(path, opts.keys, opts.checkpoints)
    assert tuple(g.status for g in result.guarantees()) == expected
    assert not result.ok


def test_an_intact_keyed_log_passes_every_guarantee(tmp_path: Path) -> None:
    """The legitimate side: the same log untouched passes all three, and says so."""
    path, opts = tmp_path / "log.jsonl", options(tmp_path, KEY_A)
    write(path, N, opts)
    result = verify_log(path, opts.keys, opts.checkpoints)
    assert result.ok and [g.status for g in result.guarantees()] == ["ok"] * 3
    assert result.chain.keyed == N + 1 and result.chain.rotations == 1
    assert result.checkpoints is not None and result.checkpoints.signed == N  # one per append
    first = records(path)[0]
    assert (first["kind"], first["from"], first["to"]) == ("key_rotation", None, first["key_id"])


def test_the_key_never_reaches_the_log_or_the_checkpoints(tmp_path: Path) -> None:
    """The secret, and the keys derived from it, appear in no file the guard writes."""
    path, opts = tmp_path / "log.jsonl", options(tmp_path, KEY_A)
    write(path, 3, opts)
    assert opts.keys is not None and opts.checkpoints is not None
    derived = [opts.keys.current.record_key.hex(), opts.keys.current.checkpoint_key.hex()]
    for text in (path.read_text(encoding="utf-8"), opts.checkpoints.read_text(encoding="utf-8")):
        assert KEY_A not in text and not any(d in text for d in derived)
    assert KEY_A not in repr(opts.keys)


def test_a_plain_log_says_what_it_cannot_guarantee(tmp_path: Path) -> None:
    """Without a key or checkpoints the chain still passes, and the other two guarantees are
    reported as not checked, with what to set."""
    path = tmp_path / "log.jsonl"
    write(path, 5, LogOptions())
    result = verify_log(path)
    assert result.ok
    plain, keyed, anchored = result.guarantees()
    assert plain.status == "ok" and keyed.status == anchored.status == "not checked"
    assert "key_env" in keyed.detail and "checkpoints" in anchored.detail


# --- rotation, upgrade, downgrade ------------------------------------------------------------


def test_a_key_rotation_is_recorded_and_both_keys_verify(tmp_path: Path) -> None:
    """Appending a new key rotates: a key_rotation record links the two keyed stretches, and
    a verifier holding both keys passes the whole log."""
    path = tmp_path / "log.jsonl"
    write(path, 5, options(tmp_path, KEY_A))
    write(path, 5, options(tmp_path, KEY_A, KEY_B))
    rows = records(path)
    rotations = [r for r in rows if r.get("kind") == "key_rotation"]
    assert [(r["from"] is None, r["to"]) for r in rotations] == [
        (True, keys(KEY_A).current.key_id),
        (False, keys(KEY_B).current.key_id),
    ]
    assert rotations[1]["from"] == keys(KEY_A).current.key_id
    opts = options(tmp_path, KEY_A, KEY_B)
    result = verify_log(path, opts.keys, opts.checkpoints)
    assert result.ok and result.chain.rotations == 2 and result.chain.keyed == 12


def test_a_retired_key_must_be_kept_to_verify_its_records(tmp_path: Path) -> None:
    """The other side of rotation: dropping the old key leaves its records unverifiable,
    and verify says which key is missing."""
    path = tmp_path / "log.jsonl"
    write(path, 3, options(tmp_path, KEY_A))
    write(path, 3, options(tmp_path, KEY_A, KEY_B))
    result = verify_log(path, keys(KEY_B))
    assert not result.ok and keys(KEY_A).current.key_id in result.chain.breaks[0].reason


def test_a_record_keyed_with_a_retired_key_after_rotation_is_a_break(tmp_path: Path) -> None:
    """Someone holding a leaked old key cannot append under it once the key was rotated."""
    path = tmp_path / "log.jsonl"
    write(path, 3, options(tmp_path, KEY_A))
    write(path, 3, options(tmp_path, KEY_A, KEY_B))
    rows = records(path)
    old = keys(KEY_A).current
    forged = {**rows[-1], "id": "FORGED", "decision": "approved", "key_id": old.key_id}
    forged["prev"], forged["seq"] = rows[-1]["hash"], rows[-1]["seq"] + 1
    body = canonical({k: v for k, v in forged.items() if k != "hash"}).encode()
    forged["hash"] = old.record_mac(body)
    save(path, [*rows, forged])
    result = verify_log(path, keys(KEY_A, KEY_B))
    assert not result.ok and result.chain.breaks[0].record_id == "FORGED"
    assert "key_rotation" in result.chain.breaks[0].reason


def test_a_plain_log_that_gets_a_key_keeps_its_history(tmp_path: Path) -> None:
    """Configuring a key on an existing log starts the keyed chain after its plain records;
    verify passes and counts the plain records before the first key."""
    path = tmp_path / "log.jsonl"
    write(path, 4, LogOptions())
    write(path, 4, options(tmp_path, KEY_A, checkpoints=False))
    result = verify_log(path, keys(KEY_A))
    assert result.ok and result.chain.plain == 4 and result.chain.keyed == 5
    assert "4 plain record(s) before the first key" in result.guarantees()[1].detail
    assert [r["seq"] for r in records(path)] == list(range(1, 10))


def test_a_keyed_log_refuses_a_writer_without_its_key(tmp_path: Path) -> None:
    """Removing the key from the config would append plain records that read as a rewrite:
    the writer refuses to open, naming the log and the key to set."""
    path = tmp_path / "log.jsonl"
    write(path, 2, options(tmp_path, KEY_A, checkpoints=False))
    with pytest.raises(LogError, match=r"is keyed \(key [0-9a-f]{16}\).*key_env or key_file"):
        VerificationLog(path)
    assert len(records(path)) == 3


@pytest.mark.parametrize("torn", [b'{"v": 1, "id": "x', b'{"kind": "verification", "key_id": "'])
def test_the_key_check_at_open_reads_past_a_torn_tail(tmp_path: Path, torn: bytes) -> None:
    """The check at open reads the tail without the lock (a server's start takes no lock): an
    append in flight (a line not yet whole) is skipped, so a keyed log still refuses a plain
    writer, and a plain log still opens for one."""
    keyed, plain = tmp_path / "keyed.jsonl", tmp_path / "plain.jsonl"
    write(keyed, 2, options(tmp_path, KEY_A, checkpoints=False))
    write(plain, 2, LogOptions())
    for path in (keyed, plain):
        with path.open("ab") as out:
            out.write(torn)
    with pytest.raises(LogError, match=r"is keyed \(key [0-9a-f]{16}\)"):
        VerificationLog(keyed)
    VerificationLog(plain).close()


def test_a_log_rewritten_without_any_key_fails_when_a_key_is_configured(tmp_path: Path) -> None:
    """A log whose every record is plain, checked with a key configured: the last record is
    not keyed, which only a rewrite (or no append since the key was set) explains."""
    path = tmp_path / "log.jsonl"
    write(path, 3, LogOptions())
    result = verify_log(path, keys(KEY_A))
    assert not result.ok and "last record is not keyed" in result.chain.breaks[0].reason


# --- keys from the config ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("log_section", "env", "file_text", "message"),
    [
        ('key_env = "T_KEY"', None, None, "log.key_env: the environment variable T_KEY is not set"),
        ('key_env = "T_KEY"', "short", None, "shorter than 32 characters"),
        ('key_env = "T_KEY"', "   ", None, "holds no key"),
        ('key_file = "missing.key"', None, None, "log.key_file: cannot read"),
        ('key_file = "k.key"', None, "x" * 10, "key 1 in"),
        (
            'key_env = "T_KEY"\nkey_file = "k.key"',
            KEY_A,
            KEY_A,
            "set key_env or key_file, not both",
        ),
        ("max_field_bytes = 10", None, None, "max_field_bytes must be 0 or at least 256"),
    ],
    ids=["unset", "short", "empty", "no-file", "short-in-file", "both", "tiny-limit"],
)
def test_a_key_that_cannot_be_used_is_a_config_error_naming_the_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    log_section: str,
    env: str | None,
    file_text: str | None,
    message: str,
) -> None:
    """Exit 2 with the config file and the key named; nothing is written with a bad key."""
    config = tmp_path / "lingyi.toml"
    paths = f'[paths]\nlog = "v.jsonl"\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n'
    config.write_text(f"{paths}[log]\n{log_section}\n", encoding="utf-8")
    if file_text is not None:
        (tmp_path / "k.key").write_text(file_text, encoding="utf-8")
    if env is None:
        monkeypatch.delenv("T_KEY", raising=False)
    else:
        monkeypatch.setenv("T_KEY", env)
    code = main(["--config", str(config), "verify", "--member", "lingyi", "--content", "hi"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and str(config) in err
    assert not (tmp_path / "v.jsonl").exists() or not (tmp_path / "v.jsonl").read_text()


def test_keys_load_from_a_file_and_rotate_by_appending_a_line(tmp_path: Path) -> None:
    """A key file of two lines: the last signs, the first still verifies (load_keys)."""
    from lingyi.log.keys import load_keys

    key_file = tmp_path / "log.key"
    key_file.write_text(f"{KEY_A}\n{KEY_B}\n", encoding="utf-8")
    ring = load_keys(None, key_file, "cfg")
    assert ring is not None and ring.current.key_id == keys(KEY_B).current.key_id
    assert set(ring.keys) == {keys(KEY_A).current.key_id, keys(KEY_B).current.key_id}
    with pytest.raises(ConfigError, match=r"cfg: log\.key_file"):
        load_keys(None, tmp_path / "nope", "cfg")


# --- the command line --------------------------------------------------------------------------


def deployment(tmp_path: Path, *, checkpoints: bool = True) -> Path:
    config = tmp_path / "lingyi.toml"
    anchor = '\ncheckpoints = "anchor/log.checkpoints"' if checkpoints else ""
    paths = f'[paths]\nlog = "var/log.jsonl"\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n'
    config.write_text(f'{paths}[log]\nkey_env = "LINGYI_TEST_LOG_KEY"{anchor}\n', encoding="utf-8")
    return config


def test_log_verify_reports_each_guarantee_and_the_first_bad_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lingyi log verify` on the config's keyed log: exit 0 and three ✓ when intact; after
    the attacker's rewrite, exit 1 naming the first bad record; --json lists what it checked."""
    monkeypatch.setenv("LINGYI_TEST_LOG_KEY", KEY_A)
    config = deployment(tmp_path)
    for i in range(3):
        main(["--config", str(config), "verify", "--member", "lingyi", "--content", f"ok {i}"])
    capsys.readouterr()
    assert main(["--config", str(config), "log", "verify"]) == 0
    out = capsys.readouterr().out
    assert "chain OK" in out and out.count("✓") == 3 and "keyed chain" in out
    log = tmp_path / "var" / "log.jsonl"
    rows = records(log)
    rows[2]["content"] = "rewritten"
    recompute(rows)
    save(log, rows)
    assert main(["--config", str(config), "log", "verify", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["breaks"][0]["lineno"] == 1 and not report["ok"]
    assert report["checked"] == {
        "hash_chain": True,
        "keyed_chain": True,
        "checkpoints": True,
        "detects": ["edited", "deleted", "reordered", "rewritten", "cut off"],
    }


def test_log_verify_of_another_file_does_not_use_the_configs_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoints belong to the config's log: another FILE is checked without them
    unless --checkpoints names a file, and the output says why."""
    monkeypatch.setenv("LINGYI_TEST_LOG_KEY", KEY_A)
    config = deployment(tmp_path)
    main(["--config", str(config), "verify", "--member", "lingyi", "--content", "ok"])
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((tmp_path / "var" / "log.jsonl").read_bytes())
    capsys.readouterr()
    assert main(["--config", str(config), "log", "verify", str(copy)]) == 0
    assert "checkpoints belong to" in capsys.readouterr().out
    anchor = tmp_path / "anchor" / "log.checkpoints"
    args = ["--config", str(config), "log", "verify", str(copy), "--checkpoints", str(anchor)]
    assert main(args) == 0 and capsys.readouterr().out.count("✓") == 3


def test_a_log_given_by_LINGYI_LOG_writes_no_checkpoints_into_the_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another log's checkpoints in the same file would make both unverifiable."""
    monkeypatch.setenv("LINGYI_TEST_LOG_KEY", KEY_A)
    monkeypatch.setenv("LINGYI_LOG", str(tmp_path / "elsewhere.jsonl"))
    config = deployment(tmp_path)
    main(["--config", str(config), "verify", "--member", "lingyi", "--content", "ok"])
    assert (tmp_path / "elsewhere.jsonl").is_file()
    assert not (tmp_path / "anchor" / "log.checkpoints").exists()


def test_config_show_names_the_key_source_and_id_never_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator sees whether the log is keyed and checkpointed; the key is not printed."""
    monkeypatch.setenv("LINGYI_TEST_LOG_KEY", KEY_A)
    config = deployment(tmp_path)
    assert main(["--config", str(config), "config", "show"]) == 0
    out = capsys.readouterr().out
    assert f"keyed with {keys(KEY_A).current.key_id} from $LINGYI_TEST_LOG_KEY" in out
    assert str(tmp_path / "anchor" / "log.checkpoints") in out and KEY_A not in out
    assert main(["--config", str(config), "config", "show", "--json"]) == 0
    assert KEY_A not in capsys.readouterr().out


def test_stats_and_log_verify_agree_on_a_keyed_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`integrity.chain_ok` is log verify's verdict, keyed records included, on the fast path
    (outside the window) and the exact one, in one process or several chunks."""
    path = tmp_path / "log.jsonl"
    write(path, 20, options(tmp_path, KEY_A, checkpoints=False))
    window = week_window("2026-W48", ZoneInfo("UTC"))
    for edited in (False, True):
        if edited:
            rows = records(path)
            rows[5]["content"] = "edited"
            save(path, rows)
        verdict = verify_log(path, keys(KEY_A)).chain
        got = compute_stats(path, window, keys=keys(KEY_A))["integrity"]
        assert got["chain_ok"] is verdict.ok is (not edited)
        assert got["chain_breaks"] == verdict.break_count


# --- reliability: many writers, and writers killed -------------------------------------------


def _writer(path: Path, anchor: Path, n: int, tag: str) -> None:
    write(path, n, LogOptions(keys=keys(KEY_A), checkpoints=anchor), tag)


def test_processes_never_lose_records_of_a_keyed_checkpointed_log(tmp_path: Path) -> None:
    """Four processes × 150 records, keyed and checkpointed: all arrive, one rotation, every
    checkpoint matches and the last covers the last record."""
    path, anchor = tmp_path / "log.jsonl", tmp_path / "anchor.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, anchor, 150, f"p{p}")) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    result = verify_log(path, keys(KEY_A), anchor)
    assert result.ok, [g.as_json() for g in result.guarantees()]
    assert result.chain.records == 601 and result.chain.rotations == 1
    assert result.checkpoints is not None and result.checkpoints.last_seq == 601
    contents = {line.record.get("content") for line in read_log(path) if line.record}
    assert {f"p{p}-{i}" for p in range(4) for i in range(150)} <= contents


KILLED_WRITER = """
import sys
from pathlib import Path
from lingyi.log import KeyRing, LogOptions, VerificationLog
keys = KeyRing.from_text(sys.argv[3], "test", "test")
with VerificationLog(Path(sys.argv[1]), LogOptions(keys=keys, checkpoints=Path(sys.argv[2]))) as log:
    i = 0
    while True:
        log.append({"kind": "verification", "content": "x" * 3000 + str(i), "decision": "approved"})
        i += 1
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_writers_killed_mid_append_leave_at_most_torn_lines_and_valid_checkpoints(
    tmp_path: Path,
) -> None:
    """kill -9 of three writers at random moments: the log has at most a torn line per kill,
    reported and skipped; the chain, the keys and the checkpoints still verify, and the next
    writer carries on."""
    path, anchor = tmp_path / "log.jsonl", tmp_path / "anchor.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for delay in (0.05, 0.13, 0.21):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, str(path), str(anchor), KEY_A], env=env
        )
        started = path.stat().st_size if path.exists() else 0
        deadline = time.monotonic() + 60
        while (path.stat().st_size if path.exists() else 0) <= started + 10_000:
            assert time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.01)
        time.sleep(delay)  # mid-stream, at a moment the test does not choose precisely
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    write(path, 1, LogOptions(keys=keys(KEY_A), checkpoints=anchor), "after")
    result = verify_log(path, keys(KEY_A), anchor)
    assert result.ok, [g.as_json() for g in result.guarantees()]
    assert result.chain.unreadable_count <= 3 and result.chain.records > 3
    assert result.checkpoints is not None
    assert result.checkpoints.last_seq == result.checkpoints.log_seq


def test_an_old_log_without_seq_is_counted_once_then_numbered(tmp_path: Path) -> None:
    """A log written before records carried seq: the first new record is numbered after
    the hashed records already there, so checkpoints name the right record."""
    path = tmp_path / "log.jsonl"
    write(path, 4, LogOptions())
    rows, prev = records(path), GENESIS
    for row in rows:  # as an older lingyi wrote them: no seq
        del row["seq"]
        row["prev"] = prev
        row["hash"] = prev = record_hash(row)
    save(path, rows)
    anchor = tmp_path / "anchor.jsonl"
    write(path, 2, LogOptions(checkpoints=anchor))
    assert [r.get("seq") for r in records(path)] == [None] * 4 + [5, 6]
    assert verify_log(path, None, anchor).ok
