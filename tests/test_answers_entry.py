"""Answers through every entry point: replay (the examples), MCP verify_answer, the CLI.

The shipped example transcripts (``examples/answers``, Chinese and English) are policy tests:
``lingyi replay --check`` meets every ``expect``, and each line's ``expect_gate`` (ignored by
replay, read here) names the state of the source gate. Over MCP the answer cites what a real
``search_knowledge`` of the shipped knowledge base returned, URL and all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lingyi.backends.kb.search import document_url
from lingyi.cli import main
from lingyi.log import read_log
from lingyi.report.markdown import render_markdown
from tests.conftest import ROOT
from tests.test_server import Deployment, deploy, verdict, with_client

EXAMPLES = sorted((ROOT / "examples" / "answers").glob("*.jsonl"))


@pytest.mark.parametrize("transcript", EXAMPLES, ids=lambda p: p.name)
def test_the_answer_examples_meet_their_expectations(
    transcript: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every decision and every gate state the examples expect (zh and en)."""
    log = tmp_path / "log.jsonl"
    code = main(["--log", str(log), "replay", "--check", str(transcript)])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    expected = {e["id"]: e["expect_gate"] for e in events if "expect_gate" in e}
    assert {o["id"]: o["gate"] for o in out} == expected
    records = [line.record for line in read_log(log) if line.record]
    assert {r["type"] for r in records} == {"answer"}
    assert all("gate" in r["outputs"] and "question" in r["payload"] for r in records)


def test_stats_count_answers_as_their_own_type(tmp_path: Path, capsys: Any) -> None:
    """The log's answers are counted under type "answer" by lingyi stats and in the weekly
    report's table per kind of input."""
    log = tmp_path / "log.jsonl"
    main(["--log", str(log), "replay", *map(str, EXAMPLES)])
    capsys.readouterr()
    main(["--log", str(log), "stats", "--json", "--full"])
    figures = json.loads(capsys.readouterr().out)
    assert figures["by_type"]["answer"]["total"] == 13  # every answer of the examples
    report = render_markdown(figures, "en")
    assert "## Per kind of input" in report and "| answer |" in report


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return deploy(tmp_path / "deploy")


def test_verify_answer_over_mcp_cites_what_the_search_returned(dep: Deployment) -> None:
    """A search returns hits with stable URLs; an answer citing one is approved with that
    source shown; one citing a URL no search returned is an error result with the gaps."""
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert "verify_answer" in listed
        found = await client.call_tool("search_knowledge", {"query": "气功"})
        hit = found.structured_content["result"]["hits"][0]  # type: ignore[index]
        seen["hit"] = hit
        good = f"据[{hit['title']}]({hit['url']})，气功重在调息。"
        seen["good"] = await client.call_tool(
            "verify_answer", {"member": "lingzhi", "question": "气功是什么", "answer": good}
        )
        bad = "见[气功大全](https://kb.lingyi.local/qg-999)"
        seen["bad"] = await client.call_tool(
            "verify_answer", {"member": "lingzhi", "question": "气功是什么", "answer": bad}
        )

    with_client(dep, body)
    hit = seen["hit"]
    assert hit["url"] == document_url("https://kb.lingyi.local/", hit["id"])
    good, bad = seen["good"], seen["bad"]
    assert not good.is_error and verdict(good)["decision"] == "approved"
    assert good.structured_content["result"]["sources"] == [
        {"url": hit["url"], "title": hit["title"]}
    ]
    skipped = good.structured_content["result"]
    assert (skipped["critic"], skipped["signals"]) == ("skipped", [])  # no judge configured
    assert bad.is_error and bad.structured_content["result"]["gate"] == "validation"
    gaps = bad.structured_content["result"]["gaps"]
    assert any(g.get("unknown_urls") == ["https://kb.lingyi.local/qg-999"] for g in gaps)


def test_verify_answer_arguments_are_checked_by_its_schema(dep: Deployment) -> None:
    """An intent outside the enum is refused naming the valid values; a member of spaces
    (which the schema leaves to the guard) is refused in our words; the server goes on."""
    seen: list[Any] = []

    async def body(client: Client) -> None:
        args = {"member": "lingzhi", "question": "q", "answer": "a", "intent": "list"}
        seen.append(await client.call_tool("verify_answer", args))
        blank = {"member": "  ", "question": "q", "answer": "a"}
        seen.append(await client.call_tool("verify_answer", blank))
        seen.append(await client.call_tool("end_task", {"member": " "}))
        seen.append(await client.call_tool("verify_answer", args | {"intent": "general"}))

    with_client(dep, body)
    assert seen[0].is_error and "general, catalog" in (verdict(seen[0])["recommendation"] or "")
    for refused in seen[1:3]:
        assert refused.is_error and "member: a non-empty text" in verdict(refused)["reason"]
    assert verdict(seen[3])["decision"] == "approved"


