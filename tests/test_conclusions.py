"""Conclusions everywhere an assertion goes: replay, the CLI, the MCP server, the log, stats.

The route is data on the result: ``passed``; ``revise`` (every violation as feedback) while
this conclusion's revisions in the session are under the policy's maximum; ``final`` once the
maximum is reached, with a hand-over to a person. The count lives in the session.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from mcp import Client

from lingyi.cli import main
from lingyi.conclusions import KIND
from lingyi.log import read_log
from lingyi.report.markdown import render_markdown
from lingyi.stats import compute_stats
from lingyi.stats.window import days_window
from tests.conclusion_kit import TRACE, edited, incident
from tests.conftest import ROOT
from tests.test_server import deploy, verdict, with_client
from tests.test_traces import FOUND, Tempo, serving

CONFIG = str(ROOT / "config" / "lingyi.toml")
TRACE_RESULT = {
    "event": "tool_result", "session": "s1", "member": "lingflow", "tool": "query_traces",
    "arguments": {"service": "checkout"}, "evidence": [{"id": TRACE, "title": "trace checkout"}],
}  # fmt: skip


def _bad(lang: str = "en", cid: str = "c-1", session: str = "s1") -> dict[str, Any]:
    given = edited(lang, lambda g: g["conclusion"].update(confidence="very sure"))
    return {**given, "id": cid, "session": session}


def _config(tmp_path: Path, lang: str) -> str:
    """The checkout's config in ``lang`` (reasons, feedback and the route's message)."""
    path = tmp_path / f"lingyi-{lang}.toml"
    path.write_text(
        f'language = "{lang}"\n[paths]\nvalidators = "{ROOT / "validators"}"\n'
        f'knowledge_base = "{ROOT / "src" / "lingyi" / "defaults" / "kb"}"\n'
        f'council = "{tmp_path / "council.jsonl"}"\n',
        encoding="utf-8",
    )
    return str(path)


def _replay(
    tmp_path: Path, events: list[dict[str, Any]], *flags: str, lang: str = "zh"
) -> tuple[int, list[dict[str, Any]]]:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8"
    )
    out = io.StringIO()
    config = _config(tmp_path, lang)
    code = _run(
        [
            "--config",
            config,
            "--log",
            str(tmp_path / "log.jsonl"),
            "replay",
            *flags,
            str(transcript),
        ],
        out,
    )
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def _run(argv: list[str], out: io.StringIO) -> int:
    import contextlib

    with contextlib.redirect_stdout(out):
        return main(argv)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_revise_twice_then_final_at_a_maximum_of_two(tmp_path: Path, lang: str) -> None:
    """The same conclusion rejected three times: revise, revise, final; the feedback lists
    every violation; final says to hand over. Another id and another session count apart."""
    events = [TRACE_RESULT, *[{"event": "conclusion", **_bad(lang)} for _ in range(3)]]
    events.append({"event": "conclusion", **_bad(lang, cid="c-2")})
    events.append({"event": "conclusion", **_bad(lang, session="s2")})
    _, rows = _replay(tmp_path, events, lang=lang)
    assert [(r["route"], r["revisions"]) for r in rows] == [
        ("revise", 1), ("revise", 2), ("final", 2), ("revise", 1), ("revise", 1),
    ]  # fmt: skip
    assert all(r["max_revisions"] == 2 and r["decision"] == "rejected" for r in rows)
    assert any("conclusion.schema" in line and "very sure" in line for line in rows[0]["feedback"])
    handover = "移交值班工程师" if lang == "zh" else "hand the incident over"
    assert handover in rows[2]["message"] and handover not in rows[1]["message"]


def test_a_new_id_each_time_does_not_revise_forever(tmp_path: Path) -> None:
    """A model that renames its conclusion on every try gets revisions until the session has
    spent eight conclusions' worth (8 × max 2), then final for any id; another session is new."""
    tries = [{"event": "conclusion", **_bad(cid=f"c-{i}")} for i in range(18)]
    events = [TRACE_RESULT, *tries, {"event": "conclusion", **_bad(cid="c-x", session="s2")}]
    _, rows = _replay(tmp_path, events)
    assert [r["route"] for r in rows] == ["revise"] * 16 + ["final", "final", "revise"]


