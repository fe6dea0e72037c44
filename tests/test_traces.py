"""Trace ids are looked up, not trusted: a real Tempo-compatible server on loopback.

The server started here speaks the two endpoints the guard uses (``GET /api/traces/{id}`` and
``GET /api/search``) and counts the requests it gets, so that a duplicated id looked up once,
a padded short id and a cached confirmation are pinned by what reached the wire.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from lingyi.backends.traces import TraceBackend, TraceBackendError, span_count, trace_key
from lingyi.checks._registry import Services
from lingyi.conclusions import KIND
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import PolicySet, load_policies
from tests.conclusion_kit import check, edited, layer, trace_ledger
from tests.loopback import serving

FOUND = "aa11bb22cc33dd44ee55ff6600778899"
NO_SPANS = "bb11bb22cc33dd44ee55ff6600778899"
SLOW = "cc11bb22cc33dd44ee55ff6600778899"
SHORT = "dd11bb22cc33dd44ee55ff66"  # 24 digits: the backend knows it padded to 32
HELD = "0" * 8 + SHORT


def _trace(spans: int) -> dict[str, Any]:
    return {"batches": [{"resource": {}, "scopeSpans": [{"spans": [{"spanId": "01"}] * spans}]}]}


class Tempo:
    """What the fake backend knows and what it was asked."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.release = threading.Event()  # a SLOW lookup waits for this (or its timeout)

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        tempo = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                tempo.asked[url.path] += 1
                if url.path == "/api/search":
                    return self._search(parse_qs(url.query))
                trace = url.path.rsplit("/", 1)[-1]
                if trace == SLOW:
                    tempo.release.wait(5)
                known = {FOUND: _trace(2), HELD: _trace(1), NO_SPANS: {"batches": []}}
                self._answer(200, known[trace]) if trace in known else self._answer(404, {})

            def _search(self, query: dict[str, list[str]]) -> None:
                service = query.get("tags", [""])[0].removeprefix("service.name=")
                traces = [
                    {"traceID": FOUND, "rootServiceName": service, "rootTraceName": "POST /pay", "durationMs": 812},
                    {"traceID": "1f2e3d4c5b6a7980", "rootServiceName": service, "rootTraceName": "GET /cart"},
                ]  # fmt: skip
                self._answer(200, {"traces": traces if service == "checkout" else []})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def tempo() -> Iterator[tuple[Tempo, str]]:
    state = Tempo()
    with serving(state.handler()) as url:
        yield state, url
        state.release.set()


def _policies(tmp_path: Path, on_error: str) -> PolicySet:
    (tmp_path / "m.toml").write_text(
        'member = "m"\nname = "M"\n[[checks]]\ncheck = "conclusion.traces"\nstage = "fact_verification"\n'
        f'types = ["conclusion"]\non_error = "{on_error}"\n',
        encoding="utf-8",
    )
    return load_policies(tmp_path, require_shared=False)


def _cites(*ids: str) -> dict[str, Any]:
    return {
        "member": "m",
        "session": "s1",
        "conclusion": {"summary": "s", "evidence_ids": list(ids)},
    }


def _verify(
    policies: PolicySet, backend: TraceBackend, given: dict[str, Any], ledger: Ledger | None = None
) -> Any:
    services = Services(traces=backend, trace_lookup=backend.exists_one)
    return layer(policies, "en", services).verify(KIND.assertion(given), ledger or Ledger())


LOOKUPS = [
    # (cited id, passes, what)
    (FOUND, True, "an existing trace"),
    ("ee11bb22cc33dd44ee55ff6600778899", False, "a 404"),
    (NO_SPANS, False, "a trace with no spans"),
    (SHORT, True, "a short id, padded to 32 digits"),
    (FOUND.upper(), True, "upper case"),
]


@pytest.mark.parametrize(("trace", "passes", "what"), LOOKUPS, ids=[r[2] for r in LOOKUPS])
def test_lookups(
    tempo: tuple[Tempo, str], tmp_path: Path, trace: str, passes: bool, what: str
) -> None:
    """Found = 200 with spans; 404 and a trace without spans are missing, and the
    recommendation names the id and says to query traces again and cite it verbatim."""
    state, url = tempo
    backend = TraceBackend(url, timeout_s=2.0)
    found = check(_verify(_policies(tmp_path, "fail"), backend, _cites(trace)), "conclusion.traces")
    assert found.passed is passes, found.reason
    if not passes:
        assert trace in (found.recommendation or "") and "query the traces again" in (
            found.recommendation or ""
        )
    if trace == SHORT:
        assert state.asked[f"/api/traces/{HELD}"] == 1  # padded on the wire
    backend.close()


@pytest.mark.parametrize(("on_error", "decision"), [("pass", "approved"), ("fail", "rejected")])
def test_a_timeout_follows_on_error_and_is_degraded(
    tempo: tuple[Tempo, str], tmp_path: Path, on_error: str, decision: str
) -> None:
    """A backend that does not answer in time: the policy's on_error decides, recorded degraded."""
    _, url = tempo
    backend = TraceBackend(url, timeout_s=0.3)
    result = _verify(_policies(tmp_path, on_error), backend, _cites(SLOW))
    found = check(result, "conclusion.traces")
    assert result.decision == decision and found.degraded
    backend.close()


def test_a_refused_connection_is_an_outage() -> None:
    """Nothing listening is an outage (raised), not a missing trace."""
    backend = TraceBackend("http://127.0.0.1:9", timeout_s=0.5)  # nothing listens on port 9
    with pytest.raises(TraceBackendError):
        backend.exists([FOUND])
    backend.close()