@pytest.mark.parametrize(
    ("text", "code", "gate"),
    [
        ("据[气功源流](https://kb.example.org/qg-001/)", 0, "open"),
        ("据[气功源流](https://kb.example.org/qg-404)", 1, "validation"),
    ],
)
def test_lingyi_verify_answer_reads_a_file_or_stdin(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    code: int,
    gate: str,
) -> None:
    """`lingyi verify --answer FILE|-` with a transcript as context: the gate and the exit."""
    context = tmp_path / "context.jsonl"
    found = {"id": "kb:qg-001", "title": "气功源流", "url": "https://kb.example.org/qg-001"}
    event = {"event": "tool_result", "session": "s", "member": "lingzhi", "tool": "search_knowledge", "evidence": [found]}  # fmt: skip
    context.write_text(json.dumps(event, ensure_ascii=False) + "\n", encoding="utf-8")
    answer = tmp_path / "answer.md"
    answer.write_text(text, encoding="utf-8")
    common = ["--log", str(tmp_path / "l.jsonl"), "verify", "--member", "lingzhi"]
    common += ["--question", "气功的源流", "--context", str(context), "--session", "s", "--json"]
    assert main([*common, "--answer", str(answer)]) == code
    assert json.loads(capsys.readouterr().out)["gate"] == gate
    monkeypatch.setattr("sys.stdin", _Stdin(text))
    main([*common, "--answer", "-"])
    assert json.loads(capsys.readouterr().out)["gate"] == gate  # the same, read from stdin


def test_lingyi_verify_answer_needs_a_question(tmp_path: Path, capsys: Any) -> None:
    """--answer without --question is bad input (exit 2) naming what is missing."""
    answer = tmp_path / "a.md"
    answer.write_text("x", encoding="utf-8")
    code = main(["--log", str(tmp_path / "l.jsonl"), "verify", "--member", "lingzhi", "--answer", str(answer)])  # fmt: skip
    assert code == 2 and "--question" in capsys.readouterr().err


class _Stdin:
    def __init__(self, text: str) -> None:
        self.text = text

    def read(self) -> str:
        return self.text


def test_verify_answer_over_mcp_carries_the_critics_signals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the judge enabled in the config (the real client against the loopback Messages
    API), verify_answer's structured result carries each scored signal with its threshold:
    a low confidence closes the gate while the text is approved."""
    from tests import messages_api as api
    from tests.judge_kit import FAKE_KEY, KEY_ENV

    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    seen: dict[str, Any] = {}
    with api.messages_api() as (state, url):
        state.script = lambda req: api.tool_use(req, api.verdict(req, scores={"confidence": 0.5}))
        judge = f'\n[judge]\nenabled = true\nbase_url = "{url}"\napi_key_env = "{KEY_ENV}"\n'
        dep = deploy(tmp_path / "deploy", judge + "timeout_s = 5\n")

        async def body(client: Client) -> None:
            found = await client.call_tool("search_knowledge", {"query": "气功"})
            hit = found.structured_content["result"]["hits"][0]  # type: ignore[index]
            text = f"据[{hit['title']}]({hit['url']})，气功重在调息。"
            args = {"member": "lingzhi", "question": "气功是什么", "answer": text}
            seen["answer"] = await client.call_tool("verify_answer", args)

        with_client(dep, body)
    result = seen["answer"].structured_content
    assert result["verdict"]["decision"] == "approved"
    out = result["result"]
    assert (out["critic"], out["gate"], out["sources"]) == ("failed", "critic", [])
    assert out["signals"][0] == {
        "signal": "confidence",
        "value": 0.5,
        "min": 0.7,
        "max": None,
        "passed": False,
    }
    assert [s["passed"] for s in out["signals"][1:]] == [True] * 4
    logged = [line.record for line in read_log(dep.log) if line.record]
    answers = [r for r in logged if r.get("type") == "answer"]
    assert answers[-1]["judge"]["signals"][0]["score"] == 0.5  # the log keeps the scores
