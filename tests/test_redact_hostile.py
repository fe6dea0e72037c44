"""Redaction against a hostile writer: secrets and personal data in every spelling a model or
a user might paste them in, and the look-alikes that must stay as they are.

Each of the issue's ten secret formats (``ISSUE_FORMATS``) and nine items of personal data
(``PERSONAL``: e-mail, phone, Chinese resident ID, US SSN, card numbers, in Chinese and English
sentences) is spelled plain, in full-width characters, split by zero-width spaces, split by
spaces and by dashes, base64-, hex- and URL-encoded (the sentence that holds it, as a config
blob, a dump or a query string would carry it), and cut in two across two tool arguments.
None of it may survive. The look-alikes (a commit SHA, a trace id, an order number, a
version, dates, a Luhn-invalid card-length number, an ID number with a wrong check digit,
base64 of harmless text) are written as they are.

The spellings the guard does not catch yet are listed in ``KNOWN_MISSES`` and run as strict
xfails: a fix turns them into failures until the list is updated, so the table keeps count.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from mcp import Client
from mcp_types import CallToolResult

from lingyi.config import load_config
from lingyi.errors import ConfigError
from lingyi.log import read_log
from lingyi.policy import PolicySet
from lingyi.redact import (
    MARKER,
    RedactSection,
    configure,
    find_secrets,
    redact_text,
    redact_value,
)
from tests import messages_api as api
from tests.judge_kit import SUPPORTED, rig
from tests.secret_cases import BY_FORMAT, ISSUE_FORMATS, PERSONAL, Case
from tests.test_server import deploy, verdict, with_client

SECRETS = [BY_FORMAT[f] for f in ISSUE_FORMATS]


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def _zero_width(s: str) -> str:
    return "\u200b".join(s[i : i + 3] for i in range(0, len(s), 3))


def _grouped(sep: str) -> Callable[[str], str]:
    """A datum with separators gets ``sep`` in their place (536 90 4399); one without, a
    ``sep`` every four characters (1381 2345 678, ghp_ 1a2b …); an address, around its @."""

    def split(s: str) -> str:
        if "@" in s:
            return s.replace("@", f"{sep}@{sep}")
        if " " in s or "-" in s:
            return s.replace(" ", sep).replace("-", sep)
        return sep.join(s[i : i + 4] for i in range(0, len(s), 4))

    return split


# A spelling of the datum alone (put back in its sentence) ...
IN_PLACE: dict[str, Callable[[str], str]] = {
    "plain": lambda s: s,
    "fullwidth": _fullwidth,
    "zero_width": _zero_width,
    "spaced": _grouped(" "),
    "dashed": _grouped("-"),
}
# ... or of the whole sentence that holds it.
ENCODED: dict[str, Callable[[str], str]] = {
    "base64": lambda t: base64.b64encode(t.encode()).decode(),
    "hex": lambda t: t.encode().hex(),
    "url": lambda t: quote(t, safe=""),
}
SPELLINGS = [*IN_PLACE, *ENCODED, "two_fields"]

# Spellings not caught yet (format id, spelling): each is a strict xfail.
KNOWN_MISSES = {
    # A token cut into groups by spaces is no longer one token: no format matches it (those
    # that pass are caught by the words before them: "my AWS secret is …" takes the token).
    *((f, "spaced") for f in ("aws_secret", "password_zh", "stripe_key", "gcp_api_key")),
    *((f, "spaced") for f in ("jwt", "basic_auth", "url_credentials", "anthropic_key")),
    ("stripe_key", "dashed"),  # sk_live_ is followed by letters and digits only
}
# Secrets that a space or a dash every few characters does not change in kind: a PEM block
# is lines already, and a password or a Basic credential split by spaces is a different
# string (the words after "password is" are not the password).
NOT_APPLICABLE = {("private_key", "spaced"), ("private_key", "dashed")}


def _written(case: Case, spelling: str) -> str:
    """What the guard would write: the case in ``spelling``, as JSON of a record's fields."""
    if spelling in IN_PLACE:
        return redact_text(case.text.replace("{s}", IN_PLACE[spelling](case.secret)))
    if spelling in ENCODED:
        return redact_text(f"payload {ENCODED[spelling](case.sentence)} end")
    cut = case.text.index("{s}") + len(case.secret) // 2
    sentence = case.sentence
    args = {"query": sentence[:cut], "note": sentence[cut:]}
    record = {"tool_call": {"name": "search_knowledge", "arguments": args}}
    return json.dumps(redact_value(record), ensure_ascii=False)