def test_a_duplicated_id_is_looked_up_once_and_then_cached(
    tempo: tuple[Tempo, str], tmp_path: Path
) -> None:
    """The same trace cited in three spellings and held by a finding: one request; a second
    verification asks nothing (confirmed ids are cached)."""
    state, url = tempo
    backend = TraceBackend(url, timeout_s=2.0)
    uuid = f"{FOUND[:8]}-{FOUND[8:12]}-{FOUND[12:16]}-{FOUND[16:20]}-{FOUND[20:]}"
    given = _cites(FOUND, FOUND.upper(), uuid)
    given["findings"] = {"trace_finding": {"evidence_ids": [uuid.upper()]}}
    policies = _policies(tmp_path, "fail")
    assert check(_verify(policies, backend, given), "conclusion.traces").passed
    assert check(_verify(policies, backend, given), "conclusion.traces").passed
    assert state.asked[f"/api/traces/{FOUND}"] == 1 and sum(state.asked.values()) == 1
    backend.close()


def test_ids_the_ledger_holds_are_not_looked_up(
    tempo: tuple[Tempo, str], policies: PolicySet
) -> None:
    """A trace query_traces returned in the session is evidence already: no request."""
    state, url = tempo
    backend = TraceBackend(url, timeout_s=2.0)
    services = Services(traces=backend)
    result = layer(policies, "zh", services).verify(
        KIND.assertion(edited("zh", None)), trace_ledger()
    )
    assert result.decision == "approved" and sum(state.asked.values()) == 0
    backend.close()


def test_a_slow_lookup_does_not_hold_up_another_verification(
    tempo: tuple[Tempo, str], tmp_path: Path
) -> None:
    """While one verification waits on a lookup the backend has not answered, others are
    decided: one with no trace to look up, one whose trace the backend answers at once (the
    pool has room for more than one lookup, and no lock is held while waiting)."""
    state, url = tempo
    backend = TraceBackend(url, timeout_s=5.0)
    policies = _policies(tmp_path, "fail")
    waiting: list[Any] = []
    slow = threading.Thread(target=lambda: waiting.append(_verify(policies, backend, _cites(SLOW))))
    slow.start()
    while state.asked[f"/api/traces/{SLOW}"] == 0:  # the slow lookup has reached the server
        threading.Event().wait(0.01)
    other = _verify(policies, backend, _cites("met-1"))
    looked_up = _verify(policies, backend, _cites(FOUND))
    assert other.decision == looked_up.decision == "approved"
    assert not waiting  # both decided while the slow one still waits
    state.release.set()
    slow.join(10)
    assert waiting and waiting[0].decision == "rejected"  # 404 once released
    backend.close()


def test_assertions_look_trace_ids_up_too(tempo: tuple[Tempo, str], policies: PolicySet) -> None:
    """evidence.id_patterns sends an unrecorded trace id in a fact's text to the backend."""
    _, url = tempo
    backend = TraceBackend(url, timeout_s=2.0)
    services = Services(traces=backend, trace_lookup=backend.exists_one)
    run = layer(policies, "en", services)
    found = run.verify(
        Assertion(member="lingflow", type="fact", content=f"502 in trace {FOUND}"), Ledger()
    )
    missing = run.verify(
        Assertion(member="lingflow", type="fact", content=f"502 in trace {NO_SPANS}"), Ledger()
    )
    assert check(found, "evidence.id_patterns").passed
    assert not check(missing, "evidence.id_patterns").passed
    assert "query the traces again" in (check(missing, "evidence.id_patterns").recommendation or "")
    backend.close()


def test_search_returns_padded_ids_and_confirms_them(tempo: tuple[Tempo, str]) -> None:
    """/api/search by service and range: ids padded to 32, and cached as confirmed."""
    state, url = tempo
    backend = TraceBackend(url, timeout_s=2.0)
    found = backend.search("checkout", 1_700_000_000, 1_700_003_600, 20)
    assert [t.trace_id for t in found.traces] == [FOUND, "0" * 16 + "1f2e3d4c5b6a7980"]
    assert backend.exists([FOUND]) == {FOUND: True} and state.asked[f"/api/traces/{FOUND}"] == 0
    assert backend.search("billing", None, None, 5).traces == []
    backend.close()


KEYS = [
    ("4BF92F3577B34DA6A3CE929D0E0E4736", "4bf92f3577b34da6a3ce929d0e0e4736"),
    ("4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "4bf92f3577b34da6a3ce929d0e0e4736"),
    (" dd11bb22cc33dd44ee55ff66 ", HELD),
    ("dd11bb22cc33dd44ee55ff6", None),  # 23 digits: not a trace id
    ("kb:qg-001", None),
    ("zz11bb22cc33dd44ee55ff6600778899", None),
]


@pytest.mark.parametrize(("written", "key"), KEYS)
def test_trace_keys(written: str, key: str | None) -> None:
    """One form: lower case, no dashes, padded to 32; anything else is not a trace id."""
    assert trace_key(written) == key


def test_span_counts_read_both_tempo_shapes() -> None:
    """v1 batches (scopeSpans or instrumentationLibrarySpans) and v2 trace.resourceSpans."""
    v1 = {"batches": [{"instrumentationLibrarySpans": [{"spans": [{}, {}]}]}]}
    v2 = {"trace": {"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}}
    assert (span_count(v1), span_count(v2), span_count({"batches": []}), span_count([])) == (
        2,
        1,
        0,
        0,
    )
