"""A conclusion to vary, and a way to verify one through the layer (shared by the tests).

``incident(lang)`` is a conclusion every conclusion check passes in session ``s1``: three real
findings and a placeholder, the trace id recorded by ``query_traces``, a rollback that says
verify_first. Tests rewrite one part of it (``edited``) and look at one check's result.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from lingyi.checks._registry import Services
from lingyi.conclusions import KIND
from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import CheckResult, Evidence, VerificationResult
from lingyi.policy import PolicySet

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_UUID = f"{TRACE[:8]}-{TRACE[8:12]}-{TRACE[12:16]}-{TRACE[16:20]}-{TRACE[20:]}"
SESSION = "s1"

TEXTS = {
    "zh": ("checkout 的 502 源于 v2.3 发布后连接池耗尽", "v2.3 把连接池上限调成了 5"),
    "en": ("The checkout 502s come from pool exhaustion after v2.3", "v2.3 set the pool size to 5"),
}


def incident(lang: str = "en") -> dict[str, Any]:
    summary, hypothesis = TEXTS[lang]
    return {
        "id": "c-1",
        "session": SESSION,
        "member": "lingflow",
        "conclusion": {
            "summary": summary,
            "confidence": "高" if lang == "zh" else "high",
            "evidence_ids": [TRACE, "met-1", "dep-1"],
            "hypotheses": [
                {
                    "text": hypothesis,
                    "risk_level": "high",
                    "actions": [{"name": "rollback", "args": {"to": "v2.2"}, "verify_first": True}],
                },
                {"text": hypothesis, "risk_level": "low", "actions": [{"name": "notify_team"}]},
            ],
        },
        "findings": {
            "trace_finding": {"evidence_ids": [TRACE]},
            "metric_finding": {"evidences": [{"id": "met-1", "value": 5}]},
            "deploy_finding": {"evidence_ids": ["dep-1"], "fallback": False},
            "log_finding": {"fallback": True},
        },
    }


Edit = Callable[[dict[str, Any]], None]


def edited(lang: str, edit: Edit | None) -> dict[str, Any]:
    given = copy.deepcopy(incident(lang))
    if edit is not None:
        edit(given)
    return given


def trace_ledger() -> Ledger:
    ledger = Ledger()
    ledger.record(
        SESSION, "lingflow", "query_traces", {"service": "checkout"}, [Evidence(id=TRACE)]
    )
    return ledger


def layer(policies: PolicySet, lang: str, services: Services | None = None) -> ConstraintLayer:
    return ConstraintLayer(policies, MemoryCouncil(), services=services, language=lang)


def verify(
    policies: PolicySet, given: dict[str, Any], lang: str = "en", ledger: Ledger | None = None
) -> VerificationResult:
    assertion = KIND.assertion(given)
    return layer(policies, lang).verify(assertion, ledger if ledger is not None else trace_ledger())


def check(result: VerificationResult, code: str) -> CheckResult:
    return next(c for c in result.checks if c.code == code)


def conclusion(given: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = given["conclusion"]
    return body


def findings(given: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = given["findings"]
    return found
