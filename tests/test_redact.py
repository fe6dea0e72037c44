"""Redaction as a catalogue: every format, every spelling, every place the guard writes.

The attack side: each format of ``formats.toml`` (``tests/secret_cases.py`` holds one made-up
secret per format) pasted as it is, in full-width letters, split by zero-width characters,
as HTML entities or with a look-alike letter, under a secret argument key at any depth; none
of it may reach the log, the council record, stats, the weekly report or an MCP resource.
The legitimate side: ordinary texts that look a little like secrets (commit SHAs, trace ids,
"the password is required", 密码学) are written as they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from mcp import Client

from lingyi.config import load_config
from lingyi.council import CouncilMessage, FileCouncil, MemoryCouncil
from lingyi.errors import ConfigError
from lingyi.guard import Guard
from lingyi.ledger import Ledger
from lingyi.log import GENESIS, VerificationLog, canonical, record_hash, verify_chain
from lingyi.models import Assertion, AssertionType, ToolCall
from lingyi.redact import (
    MARKER,
    Redactor,
    clip,
    default_redactor,
    find_secrets,
    load_catalog,
    marker,
    may_hold_secret,
    parse_catalog,
    redact_record,
    redact_text,
    redact_value,
)
from lingyi.report import write_report
from lingyi.server import recent_records
from lingyi.stats import compute_stats, week_window
from tests.conftest import ROOT
from tests.secret_cases import BY_FORMAT, CASES, ISSUE_FORMATS, Case
from tests.test_server import Deployment, deploy, with_client
from tests.test_stats import config_for, run_lingyi, vrec

CATALOG = default_redactor().catalog


def _ids(cases: list[Case]) -> list[str]:
    return [c.format for c in cases]


def _clean(text: str, case: Case) -> bool:
    """No trace of the secret: not whole, and no long piece of it (a cut, a half)."""
    pieces = [case.secret[i : i + 12] for i in range(0, max(1, len(case.secret) - 11), 6)]
    return case.secret not in text and not any(p in text for p in pieces if len(p) >= 12)


# --- the catalogue -----------------------------------------------------------------------


def test_catalogue_has_at_least_thirty_formats_each_with_a_case() -> None:
    """The catalogue and the cases table cover each other: no format untested, no case orphan."""
    ids = [f.id for f in CATALOG.formats]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)
    assert set(ids) == set(BY_FORMAT), set(ids) ^ set(BY_FORMAT)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_each_format_is_found_and_replaced_by_a_marker_of_its_kind(case: Case) -> None:
    """The secret is found by its own format, and only the secret is replaced."""
    text = case.sentence
    kind = next(f.kind for f in CATALOG.formats if f.id == case.format)
    hits = [f for f in find_secrets(text) if f.format == case.format]
    assert hits, find_secrets(text)
    redacted = redact_text(text)
    assert _clean(redacted, case) and f"[REDACTED:{kind}:" in redacted
    before, _, after = case.text.partition("{s}")
    assert redacted.startswith(before.split("://")[0][:8]) and redacted.endswith(after[-6:])


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _zero_width(text: str) -> str:
    return "\u200b".join(text[i : i + 3] for i in range(0, len(text), 3))


def _entities(text: str) -> str:
    return "".join(f"&#{ord(c)};" if i % 5 == 0 else c for i, c in enumerate(text))


def _look_alike(text: str) -> str:
    return text.translate(str.maketrans({"a": "а", "e": "е", "o": "о", "c": "с", "A": "А"}))


SPELLINGS = {
    "fullwidth": _fullwidth,
    "zero_width": _zero_width,
    "html_entities": _entities,
    "look_alike": _look_alike,
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_every_spelling_of_a_secret_is_the_same_secret(case: Case, spelling: str) -> None:
    """Full-width, zero-width-split, entity-encoded or look-alike: matched on the canonical
    text, replaced in the original, and given the marker the plain secret gets."""
    disguised = SPELLINGS[spelling](case.secret)
    if disguised == case.secret:
        pytest.skip("this spelling does not change this secret")
    text = case.text.replace("{s}", disguised)
    redacted = redact_text(text)
    assert disguised not in redacted and MARKER.search(redacted), redacted
    plain = {m.group(0) for m in MARKER.finditer(redact_text(case.sentence))}
    assert {m.group(0) for m in MARKER.finditer(redacted)} & plain


@pytest.mark.parametrize(
    "text",
    [
        "Basic principles of 调息 are simple",
        "the password is required to log in",
        "your password is too short; it must be 12 characters",
        "the password was changed yesterday",
        "password: ${DB_PASSWORD} comes from the environment",
        "commit 3f9a1c0e5b7d2a4c6e8f0a1b3c5d7e9f1a2b3c4d landed on main",
        "trace 4bf92f3577b34da6a3ce929d0e0e4736 was recorded",
        "record 01M8RG48MVRARJQDQ7RF4T051F · lingyi appeal 01M8RG48MVRARJQDQ7RF4T051F",
        "a task-force meeting in East Asia about scikit-learn",
        "see https://example.com/docs?page=2 and https://user@example.com/",
        "密码学是研究加密的学科",
        "忘记密码了怎么办？",
        "修改密码：请到设置页面",
        "the token count is 12, max_tokens: 4096, primary_key = user_id",
        "the secret is consistency.",
        "Bearer of good news",
        "灵通说v0.16审计已经完成",
        "v0.16 审计已完成，报告见 audit-v0.16.md",
        "[REDACTED] and [REDACTED:aws_secret:3f9a1c] are markers already",
    ],
)
def test_ordinary_text_is_written_as_it_is(text: str) -> None:
    """Near misses of secret formats are not secrets: precision matters in a reviewed log."""
    assert redact_text(text) == text, find_secrets(text)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("the password is hunter2.", "the password is [REDACTED:password:*]."),
        ("密码是abc.123。请保管", "密码是[REDACTED:password:*]。请保管"),
        ("数据库密码是 hunter22，请保管", "数据库密码是 [REDACTED:password:*]，请保管"),
        ("my api key is abcd1234efgh!", "my api key is [REDACTED:secret:*]!"),
    ],
)
def test_only_the_secret_is_replaced_not_the_sentence_around_it(text: str, kept: str) -> None:
    """Punctuation after a secret stated in words stays, in English and in Chinese."""
    assert (
        MARKER.sub(lambda m: m.group(0)[: m.group(0).rindex(":") + 1] + "*]", redact_text(text))
        == kept
    )


def test_long_hostile_text_is_redacted_in_one_pass() -> None:
    """200 KB of texts built to make a scanner backtrack still come out redacted, each secret
    replaced (the patterns are bounded: a hostile text costs linear time, not quadratic)."""
    hostile = "".join(
        ["password=" * 3000, "-----BEGIN PRIVATE KEY-----x" * 2000, "密码是" * 5000,
         "password is " + "a" * 40_000, " ", BY_FORMAT["github_token"].sentence]
    )  # fmt: skip
    out = redact_text(hostile)
    assert "a" * 200 not in out and BY_FORMAT["github_token"].secret not in out
    assert "BEGIN PRIVATE KEY" not in out


# --- markers -----------------------------------------------------------------------------


def test_markers_tell_secrets_apart_without_showing_them() -> None:
    """Same secret, same marker; another secret, another marker; a key changes every hash."""
    one, two = BY_FORMAT["github_token"].secret, "ghp_" + "Z" * 36
    a, b, c = (redact_text(f"token {s}") for s in (one, one, two))
    assert a == b and a != c
    assert marker("github_token", one) != marker("github_token", one, b"deployment key")
    assert redact_text(a) == a  # redacting twice changes nothing


def test_overlapping_secrets_are_replaced_together() -> None:
    """Two findings that overlap become one marker: neither's tail is left in the clear."""
    pem = BY_FORMAT["private_key"].secret.split("\n-----END")[0]  # no END line
    text = f"password={pem}"
    out = redact_text(text)
    assert out.startswith("password=[REDACTED:") and "MIIEow" not in out and out.count("[") == 1


