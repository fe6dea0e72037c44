"""A session world for the evidence tests: what tools returned, what the council said.

Written for these tests (no sentence of a labelled set): session w1 holds KB, data, audit,
trace and commit evidence; w2 holds none of it. The layer is the shipped policies with a
registry of three data sources.
"""

from __future__ import annotations

from typing import Any

from lingyi.checks._registry import Services
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, Evidence, VerificationResult
from lingyi.policy import PolicySet

TRACE = "c0ffee1234567890abcdef0123456789"  # search-api, 32 hex
UUID_TRACE = "7a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b"  # billing, recorded in UUID form
SHORT_TRACE = "a1b2c3d4e5f60718293a4b5c"  # auth, 24 hex
SHA = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"
ON_RECORD_TRACE = "0badc0de0badc0de0badc0de0badc0de"  # posted by lingflow, never in a ledger

TOOL_RESULTS: list[tuple[str, str, str, dict[str, Any], list[Evidence]]] = [
    (
        "lingzhi",
        "search_knowledge",
        "w1",
        {"query": "庄子"},
        [
            Evidence(
                id="kb:zz-101",
                title="《庄子·齐物论》导读",
                snippet="齐物论以庄周梦蝶作结，主张万物齐同；全篇约两千字。",
                url="https://kb.example.net/zz/qiwulun",
            ),
            Evidence(
                id="kb:zz-102",
                title="庖丁解牛",
                snippet="出自《养生主》，以解牛喻顺应自然之理。",
                url="https://kb.example.net/zz/paoding/",
            ),
        ],
    ),
    (
        "lingzhi",
        "search_knowledge",
        "w1",
        {"query": "Diamond Sutra"},
        [
            Evidence(
                id="kb:fo-201",
                title="The Diamond Sutra in Kumarajiva's translation",
                snippet="Kumarajiva rendered the Diamond Sutra into Chinese in 402 CE.",
                url="https://kb.example.net/fo/diamond",
            )
        ],
    ),
    (
        "lingresearch",
        "analyze_data",
        "w1",
        {"source": "reading_survey", "group_by": "cohort"},
        [
            Evidence(
                id="an-77",
                title="survey satisfaction by cohort",
                snippet="n=640 per cohort; cohort B satisfaction 4.6, cohort A 4.1; p=0.002",
                url="https://data.example.net/an/77",
            )
        ],
    ),
    (
        "lingresearch",
        "access_data_source",
        "w1",
        {"source": "loans_2025"},
        [Evidence(id="ds-loans", title="loans_2025", snippet="8,350 rows; 5 columns")],
    ),
    (
        "lingresearch",
        "analyze_data",
        "w1",
        {"source": "council_activity", "group_by": "member"},
        [
            Evidence(
                id="an-78",
                title="posts by member, June",
                snippet="lingzhi 812; lingflow 455; lingresearch 390",
            )
        ],
    ),
    (
        "lingflow",
        "generate_audit_report",
        "w1",
        {"version": "v2.3"},
        [
            Evidence(
                id="audit-v2.3",
                title="v2.3 audit",
                snippet="3 low findings: stale dependency; verbose errors; missing rate limit. "
                "0 high, 0 medium.",
                url="https://ci.example.net/audit/v2.3/",
            )
        ],
    ),
    (
        "lingflow",
        "query_traces",
        "w1",
        {"service": "search-api"},
        [Evidence(id=TRACE, title="search-api p95 840ms", snippet="cache stampede after deploy")],
    ),
    (
        "lingflow",
        "query_traces",
        "w1",
        {"service": "billing"},
        [Evidence(id=UUID_TRACE, title="billing retries", snippet="retry storm on card declines")],
    ),
    (
        "lingflow",
        "query_traces",
        "w1",
        {"service": "auth"},
        [Evidence(id=SHORT_TRACE, title="auth 429 burst", snippet="rate limiter misconfigured")],
    ),
    (
        "lingflow",
        "git_commit",
        "w1",
        {"repo_path": "var/repos/site", "message": "docs: changelog for v2.3"},
        [Evidence(id=SHA, title="docs: changelog for v2.3", snippet="1 file changed")],
    ),
]

COUNCIL = [
    ("c-1", "lingflow", f"The checkout spike is trace {ON_RECORD_TRACE}."),
    ("c-2", "lingflow", "Audit notes are up at https://ci.example.net/notes/v2.3"),
    ("c-3", "lingresearch", "The June survey report is ready."),
]

DATA_SOURCES = ["reading_survey", "loans_2025", "council_activity"]


def world_ledger() -> Ledger:
    ledger = Ledger()
    for member, tool, session, arguments, evidence in TOOL_RESULTS:
        ledger.record(session, member, tool, arguments, evidence)
    return ledger


def world_layer(policies: PolicySet, **services: Any) -> ConstraintLayer:
    council = MemoryCouncil(
        [CouncilMessage.model_validate({"id": i, "from": f, "content": c}) for i, f, c in COUNCIL]
    )
    return ConstraintLayer(
        policies,
        council,
        services=Services(data_sources=DATA_SOURCES, **services),
        language="en",
    )


def verify(
    layer: ConstraintLayer,
    ledger: Ledger,
    content: str,
    *,
    member: str = "lingflow",
    session: str = "w1",
    kind: str = "fact",
    cited: list[str] | None = None,
) -> VerificationResult:
    assertion = Assertion(
        member=member, type=kind, content=content, session=session, evidence_ids=cited or []
    )
    return layer.verify(assertion, ledger)


def check(result: VerificationResult, code: str) -> CheckResult:
    return next(c for c in result.checks if c.code == code)
