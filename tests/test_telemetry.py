"""Decisions as OpenTelemetry spans, with the real SDK.

One span per guarded call with what was decided (member, tool, type, decision, failed codes,
shadow decision, latency) and never what was said (content, arguments); exported by the SDK's
batch processor, so a collector that fails or hangs never fails or holds up a call. The
exporters here are the SDK's own in-memory one, the real OTLP/HTTP one against a collector
started on loopback by the test, and two test exporters that raise or block (to show the
call does not wait for them).
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lingyi.cli import main
from lingyi.config import TelemetrySection
from lingyi.council import MemoryCouncil
from lingyi.guard import Guard
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.log import VerificationLog
from lingyi.models import Assertion
from lingyi.policy import load_policies
from lingyi.telemetry import SPAN_NAME, Telemetry, telemetry_from, traces_url
from tests.conftest import ROOT, SHIPPED_POLICIES
from tests.loopback import serving

SECRET = "sk-ant-api03-" + "Z" * 40  # an argument no span may carry
CALLS = [
    # (assertion, member, decision, tool, failed code expected)
    ({"member": "lingzhi", "type": "action", "content": "搜索气功",
      "tool_call": {"name": "search_knowledge", "arguments": {"query": "气功"}}},
     "lingzhi", "approved", "search_knowledge", None),
    ({"member": "lingzhi", "type": "action", "content": "look it up",
      "tool_call": {"name": "search_knowledge", "arguments": {"query": "失眠吃什么药"}}},
     "lingzhi", "rejected", "search_knowledge", "boundary.medical"),
    ({"member": "lingyi", "type": "communication", "content": "LingFlow said the v0.99 audit is done"},
     "lingyi", "rejected", None, "communication.on_record"),
    ({"member": "灵研", "type": "fact", "content": f"the key is {SECRET}"},
     "lingresearch", None, None, None),
    ({"member": "nobody", "type": "fact", "content": "hello"},
     "(unknown)", "rejected", None, "member.known"),
]  # fmt: skip


def guard_with(exporter: SpanExporter, tmp_path: Path, policies: Path = SHIPPED_POLICIES) -> Guard:
    layer = ConstraintLayer(load_policies(policies), MemoryCouncil(), language="en")
    log = VerificationLog(tmp_path / "log.jsonl")
    return Guard(layer, log, source="test", telemetry=Telemetry(exporter, "lingyi-test"))


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[tuple[Guard, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    guard = guard_with(exporter, tmp_path)
    yield guard, exporter
    guard.close()


def spans_of(guard: Guard, exporter: InMemorySpanExporter) -> Sequence[ReadableSpan]:
    assert guard.telemetry is not None and guard.telemetry.flush()
    return exporter.get_finished_spans()


@pytest.mark.parametrize(("given", "member", "decision", "tool", "code"), CALLS)
def test_one_span_per_call_with_what_was_decided(
    memory: tuple[Guard, InMemorySpanExporter],
    given: dict[str, Any],
    member: str,
    decision: str | None,
    tool: str | None,
    code: str | None,
) -> None:
    """Each verification (tool calls and assertions, zh and en, approved and rejected, an
    unknown member) is one lingyi.guard span whose attributes are the decision's."""
    guard, exporter = memory
    result = guard.check(Assertion.model_validate(given), Ledger())
    (span,) = spans_of(guard, exporter)
    attrs = dict(span.attributes or {})
    assert span.name == SPAN_NAME
    assert span.resource.attributes["service.name"] == "lingyi-test"
    assert attrs["lingyi.member"] == member and attrs["lingyi.type"] == given["type"]
    assert attrs["lingyi.decision"] == (decision or result.decision.value)
    assert attrs.get("lingyi.tool") == tool
    assert list(attrs["lingyi.codes"]) == result.failed_codes
    assert code is None or code in attrs["lingyi.codes"]
    assert attrs["lingyi.latency_ms"] == result.latency_ms
    assert attrs["lingyi.policy_version"] == result.policy_version
    assert "lingyi.shadow.decision" not in attrs
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time >= span.start_time