def test_clip_never_cuts_a_marker() -> None:
    """A redacted text cut to a size keeps whole markers only."""
    text = redact_text("x " + BY_FORMAT["stripe_key"].sentence)
    cut = clip(text, text.index("[REDACTED") + 5)
    assert "[REDACTED" not in cut and clip(text, len(text)) == text


# --- argument keys at any depth ----------------------------------------------------------

SECRET_KEYS = [
    "password", "client_secret", "x-api-key", "Authorization", "DB_PASSWORD", "clientSecret",
    "access_token", "private_key", "aws_secret_access_key", "api_key", "Cookie",
    "refresh-token", "ｐａｓｓｗｏｒｄ", "pin", "github_token",
]  # fmt: skip
PLAIN_KEYS = [
    "query", "limit", "token_count", "max_tokens", "tokens", "passed", "primary_key",
    "keyword", "password_hint", "secret_name", "author", "repo_path",
]  # fmt: skip


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_secret_key_hides_its_value_at_any_depth(key: str) -> None:
    """Whatever the value looks like, under a secret key it is the secret, however deep."""
    args = {"query": "气功", "nested": [{"deeper": {key: "plain-value-1"}}], key: 123456}
    out = redact_value({"tool_call": {"name": "x", "arguments": args}})
    text = json.dumps(out, ensure_ascii=False)
    assert "plain-value-1" not in text and "123456" not in text
    assert out["tool_call"]["arguments"]["query"] == "气功"


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_an_ordinary_key_keeps_its_value(key: str) -> None:
    """Keys that only look like secret names keep their values."""
    value = {"tool_call": {"arguments": {key: "plain-value-1", "n": [{key: 7}]}}}
    assert redact_value(value) == value