def test_a_revision_that_passes_is_passed(tmp_path: Path) -> None:
    """Rejected once (revise), then corrected under the same id: passed, count kept."""
    events = [
        TRACE_RESULT,
        {"event": "conclusion", **_bad()},
        {"event": "conclusion", **incident()},
    ]
    _, rows = _replay(tmp_path, events)
    assert [(r["route"], r["decision"]) for r in rows] == [
        ("revise", "rejected"),
        ("passed", "approved"),
    ]
    assert rows[1]["revisions"] == 1 and "feedback" not in rows[1]


def test_replay_check_compares_routes_and_decisions(tmp_path: Path) -> None:
    """``expect`` names a decision or a route; a mismatch of either is reported (exit 1)."""
    ok = [TRACE_RESULT, {"event": "conclusion", **incident(), "expect": "passed"}]
    assert _replay(tmp_path, ok, "--check")[0] == 0
    wrong = [TRACE_RESULT, {"event": "conclusion", **_bad(), "expect": "final"},
             {"event": "conclusion", **_bad(cid="c-9"), "expect": "rejected"}]  # fmt: skip
    assert _replay(tmp_path, wrong, "--check")[0] == 1


def test_conclusions_are_logged_with_their_payload_and_route(tmp_path: Path) -> None:
    """Records of type conclusion keep the input and the route (outputs) in the chain."""
    _replay(tmp_path, [TRACE_RESULT, {"event": "conclusion", **_bad()}])
    record = next(line.record for line in read_log(tmp_path / "log.jsonl") if line.record)
    assert record["type"] == "conclusion" and record["assertion_id"] == "c-1"
    assert record["outputs"]["route"] == "revise"
    assert record["payload"]["conclusion"]["confidence"] == "very sure"


def test_stats_and_the_report_count_conclusions(tmp_path: Path) -> None:
    """stats counts them by type and as intercepted; the weekly report shows the figure."""
    events = [
        TRACE_RESULT,
        {"event": "conclusion", **_bad()},
        {"event": "conclusion", **incident("zh")},
    ]
    _replay(tmp_path, events)
    stats = compute_stats(tmp_path / "log.jsonl", days_window(1, ZoneInfo("UTC")))
    assert stats["by_type"]["conclusion"]["total"] == 2
    assert stats["by_type"]["conclusion"]["rejected"] == 1
    assert stats["intercepted"]["unsupported_conclusions"] == 1
    assert "| Conclusions held back | 1 |" in render_markdown(stats, "en")


INPUT_ERRORS = [
    ({"conclusion": {}}, "member: a non-empty string is required"),
    ({"member": "lingflow", "conclusion": "root cause: pool"}, "conclusion: an object {summary"),
    ({"member": "lingflow", "conclusion": {}, "findings": ["x"]}, "findings: an object"),
    ({"member": "lingflow", "conclusion": {}, "id": 7}, "id: a string is required"),
]


@pytest.mark.parametrize(("given", "message"), INPUT_ERRORS)
def test_input_errors_name_the_field(given: dict[str, Any], message: str) -> None:
    """Only a shape no check could read is refused, and the error names the field."""
    with pytest.raises(ValueError, match=message.replace("{", r"\{")):
        KIND.assertion(given)


def test_replay_reports_a_bad_conclusion_line_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A conclusion event without a member: the file's line and the field; the rest runs."""
    code, rows = _replay(
        tmp_path, [{"event": "conclusion", "conclusion": {}}, {"event": "conclusion", **_bad()}]
    )
    assert code == 2 and len(rows) == 1
    assert "line 1: member:" in capsys.readouterr().err


# --- lingyi verify --conclusion ----------------------------------------------------------