@pytest.mark.parametrize(("given", "member", "decision", "tool", "code"), CALLS)
def test_spans_never_carry_content_or_arguments(
    memory: tuple[Guard, InMemorySpanExporter],
    given: dict[str, Any],
    member: str,
    decision: str | None,
    tool: str | None,
    code: str | None,
) -> None:
    """Neither the content nor any argument value (a secret, a medical question) is in any
    attribute of the span."""
    guard, exporter = memory
    guard.check(Assertion.model_validate(given), Ledger())
    (span,) = spans_of(guard, exporter)
    shown = json.dumps({k: str(v) for k, v in (span.attributes or {}).items()}, ensure_ascii=False)
    said = [given["content"], *(given.get("tool_call") or {}).get("arguments", {}).values()]
    assert all(str(text) not in shown for text in said)
    assert SECRET not in shown


def test_the_shadow_decision_is_an_attribute(tmp_path: Path) -> None:
    """A verification with a check in shadow carries the decision enforcing would have made,
    and the shadow codes; the decision attribute is the one enforced."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    common = folder / "_common.toml"
    marker = 'check = "communication.on_record"\n'
    common.write_text(
        common.read_text(encoding="utf-8").replace(marker, marker + 'mode = "shadow"\n', 1),
        encoding="utf-8",
    )
    exporter = InMemorySpanExporter()
    guard = guard_with(exporter, tmp_path, folder)
    try:
        guard.check(Assertion.model_validate(CALLS[2][0]), Ledger())
        (span,) = spans_of(guard, exporter)
    finally:
        guard.close()
    attrs = dict(span.attributes or {})
    assert attrs["lingyi.decision"] == "approved"
    assert attrs["lingyi.shadow.decision"] == "rejected"
    assert list(attrs["lingyi.shadow.codes"]) == ["communication.on_record"]


# --- exporters that fail or hang ------------------------------------------------------------


class Raising(SpanExporter):
    """An exporter that fails every export (a collector that answers 500, in SDK terms)."""

    calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector down")


class Blocking(SpanExporter):
    """An exporter that hangs until released: shows that the call never waits for it."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.exported: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(30)
        self.exported += spans
        return SpanExportResult.SUCCESS