def test_keys_are_names_in_figures() -> None:
    """In stats, keys are tool and member names: a tool called reset_password keeps its counts."""
    figures = {"by_tool": {"reset_password": {"total": 3}}}
    assert redact_value(figures, keys=False) == figures


def test_redact_record_in_place_and_untouched_without_secrets() -> None:
    """The writer's call: True and redacted in place, or False and the same object as given."""
    plain = vrec("2026-11-24T10:00:00.000Z")
    assert redact_record(plain, body=canonical(plain)) is False
    assert not may_hold_secret(canonical(plain))
    dirty = vrec("2026-11-24T10:00:00.000Z", content=BY_FORMAT["jwt"].sentence)
    assert redact_record(dirty) is True and _clean(json.dumps(dirty), BY_FORMAT["jwt"])


# --- everywhere the guard writes ---------------------------------------------------------


def test_every_format_is_redacted_in_the_log(tmp_path: Path) -> None:
    """Each format as content, as a tool argument, in a reason and under a secret key: the log
    holds none of them and its chain verifies."""
    path = tmp_path / "log.jsonl"
    with VerificationLog(path) as log:
        for case in CASES:
            record = vrec("2026-11-24T10:00:00.000Z", decision="rejected", content=case.sentence)
            record["tool_call"]["arguments"] = {"query": case.sentence, "client_secret": "pw-42"}
            record["checks"][0]["reason"] = f"未涉及：{case.sentence}"
            log.append(record)
    text = path.read_text(encoding="utf-8")
    bad = [c.format for c in CASES if not _clean(text, c)]
    assert not bad and "pw-42" not in text
    assert verify_chain(path).ok and text.count("[REDACTED:") >= 3 * len(CASES)


