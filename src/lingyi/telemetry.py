"""Decisions as OpenTelemetry spans: one span per guarded call, exported over OTLP/HTTP.

Off by default (``[telemetry] enabled = true`` turns it on). The OpenTelemetry SDK and its
OTLP exporter are imported only then: the CLI's verify, replay and review commands of a
deployment without telemetry never load them (tests/test_imports.py).

A span says what was decided, never about what: its attributes are the member, the tool, the
type, the decision, the codes of the failed checks, the shadow decision, the policy version and
the latency. No content, no arguments (they may hold secrets), no session name.

Spans are queued and exported by the SDK's batch processor in its own thread, so an absent,
slow or failing collector never fails or delays a call; past the queue, spans are dropped
(the verification log, not the tracing, is the record).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lingyi._logging import get_logger
from lingyi.models import Assertion, VerificationResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from lingyi.config import TelemetrySection

log = get_logger()

SPAN_NAME = "lingyi.guard"
SCOPE = "lingyi"  # the instrumentation scope of the spans
TRACES_PATH = "/v1/traces"
UNKNOWN = "(unknown)"  # the member of a call whose member no policy names


def attributes(assertion: Assertion, result: VerificationResult, source: str) -> dict[str, Any]:
    """The span's attributes: what was decided, by which policy, how fast; nothing said."""
    call = assertion.tool_call
    found: dict[str, Any] = {
        "lingyi.member": result.member or UNKNOWN,
        "lingyi.type": assertion.type.value,
        "lingyi.decision": result.decision.value,
        "lingyi.codes": result.failed_codes,
        "lingyi.latency_ms": result.latency_ms,
        "lingyi.policy_version": result.policy_version,
        "lingyi.source": source,
    }
    if call is not None:
        found["lingyi.tool"] = call.name
    if result.shadow is not None:
        found["lingyi.shadow.decision"] = result.shadow.decision.value
        found["lingyi.shadow.codes"] = result.shadow.codes
    return found


class Telemetry:
    """One tracer provider of this process's own (never the global one), its exporter
    behind a batch processor."""

    def __init__(self, exporter: SpanExporter, service_name: str) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.provider: TracerProvider = TracerProvider(
            resource=Resource.create({"service.name": service_name})
        )
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer(SCOPE)

    def record(
        self, assertion: Assertion, result: VerificationResult, source: str, started_ns: int
    ) -> None:
        """One span from ``started_ns`` to now. Never raises: tracing must not fail a call."""
        try:
            span = self.tracer.start_span(
                SPAN_NAME, start_time=started_ns, attributes=attributes(assertion, result, source)
            )
            span.end()
        except Exception:  # a tracing bug is logged, the call goes on
            log.exception("telemetry.span_failed")

    def flush(self, timeout_s: float = 5.0) -> bool:
        return self.provider.force_flush(int(timeout_s * 1000))

    def close(self) -> None:
        """Export what is queued (bounded by the exporter's timeout), then stop."""
        try:
            self.provider.shutdown()
        except Exception:
            log.exception("telemetry.shutdown_failed")


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's endpoint."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def export_headers(env: str) -> dict[str, str]:
    """``name=value,name=value`` from the environment variable ``env`` (empty: none)."""
    text = os.environ.get(env, "") if env else ""
    pairs = (part.split("=", 1) for part in text.split(",") if "=" in part)
    return {name.strip(): value.strip() for name, value in pairs if name.strip()}


def telemetry_from(section: TelemetrySection) -> Telemetry | None:
    """The deployment's telemetry, or None when it is off (nothing of OpenTelemetry loaded)."""
    if not section.enabled:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(
        endpoint=traces_url(section.endpoint),
        headers=export_headers(section.headers_env),
        timeout=section.timeout_s,
    )
    log.info("telemetry.enabled", endpoint=traces_url(section.endpoint))
    return Telemetry(exporter, section.service_name)