def test_a_failing_exporter_never_fails_the_call(tmp_path: Path) -> None:
    """Every export raises: every call still returns its verdict and is logged."""
    exporter = Raising()
    guard = guard_with(exporter, tmp_path)
    try:
        results = [guard.check(Assertion.model_validate(c[0]), Ledger()) for c in CALLS]
        assert guard.telemetry is not None
        guard.telemetry.flush()
    finally:
        guard.close()
    assert [r.decision.value for r in results][:3] == ["approved", "rejected", "rejected"]
    assert exporter.calls >= 1
    lines = (tmp_path / "log.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(CALLS)


def test_a_hanging_exporter_does_not_hold_up_calls(tmp_path: Path) -> None:
    """While the exporter is stuck in an export, further calls complete (the batch processor
    exports in its own thread); once released, their spans are exported too."""
    exporter = Blocking()
    guard = guard_with(exporter, tmp_path)
    try:
        guard.check(Assertion.model_validate(CALLS[0][0]), Ledger())
        assert guard.telemetry is not None
        flusher = threading.Thread(target=guard.telemetry.flush, daemon=True)
        flusher.start()
        assert exporter.entered.wait(10)  # the exporter is now stuck
        done = [guard.check(Assertion.model_validate(c[0]), Ledger()) for c in CALLS]
        assert len(done) == len(CALLS) and not exporter.release.is_set()
        exporter.release.set()
        flusher.join(10)
        guard.telemetry.flush()
    finally:
        exporter.release.set()
        guard.close()
    assert len(exporter.exported) == len(CALLS) + 1


# --- OTLP over HTTP to a collector on loopback ---------------------------------------------


class Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector's traces endpoint: keeps what was posted, answers 200."""

    received: ClassVar[list[tuple[str, str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.received.append((self.path, self.headers.get("Content-Type", ""), headers, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # quiet test output
        pass


def span_attributes(body: bytes) -> list[dict[str, Any]]:
    """The attributes of every span in an OTLP protobuf export request."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                values = {a.key: a.value.WhichOneof("value") for a in span.attributes}
                found.append(
                    {"name": span.name, **{a.key: getattr(a.value, values[a.key])
                                           for a in span.attributes}}
                )  # fmt: skip
    return found


def test_spans_are_exported_over_otlp_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``[telemetry] enabled``: a replay's verifications reach the collector as a protobuf
    POST to /v1/traces, one span per assertion, with the headers from ``headers_env``."""
    Collector.received.clear()
    monkeypatch.setenv("LINGYI_TEST_OTLP_HEADERS", "authorization=Bearer t0ken")
    transcript = ROOT / "examples" / "council-english.jsonl"
    with serving(Collector) as url:
        config = tmp_path / "lingyi.toml"
        config.write_text(
            f'language = "en"\n[paths]\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n'
            f'council = "{(tmp_path / "council.jsonl").as_posix()}"\n'
            f'[telemetry]\nenabled = true\nendpoint = "{url}"\nservice_name = "guard-e2e"\n'
            'headers_env = "LINGYI_TEST_OTLP_HEADERS"\n',
            encoding="utf-8",
        )
        code = main(["--config", str(config), "--log", str(tmp_path / "log.jsonl"),
                     "replay", str(transcript)])  # fmt: skip
    assert code == 0
    assert Collector.received
    assert {(path, kind) for path, kind, _, _ in Collector.received} == {
        ("/v1/traces", "application/x-protobuf")
    }
    assert all(h.get("authorization") == "Bearer t0ken" for _, _, h, _ in Collector.received)
    spans = [s for *_, body in Collector.received for s in span_attributes(body)]
    assertions = sum('"event":"assertion"' in line for line in transcript.read_text().splitlines())
    assert len(spans) == assertions
    assert {s["name"] for s in spans} == {SPAN_NAME}
    assert {s["lingyi.decision"] for s in spans} <= {"approved", "rejected", "fallback"}
    assert all(s["lingyi.source"] == "replay" for s in spans)


def test_an_absent_collector_never_fails_a_replay(tmp_path: Path) -> None:
    """Nothing listens at the endpoint: the replay still decides and logs every assertion."""
    with socket.socket() as probe:  # a port that was free a moment ago and is closed now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "lingyi.toml"
    config.write_text(
        f'[paths]\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\n'
        f'council = "{(tmp_path / "council.jsonl").as_posix()}"\n'
        f'[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:{port}"\ntimeout_s = 0.5\n',
        encoding="utf-8",
    )
    log = tmp_path / "log.jsonl"
    code = main(["--config", str(config), "--log", str(log), "replay",
                 str(ROOT / "examples" / "council-chinese.jsonl")])  # fmt: skip
    assert code == 0 and len(log.read_text(encoding="utf-8").splitlines()) > 10


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://otel.example/v1/traces", "https://otel.example/v1/traces"),
    ],
)
def test_the_traces_url_of_an_endpoint(endpoint: str, url: str) -> None:
    """The endpoint is the collector's base; /v1/traces is added unless it is there."""
    assert traces_url(endpoint) == url


def test_off_by_default() -> None:
    """Without ``[telemetry] enabled = true`` there is no telemetry (and no SDK to load)."""
    assert TelemetrySection().enabled is False
    assert telemetry_from(TelemetrySection()) is None
    assert isinstance(telemetry_from(TelemetrySection(enabled=True)), Telemetry)