def test_the_guard_logs_the_redacted_assertion(tmp_path: Path) -> None:
    """A verification through the guard (content, tool arguments, the reasons that quote them)
    is logged without the secrets; the verdict still names the check that failed."""
    config = load_config(ROOT / "config" / "lingyi.toml", log=tmp_path / "log.jsonl")
    guard = Guard.from_config(config, source="test", council=MemoryCouncil())
    secrets = [BY_FORMAT[f] for f in ISSUE_FORMATS]
    content = "；".join(c.sentence for c in secrets)
    call = ToolCall(name="search_knowledge", arguments={"query": "气功", "api_key": "k-99"})
    assertion = Assertion(
        member="lingzhi", type=AssertionType.ACTION, content=content, tool_call=call
    )
    result = guard.check(assertion, Ledger())
    guard.close()
    text = config.log_path.read_text(encoding="utf-8")
    assert all(_clean(text, c) for c in secrets) and "k-99" not in text
    assert "tool.args_schema" in [c.code for c in result.checks if not c.passed]


def test_every_format_is_redacted_in_the_council_record(tmp_path: Path) -> None:
    """Messages posted to the council record are stored redacted, and read back that way."""
    path = tmp_path / "council.jsonl"
    council = FileCouncil(path)
    for case in CASES:
        council.append(CouncilMessage(sender="lingflow", content=case.sentence))
    text = path.read_text(encoding="utf-8")
    assert not [c.format for c in CASES if not _clean(text, c)]
    assert all("[REDACTED:" in m.content for m in FileCouncil(path).messages_from("lingflow"))


def _old_log(path: Path, cases: list[Case]) -> None:
    """A log written before redaction covered these formats: raw, chained, unredacted."""
    prev, lines = GENESIS, []
    for i, case in enumerate(cases):
        record = vrec(f"2026-11-24T10:{i % 60:02d}:00.000Z", decision="rejected",
                      failed=(("evidence.urls_recorded", "reject"),), content=case.sentence)  # fmt: skip
        record["checks"][-1]["reason"] = f"URL not returned by a tool: {case.sentence}"
        record["reason"] = case.sentence
        record |= {"v": 1, "id": f"{i:026d}", "prev": prev}
        record["hash"] = prev = record_hash(record)
        lines.append(canonical(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_old_secrets_do_not_reach_stats_or_the_report(tmp_path: Path) -> None:
    """A log that holds secrets (written by an older version): `lingyi stats --json`, the
    weekly report (Markdown and HTML) and the figures quote none of them; the chain is intact."""
    config = config_for(tmp_path)
    for case in CASES:
        _old_log(config.log_path, [case])
        stats = compute_stats(config.log_path, week_window("2026-W48", ZoneInfo("UTC")))
        assert _clean(json.dumps(stats, ensure_ascii=False), case), case.format
        assert stats["integrity"]["ok"]
    _old_log(config.log_path, [BY_FORMAT[f] for f in ISSUE_FORMATS])
    base = ["--config", tmp_path / "lingyi.toml", "--log", config.log_path]
    done = run_lingyi(*base, "stats", "--since", "2026-11-23", "--until", "2026-11-29", "--json")
    assert done.returncode == 0, done.stderr
    pages = write_report(config, "2026-W48", out=tmp_path / "reports")
    outputs = [done.stdout] + [p.read_text(encoding="utf-8") for p in pages]
    for case in (BY_FORMAT[f] for f in ISSUE_FORMATS):
        assert all(_clean(out, case) for out in outputs), case.format
    assert "[REDACTED:" in done.stdout


def test_recent_log_resource_is_redacted(tmp_path: Path) -> None:
    """lingyi://log/recent over an old, unredacted log shows markers, not secrets."""
    path = tmp_path / "log.jsonl"
    _old_log(path, CASES)
    shown = json.dumps(recent_records(path, len(CASES)), ensure_ascii=False)
    assert not [c.format for c in CASES if not _clean(shown, c)]


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return deploy(tmp_path)


def test_secrets_sent_over_mcp_reach_no_file_and_no_resource(dep: Deployment) -> None:
    """Through a real MCP client: a council post with an sk-ant key, an assertion and a tool
    call carrying the issue's formats; the log, the council record, lingyi://log/recent, the
    stats tool and the weekly report hold none of them."""
    secrets = [BY_FORMAT[f] for f in ISSUE_FORMATS]
    key = BY_FORMAT["anthropic_key"]
    out: dict[str, Any] = {}

    async def body(client: Client) -> None:
        post = {"member": "lingflow", "content": f"明天上午十点开周会，key {key.secret}"}
        out["post"] = await client.call_tool("post_council_message", post)
        for case in secrets:
            args = {"member": "lingyi", "type": "fact", "content": case.sentence}
            await client.call_tool("verify_assertion", args)
        await client.call_tool("search_knowledge", {"query": "气功", "client_secret": "pw-42"})
        out["recent"] = (await client.read_resource("lingyi://log/recent")).contents[0].text  # type: ignore[union-attr]
        out["report"] = (await client.read_resource("lingyi://report/weekly")).contents[0].text  # type: ignore[union-attr]
        stats = await client.call_tool("verification_stats", {"days": 7})
        out["stats"] = json.dumps(stats.structured_content, ensure_ascii=False)

    with_client(dep, body)
    council = dep.config().council_path.read_text(encoding="utf-8")
    assert (
        not out["post"].is_error and _clean(council, key) and "[REDACTED:anthropic_key:" in council
    )
    written = [
        dep.log.read_text(encoding="utf-8"),
        council,
        out["recent"],
        out["stats"],
        out["report"],
    ]
    for case in [*secrets, key]:
        assert all(_clean(text, case) for text in written), case.format
    assert "pw-42" not in written[0] and verify_chain(dep.log).ok


# --- a catalogue that cannot be used is refused when it is loaded -----------------------

_GOOD = """
[[formats]]
id = "demo"
title = "demo"
source = "test"
hints = ["demo_"]
pattern = '''demo_[0-9]{4}'''
"""


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (_GOOD.replace("demo_[0-9]{4}", "demo_[0-9"), "formats[0] (demo).pattern"),
        (_GOOD.replace('source = "test"', 'source = "test"\nsorce = "x"'), "formats[0].sorce"),
        (_GOOD + _GOOD, "formats[1].id: 'demo' is already formats[0].id"),
        (_GOOD.replace('["demo_"]', '["Demo_"]'), "formats[0].hints"),
        (_GOOD.replace('source = "test"', 'source = "test"\ncheck = "luhn"'), "formats[0].check"),
        (_GOOD.replace('id = "demo"', 'id = "Demo Key"'), "formats[0].id"),
        ("formats = [", "catalog.toml"),
    ],
)
def test_a_bad_catalogue_is_refused_naming_file_entry_and_field(text: str, where: str) -> None:
    """A broken entry is an error when the catalogue loads, naming the file, entry and field."""
    with pytest.raises(ConfigError) as err:
        parse_catalog(text, "catalog.toml")
    assert str(err.value).startswith("catalog.toml") and where in str(err.value)