def test_verify_reads_a_conclusion_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`lingyi verify --conclusion FILE --json`: the contract's line plus the route; exit 1."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_bad("zh"), ensure_ascii=False), encoding="utf-8")
    code = main(
        [
            "--config",
            CONFIG,
            "--log",
            str(tmp_path / "l.jsonl"),
            "verify",
            "--conclusion",
            str(path),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["route"] == "revise" and out["id"] == "c-1"


def test_verify_reads_a_conclusion_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--conclusion -` reads stdin; a conclusion whose trace the CLI's ledger lacks is revised."""
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(incident())))
    code = main(
        [
            "--config",
            CONFIG,
            "--log",
            str(tmp_path / "l.jsonl"),
            "verify",
            "--conclusion",
            "-",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and any(
        c["code"] == "conclusion.traces" and not c["passed"] for c in out["checks"]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n  "member": ', "c.json: line 2: not valid JSON"),
        ('{"conclusion": {}}', "c.json: member:"),
    ],
)
def test_verify_conclusion_errors_name_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    """Bad JSON names the file and line; a missing member names the field (exit 2)."""
    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    code = main(
        [
            "--config",
            CONFIG,
            "--log",
            str(tmp_path / "l.jsonl"),
            "verify",
            "--conclusion",
            str(path),
        ]
    )
    assert code == 2 and message in capsys.readouterr().err


# --- the MCP server: verify_conclusion and query_traces ------------------------------------


def test_verify_conclusion_and_query_traces_over_mcp(tmp_path: Path) -> None:
    """A real MCP client: query_traces records the trace ids as session evidence (padded);
    verify_conclusion citing one passes with no lookup; a bad one comes back as an error
    with its route, twice revise then final, counted in this connection's session."""
    tempo = Tempo()
    with serving(tempo.handler()) as url:
        dep = deploy(tmp_path / "deploy", f'\n[traces]\nbase_url = "{url}"\ntimeout_s = 2.0\n')
        seen: dict[str, Any] = {}

        async def body(client: Client) -> None:
            found = await client.call_tool("query_traces", {"service": "checkout"})
            seen["traces"] = (found.structured_content or {})["result"]["traces"]
            good = {k: v for k, v in copy.deepcopy(incident()).items() if k != "session"}
            good["conclusion"]["evidence_ids"][0] = FOUND.upper()
            good["findings"]["trace_finding"]["evidence_ids"] = [FOUND]
            seen["good"] = await client.call_tool("verify_conclusion", good)
            bad = {k: v for k, v in _bad().items() if k != "session"}  # the connection's
            seen["bad"] = [await client.call_tool("verify_conclusion", bad) for _ in range(3)]

        with_client(dep, body)
    assert [t["trace_id"] for t in seen["traces"]] == [FOUND, "0" * 16 + "1f2e3d4c5b6a7980"]
    good = verdict(seen["good"])
    assert not seen["good"].is_error and good["outputs"]["route"] == "passed", good["reason"]
    assert tempo.asked[f"/api/traces/{FOUND}"] == 0  # the session held it: no lookup
    routes = [verdict(r)["outputs"]["route"] for r in seen["bad"]]
    assert routes == ["revise", "revise", "final"] and all(r.is_error for r in seen["bad"])
    assert "conclusion.schema" in verdict(seen["bad"][0])["codes"]


def test_query_traces_without_a_backend_says_so(tmp_path: Path) -> None:
    """No [traces] base_url: the tool is refused by its backend, naming the key."""
    dep = deploy(tmp_path / "deploy")
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        seen["r"] = await client.call_tool("query_traces", {"service": "checkout"})

    with_client(dep, body)
    assert seen["r"].is_error and "[traces] base_url" in verdict(seen["r"])["error"]


def test_a_secret_in_a_conclusion_is_redacted_in_the_log(tmp_path: Path) -> None:
    """The payload is logged like any text the guard writes: secrets in it are redacted."""
    secret = "AKIAIOSFODNN7EXAMPLE"
    given = _bad()
    given["conclusion"]["hypotheses"][0]["actions"][0]["args"] = {"aws_access_key_id": secret}
    given["findings"]["metric_finding"]["note"] = f"key {secret} leaked in the dashboard"
    _replay(tmp_path, [TRACE_RESULT, {"event": "conclusion", **given}])
    text = (tmp_path / "log.jsonl").read_text(encoding="utf-8")
    assert secret not in text and "[REDACTED" in text


def test_verify_prints_the_route_for_people(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json the verdict ends with the route and what to do next."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_bad("zh"), ensure_ascii=False), encoding="utf-8")
    main(
        [
            "--config",
            CONFIG,
            "--log",
            str(tmp_path / "l.jsonl"),
            "verify",
            "--conclusion",
            str(path),
        ]
    )
    assert "route revise: 未通过" in capsys.readouterr().out
