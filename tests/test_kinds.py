"""Kinds of input (conclusions, answers) go through the one layer and add their outputs.

A kind builds the assertion from its input (type = the kind, payload = the structure), the
layer verifies it like any assertion, and the kind's outputs after the decision are printed
by replay beside the contract's fields and kept in the log record with the payload. The
built-in kinds are registered by their packages; here a stand-in answers under a name of its
own so the hook itself is pinned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lingyi import kinds
from lingyi.cli import main
from lingyi.ledger import SessionLedger
from lingyi.log import read_log
from lingyi.models import Assertion, AssertionType, VerificationResult
from tests.conftest import ROOT


class Counting:
    """Answers: counts attempts per question in the session, and says so."""

    name = "answer"

    def assertion(self, given: dict[str, Any]) -> Assertion:
        if not isinstance(given.get("answer"), str):
            raise ValueError("answer: a text is required")
        payload = {"question": given.get("question", ""), "answer": given["answer"]}
        return Assertion(
            id=given.get("id"),
            member=given["member"],
            type=AssertionType.ANSWER,
            content=given["answer"],
            session=given.get("session", "default"),
            payload=payload,
        )

    def finish(
        self, assertion: Assertion, result: VerificationResult, session: SessionLedger
    ) -> dict[str, Any]:
        key = f"attempts:{assertion.payload['question']}"
        session.state[key] = session.state.get(key, 0) + 1
        return {"attempt": session.state[key], "sources": []}


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds.kind_names()  # the built-in kinds first, so the stand-in replaces, not precedes
    monkeypatch.setitem(kinds._KINDS, "answer", Counting())


def test_a_kind_event_is_verified_and_its_outputs_printed_and_logged(
    counting: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two answers to one question: attempts counted in the session, outputs in the output
    line and in the log with the payload; content checks still run on the answer's text."""
    events = [
        {"event": "answer", "id": "q-1", "session": "s", "member": "lingzhi", "question": "气功?", "answer": "气功源流见知识库"},
        {"event": "answer", "id": "q-2", "session": "s", "member": "lingzhi", "question": "气功?", "answer": "失眠吃什么药好"},
    ]  # fmt: skip
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in events) + "\n")
    log = tmp_path / "log.jsonl"
    main(["--log", str(log), "replay", str(transcript)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["attempt"], r["sources"]) for r in rows] == [("q-1", 1, []), ("q-2", 2, [])]
    assert rows[1]["decision"] == "rejected"  # medical advice, whatever the kind
    records = [line.record for line in read_log(log) if line.record]
    assert records[0]["type"] == "answer" and records[0]["outputs"]["attempt"] == 1
    assert records[0]["payload"]["question"] == "气功?"


def test_a_structured_type_is_not_accepted_as_a_plain_assertion(
    counting: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`"type": "answer"` inside an assertion event is refused: the kind's own event builds it."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"event": "assertion", "member": "lingzhi", "type": "answer", "content": "x"})
        + "\n"
    )
    code = main(["--log", str(tmp_path / "l.jsonl"), "replay", str(transcript)])
    assert code == 2 and "is an event of its own" in capsys.readouterr().err


def test_verify_reads_a_kind_from_stdin(
    counting: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`lingyi verify --stdin` takes a kind in the shape of its event, with "type" naming it."""
    given = {"type": "answer", "member": "lingzhi", "question": "q", "answer": "气功源流见知识库"}
    monkeypatch.setattr("sys.stdin", _Stdin(json.dumps(given, ensure_ascii=False)))
    code = main(
        [
            "--config",
            str(ROOT / "config" / "lingyi.toml"),
            "--log",
            str(tmp_path / "l.jsonl"),
            "verify",
            "--stdin",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["attempt"] == 1


class _Stdin:
    def __init__(self, text: str) -> None:
        self.text = text

    def read(self) -> str:
        return self.text
