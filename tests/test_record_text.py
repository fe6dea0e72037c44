"""The text the chain hashes is json.dumps's, byte for byte, whoever writes it.

:func:`lingyi.log.canonical` writes a record with orjson where orjson writes what
``json.dumps(sort_keys, ensure_ascii=False, no spaces)`` writes, and with json elsewhere: every
log written so far holds json's text, and a verifier recomputes hashes from it. Pinned over
the records of the shipped example transcripts and over the values where the two differ.
"""

from __future__ import annotations

import enum
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from lingyi.config import load_config
from lingyi.council import MemoryCouncil
from lingyi.guard import Guard
from lingyi.log import canonical, read_log
from lingyi.replay import Replayer

ROOT = Path(__file__).resolve().parent.parent
SETS = ("council-*.jsonl", "incident-*.jsonl", "eval/*.jsonl", "holdout*/*.jsonl")


def json_text(record: Any) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def example_records(log: Path) -> list[dict[str, Any]]:
    """The verification records of the example transcripts, replayed into ``log``."""
    config = load_config(ROOT / "config" / "lingyi.toml", log=log)
    for pattern in SETS:
        for path in sorted((ROOT / "examples").glob(pattern)):
            guard = Guard.from_config(config, source="test", council=MemoryCouncil())
            lines = path.read_text(encoding="utf-8").splitlines()
            for _ in Replayer(guard).run(lines):
                pass
            guard.close()
    return [line.record for line in read_log(log) if line.record is not None]


def test_example_records_are_written_as_json_writes_them(tmp_path: Path) -> None:
    """Every record of the example transcripts: the canonical text is json.dumps's, and it is
    the text of the line the writer appended (less its hash)."""
    records = example_records(tmp_path / "log.jsonl")
    assert len(records) > 1000
    for record in records:
        body = {k: v for k, v in record.items() if k != "hash"}
        assert canonical(body) == json_text(body)
    lines = (tmp_path / "log.jsonl").read_text(encoding="utf-8").splitlines()
    written = [line[: line.rindex(',"hash":')] + "}" for line in lines]
    assert written == [json_text({k: v for k, v in r.items() if k != "hash"}) for r in records]


class Colour(enum.Enum):
    RED = "red"


class Code(enum.StrEnum):
    OK = "ok"


SAME = [  # values where orjson and json agree, or json is used
    pytest.param({"x": 1e-05}, id="small float, json writes 1e-05"),
    pytest.param({"x": 4.2e-07, "y": [0.00001234]}, id="small floats in a list"),
    pytest.param({"x": 5e-324}, id="smallest float"),
    pytest.param({"x": 0.0001, "y": 1e16, "z": 1.5e300, "w": -0.0}, id="large and edge floats"),
    pytest.param({"x": float("nan")}, id="NaN: orjson writes null"),
    pytest.param({"x": [float("inf"), float("-inf")]}, id="infinities"),
    pytest.param({"x": 2**64, "y": -(2**63) - 1}, id="integers beyond 64 bits"),
    pytest.param({"x": 2**63, "y": 2**64 - 1}, id="integers at 64 bits"),
    pytest.param({"b": {"d": 1, "c": [1, {"z": None, "a": True}]}, "a": ""}, id="nested keys"),
    pytest.param({"灵通": "说", "é": "\u2028\x00\x1f\x7f\ufeff😀", "\uffff": 1}, id="text"),
    pytest.param({"x": (1, 2)}, id="a tuple"),
    pytest.param({"x": Code.OK}, id="a str enum"),
    pytest.param({"x": "ratio:0.00001 and 3e-5 as text"}, id="text that looks like a float"),
    pytest.param({1: "a", 3: "b"}, id="keys that are not strings"),
]


@pytest.mark.parametrize("record", SAME)
def test_canonical_is_json_text(record: dict[str, Any]) -> None:
    """Where orjson would write another text (or refuse), the text is still json's."""
    assert canonical(record) == json_text(record)


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({"x": Colour.RED}, id="an enum"),
        pytest.param({"x": uuid.UUID(int=1)}, id="a UUID"),
        pytest.param({"x": object()}, id="an object"),
    ],
)
def test_what_json_refuses_is_refused(record: dict[str, Any]) -> None:
    """A value json cannot write is an error, as before: orjson writing it would be a text no
    earlier verifier made."""
    with pytest.raises(TypeError):
        canonical(record)


def test_lone_surrogate_is_written_as_json_writes_it() -> None:
    """A lone surrogate (which orjson refuses) gets json's text; UTF-8 then refuses it."""
    assert canonical({"x": "\ud800"}) == json_text({"x": "\ud800"})