def _leaks(written: str, case: Case) -> bool:
    """Any of the datum left: whole, or a run of half of it (at most 8 characters), its
    separators ignored (a password cut in two leaves no half; a card number no 8 digits)."""
    plain = "".join(c for c in case.secret if c not in " -()")
    seen = "".join(c for c in written if c not in " -()")
    n = min(8, max(4, len(plain) // 2))
    return any(plain[i : i + n] in seen for i in range(max(1, len(plain) - n + 1)))


def _table(cases: list[Case]) -> list[object]:
    rows = []
    for index, case in enumerate(cases):
        for spelling in SPELLINGS:
            if (case.format, spelling) in NOT_APPLICABLE:
                continue
            marks = []
            if case in SECRETS and (case.format, spelling) in KNOWN_MISSES:
                marks = [pytest.mark.xfail(strict=True, reason="not caught yet")]
            rows.append(
                pytest.param(case, spelling, id=f"{case.format}{index}-{spelling}", marks=marks)
            )
    return rows


@pytest.mark.parametrize(("case", "spelling"), _table(SECRETS))
def test_no_spelling_of_a_secret_survives(case: Case, spelling: str) -> None:
    """A known secret, however it is spelled or cut, is replaced by a marker."""
    written = _written(case, spelling)
    assert not _leaks(written, case) and MARKER.search(written), written


@pytest.mark.parametrize(("case", "spelling"), _table(PERSONAL))
def test_no_spelling_of_personal_data_survives(case: Case, spelling: str) -> None:
    """E-mail addresses, phone numbers, resident IDs, SSNs and card numbers, in every
    spelling, are replaced by a marker of their kind."""
    written = _written(case, spelling)
    assert not _leaks(written, case) and MARKER.search(written), written


@pytest.mark.parametrize("spelling", ["plain", "fullwidth", "spaced", "dashed", "base64"])
@pytest.mark.parametrize("case", PERSONAL, ids=[f"{c.format}{i}" for i, c in enumerate(PERSONAL)])
def test_each_spelling_gets_the_plain_marker(case: Case, spelling: str) -> None:
    """The marker's hash is of the datum itself: 138 1234 5678, 13812345678 and its base64
    all read [REDACTED:phone:<same hash>], so a reviewer sees it is one number."""
    plain = {m.group(0) for m in MARKER.finditer(_written(case, "plain"))}
    assert plain and plain <= {m.group(0) for m in MARKER.finditer(_written(case, spelling))}


LOOK_ALIKES = [
    "commit 3f9a1c0e5b7d2a4c6e8f0a1b3c5d7e9f1a2b3c4d landed on main",
    "trace 4bf92f3577b34da6a3ce929d0e0e4736 was recorded",
    "span 00f067aa0ba902b7 of trace 4bf92f3577b34da6a3ce929d0e0e4736",
    "订单号 20261124000123 已发货",
    "order #2026-1124-0042 shipped",
    "upgrade to v2.14.3 or 10.0.19045.3803",
    "released 2026-11-24, reviewed 2026年11月24日 at 10:00:00",
    "ts 2026-11-24T10:00:00.000Z",
    "card-length number 4111 1111 1111 1112 fails Luhn",
    "身份证号 110105194912310021 的校验位不对",
    "ssn 000-12-3456 is not issued, nor 666-12-3456",
    "record 01M8RG48MVRARJQDQ7RF4T051F",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "the blob aGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG9mIHRoZSBndWFyZA== is harmless",
    "see https://example.com/docs?q=qi%20gong&page=2 and https://user@example.com/",
    "¥1,234,567.89 in Q3, 12,000 users, 10086 and 95588 are service lines",
    "IP 192.168.100.200 port 8080, PID 4242424",
    "IBAN DE89 3704 0044 0532 0130 01 has a wrong check digit",
    "灵通说v0.16审计已经完成",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_written_as_they_are(text: str) -> None:
    """Hashes, ids, numbers, versions, dates and encoded harmless text are not secrets or
    personal data: a reviewed log keeps them."""
    assert redact_text(text) == text, find_secrets(text)


def test_look_alikes_in_a_record_are_kept() -> None:
    """The same look-alikes as a record's caller fields, side by side: nothing is replaced."""
    args = {f"a{i}": t for i, t in enumerate(LOOK_ALIKES)}
    record = {"tool_call": {"name": "search_knowledge", "arguments": args}}
    assert redact_value(record) == record


# --- what the caller sent, as the log keeps it ---------------------------------------------


def test_an_argument_that_fails_its_schema_is_logged_as_sent_redacted_and_cut(
    tmp_path: Path,
) -> None:
    """Issue 24 item 3: through a real MCP client, ``limit: "lots …"`` (a string where the
    schema wants an integer) is rejected by tool.args_schema and the record keeps what the
    model sent, not null: redacted (the token and the phone number in it are markers) and cut
    to the log's field limit (a 100 000-character ``domains`` keeps a head, its full length
    and hash in ``truncated``)."""
    dep = deploy(tmp_path / "deploy")
    token, phone = BY_FORMAT["github_token"].secret, "13812345678"
    sent = {"query": "气功", "limit": f"lots, {token} {phone}", "domains": "气" * 100_000}
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool("search_knowledge", sent))

    with_client(dep, body)
    assert out[0].is_error and "tool.args_schema" in verdict(out[0])["codes"]
    [record] = [line.record for line in read_log(dep.log) if line.record]
    logged = record["tool_call"]["arguments"]
    assert logged["limit"].startswith("lots, [REDACTED:github_token:")
    assert "[REDACTED:phone:" in logged["limit"] and token not in logged["limit"]
    assert phone not in logged["limit"] and logged["query"] == "气功"
    assert 0 < len(logged["domains"]) < 100_000 and logged["domains"].lstrip('"').startswith("气")
    assert any("domains" in t["field"] for t in record["truncated"])


# --- [redact]: what a deployment chooses ----------------------------------------------------


@pytest.fixture
def redact_config(tmp_path: Path) -> Iterator[Callable[[str], None]]:
    """Load a config with a given ``[redact]`` section; the defaults are back afterwards."""

    def load(section: str) -> None:
        path = tmp_path / "lingyi.toml"
        path.write_text(f"[redact]\n{section}\n", encoding="utf-8")
        load_config(path)

    yield load
    configure(RedactSection())


def test_personal_data_is_redacted_by_default_and_each_key_changes_it(
    redact_config: Callable[[str], None],
) -> None:
    """On by default; ``personal = false`` keeps all personal data, ``keep`` the kinds it
    names, ``decode = false`` stops looking into encodings. Secrets are redacted whatever
    the section says."""
    mail, phone = "write to alice.wang@example.com", "手机 13812345678"
    blob = "x " + base64.b64encode(BY_FORMAT["password_en"].sentence.encode()).decode()
    secret = BY_FORMAT["github_token"].sentence
    assert all(redact_text(t) != t for t in (mail, phone, blob, secret))
    redact_config("personal = false")
    assert redact_text(mail) == mail and redact_text(phone) == phone
    redact_config('keep = ["email"]')
    assert redact_text(mail) == mail and redact_text(phone) != phone
    redact_config("decode = false")
    assert redact_text(blob) == blob and redact_text(mail) != mail
    assert redact_text(secret) != secret


@pytest.mark.parametrize(
    ("section", "names"),
    [
        ('keep = ["mail"]', "redact.keep: 'mail' is no kind of personal data; valid: card"),
        ("personal = 1", "redact.personal"),
        ("redcat = true", "redact.redcat"),
    ],
)
def test_a_bad_redact_section_names_its_key(
    redact_config: Callable[[str], None], section: str, names: str
) -> None:
    """A misspelt kind or key, or a wrong type, is a config error naming ``redact.<key>``."""
    with pytest.raises(ConfigError, match=re.escape(names)):
        redact_config(section)


def test_the_judges_request_carries_no_personal_data(policies: PolicySet) -> None:
    """The judge is a third party: the request the model receives (the real ``anthropic``
    client against a Messages API on loopback) has the phone number, the e-mail address, the
    resident ID and the base64-encoded password replaced by markers, as the log has."""
    blob = base64.b64encode(BY_FORMAT["password_en"].sentence.encode()).decode()
    content = f"联系 13812345678 或 alice.wang@example.com，身份证 11010519491231002X，{blob}。"
    with api.messages_api() as (state, url):
        judge = rig(policies, url)
        try:
            judge.verify(content=content + SUPPORTED, context={"note": "card 4111111111111111"})
        finally:
            judge.close()
    sent = json.dumps(state.requests, ensure_ascii=False)
    assert state.requests, "the judge was not asked"
    for datum in ("13812345678", "alice.wang@example.com", "11010519491231002X", blob):
        assert datum not in sent, datum
    assert "4111111111111111" not in sent and "[REDACTED:phone:" in sent


def test_an_encoded_secret_is_redacted_wherever_the_record_quotes_it() -> None:
    """Encoded runs are looked for in what the caller sent; once found there, a reason that
    quotes the same run is redacted too, and a structure that is no record (an upstream's
    result) is looked into whole."""
    blob = base64.b64encode(BY_FORMAT["stripe_key"].sentence.encode()).decode()
    record = {"content": f"see {blob}", "checks": [{"code": "x", "reason": f"quoted: {blob}"}]}
    assert blob not in json.dumps(redact_value(record))
    result = {"structured": {"rows": [{"text": f"row {blob}"}]}}
    assert blob not in json.dumps(redact_value(result))