def test_a_catalogue_file_can_be_loaded(tmp_path: Path) -> None:
    """A catalogue in a file loads and finds its format; a missing file is a clear error."""
    path = tmp_path / "formats.toml"
    path.write_text(_GOOD, encoding="utf-8")
    assert [f.id for f in load_catalog(path).formats] == ["demo"]
    with pytest.raises(ConfigError, match="cannot read"):
        load_catalog(tmp_path / "missing.toml")


def test_the_packaged_catalogue_compiles_on_first_use_and_every_pattern_compiles() -> None:
    """The packaged formats are compiled lazily (a one-shot command compiles only what its
    text's hints ask for), so this test is what proves each of their patterns compiles; a
    redaction before and after the lazy compile finds the same secret."""
    catalog = load_catalog()
    assert all("regex" not in vars(f) for f in catalog.formats)  # nothing compiled at load
    text = "key AKIAIOSFODNN7EXAMPLE in 日志"
    first = [(f.kind, f.start, f.end) for f in Redactor(catalog).find(text)]
    compiled = [f.id for f in catalog.formats if "regex" in vars(f)]
    assert 0 < len(compiled) < len(catalog.formats)  # only the hinted formats ran
    for fmt in catalog.formats:
        assert isinstance(fmt.regex, re.Pattern), fmt.id
    assert [(f.kind, f.start, f.end) for f in Redactor(catalog).find(text)] == first != []
