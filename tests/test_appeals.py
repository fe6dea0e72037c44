"""Appeals: recorded and resolved as appended records, with clear refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lingyi.appeals import (
    AlreadyResolvedError,
    AppealError,
    AppealOpenError,
    NoOpenAppealError,
    NotAVerificationError,
    UnknownRecordError,
    file_appeal,
    list_appeals,
    resolve_appeal,
)
from lingyi.cli import main
from lingyi.vlog import verify_chain
from tests.test_stats import R2, R3, R5, write_config, write_log


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, list[str]]:
    """A log with three blocked verifications; returns the path and their ids."""
    path = tmp_path / "log.jsonl"
    return path, [r["id"] for r in write_log(path, [R2, R3, R5])]


def test_appeal_is_appended_with_a_snapshot(logged: tuple[Path, list[str]]) -> None:
    """An appeal is a new record naming the verification and copying what stats need."""
    path, ids = logged
    before = path.read_bytes()
    record = file_appeal(path, ids[0], "fault diagnosis is not medical", by="alice")
    assert path.read_bytes().startswith(before)  # append-only
    assert record["kind"] == "appeal" and record["appeal_of"] == ids[0]
    assert record["by"] == "alice" and record["reason"] == "fault diagnosis is not medical"
    assert record["subject"] == {
        "ts": R2["ts"], "member": "lingzhi", "type": "fact", "decision": "rejected",
        "session": "s1", "tool": "search_knowledge", "codes": ["boundary.medical"],
    }  # fmt: skip
    assert verify_chain(path).ok


def test_resolve_by_appeal_id_or_verification_id(logged: tuple[Path, list[str]]) -> None:
    """`appeal resolve` takes either id and records the outcome, note and reviewer."""
    path, ids = logged
    first = file_appeal(path, ids[0], "r1", by="a")
    second = file_appeal(path, ids[1], "r2", by="a")
    by_appeal = resolve_appeal(path, first["id"], "overturned", "not medical", by="bob")
    by_verification = resolve_appeal(path, ids[1], "upheld", "no such message", by="bob")
    assert (by_appeal["appeal_id"], by_appeal["appeal_of"]) == (first["id"], ids[0])
    assert by_appeal["outcome"] == "overturned" and by_appeal["note"] == "not medical"
    assert (by_verification["appeal_id"], by_verification["outcome"]) == (second["id"], "upheld")
    assert by_verification["subject"]["member"] == "lingyi"
    statuses = {row["appeal_of"]: row["status"] for row in list_appeals(path)}
    assert statuses == {ids[0]: "overturned", ids[1]: "upheld"}
    assert verify_chain(path).ok


def test_unknown_id_is_refused(logged: tuple[Path, list[str]]) -> None:
    """Appealing or resolving an id that is not in the log is an error, and writes nothing."""
    path, _ = logged
    size = path.stat().st_size
    with pytest.raises(UnknownRecordError, match="no record with id NOPE"):
        file_appeal(path, "NOPE", "reason")
    with pytest.raises(UnknownRecordError):
        resolve_appeal(path, "NOPE", "upheld", "n")
    assert path.stat().st_size == size


def test_appeal_of_a_non_verification_is_refused(logged: tuple[Path, list[str]]) -> None:
    """An appeal cannot itself be appealed."""
    path, ids = logged
    appeal = file_appeal(path, ids[0], "r")
    with pytest.raises(NotAVerificationError, match="only verifications can be appealed"):
        file_appeal(path, appeal["id"], "appeal of an appeal")


def test_second_open_appeal_is_refused_until_resolved(logged: tuple[Path, list[str]]) -> None:
    """One open appeal per verification; after the decision a new appeal may be filed."""
    path, ids = logged
    first = file_appeal(path, ids[0], "r")
    with pytest.raises(AppealOpenError, match=first["id"]):
        file_appeal(path, ids[0], "again")
    resolve_appeal(path, ids[0], "upheld", "n")
    again = file_appeal(path, ids[0], "new evidence")
    assert [row["status"] for row in list_appeals(path)] == ["upheld", "open"]
    assert list_appeals(path, open_only=True)[0]["id"] == again["id"]


def test_resolving_twice_or_without_appeal_is_refused(logged: tuple[Path, list[str]]) -> None:
    """A resolution is final; a verification without an appeal has nothing to resolve."""
    path, ids = logged
    appeal = file_appeal(path, ids[0], "r")
    resolve_appeal(path, appeal["id"], "overturned", "n")
    with pytest.raises(AlreadyResolvedError, match="already resolved: overturned"):
        resolve_appeal(path, appeal["id"], "upheld", "n")
    with pytest.raises(AlreadyResolvedError):
        resolve_appeal(path, ids[0], "upheld", "n")
    with pytest.raises(NoOpenAppealError, match="has no appeal"):
        resolve_appeal(path, ids[1], "upheld", "n")
    with pytest.raises(AppealError, match="outcome must be"):
        resolve_appeal(path, ids[1], "maybe", "n")
    with pytest.raises(AppealError, match="needs a reason"):
        file_appeal(path, ids[1], "  ")


def _cli(tmp_path: Path, path: Path, *args: str) -> int:
    return main(["--config", str(write_config(tmp_path)), "--log", str(path), *args])


def test_cli_appeal_flow(logged: tuple[Path, list[str]], tmp_path: Path, capsys: Any) -> None:
    """`lingyi appeal ID --reason`, `appeal resolve ID --overturn --note`, `appeal list`."""
    path, ids = logged
    assert _cli(tmp_path, path, "appeal", ids[0], "--reason", "fine", "--by", "alice") == 0
    assert f"recorded against {ids[0]}" in capsys.readouterr().out
    assert _cli(tmp_path, path, "appeal", "resolve", ids[0], "--overturn", "--note", "ok") == 0
    assert "overturned" in capsys.readouterr().out
    assert _cli(tmp_path, path, "appeal", "list", "--json") == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["appeal_of"], r["status"], r["by"]) for r in rows] == [
        (ids[0], "overturned", "alice")
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("appeal", "NOPE", "--reason", "r"), "no record with id NOPE"),
        (("appeal", "{v0}", "--reason", "r"), "already has an open appeal"),
        (("appeal", "resolve", "{v0}", "--note", "n"), "needs --uphold or --overturn"),
        (("appeal", "resolve", "{v0}", "--uphold"), "needs --note"),
        (("appeal", "resolve", "{v1}", "--uphold", "--note", "n"), "has no appeal"),
        (("appeal", "{v1}"), "needs --reason"),
    ],
)
def test_cli_appeal_errors_exit_2(
    logged: tuple[Path, list[str]], tmp_path: Path, capsys: Any, args: tuple[str, ...], message: str
) -> None:
    """Every refusal is one clear line on stderr and exit code 2 (bad input)."""
    path, ids = logged
    file_appeal(path, ids[0], "open one")
    capsys.readouterr()
    filled = [a.format(v0=ids[0], v1=ids[1]) for a in args]
    assert _cli(tmp_path, path, *filled) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("lingyi: error: ") and message in captured.err
    assert captured.out == ""
