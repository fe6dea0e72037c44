"""The guard as one object: layer + log, built from a config.

``Guard.check(assertion, ledger)`` verifies and appends the log record before returning,
which is what the server, the CLI and replay all need.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from lingyi.backends.kb import KnowledgeBase
from lingyi.checks._registry import Services
from lingyi.config import Config
from lingyi.council import CouncilRecord, FileCouncil
from lingyi.layer import ConstraintLayer, Judge
from lingyi.ledger import Ledger
from lingyi.log import VerificationLog, verification_record
from lingyi.models import Assertion, Evidence, VerificationResult
from lingyi.policy import PolicyStore


def trace_lookup(url: str, timeout_s: float) -> Callable[[str], bool]:
    """GET {url}/{id}: 2xx means the id exists, 404 means it does not; anything else raises."""
    client = httpx.Client(timeout=timeout_s)

    def lookup(trace_id: str) -> bool:
        response = client.get(f"{url.rstrip('/')}/{trace_id}")
        if response.status_code == 404:
            return False
        response.raise_for_status()
        return True

    return lookup


Lookup = Callable[[str], list[Evidence]]


def services_from(config: Config, lookups: dict[str, Lookup] | None = None) -> Services:
    ev = config.raw.evidence
    return Services(
        repo_roots=config.repo_roots,
        data_roots=config.data_roots,
        data_sources=sorted(config.raw.data_sources),
        trace_lookup=trace_lookup(ev.trace_backend_url, ev.trace_timeout_s)
        if ev.trace_backend_url
        else None,
        lookups=lookups or {},
    )


def kb_lookup(kb: Callable[[], KnowledgeBase], limit: int = 5) -> Lookup:
    """Active verification against the knowledge base (opened on first use)."""

    def search(query: str) -> list[Evidence]:
        return [hit.to_evidence() for hit in kb().search(query, limit)]

    return search


def found_evidence(result: VerificationResult) -> list[Evidence]:
    """What checks looked up themselves (active verification), to record as evidence."""
    found = (c.detail.get("found") or [] for c in result.checks if c.passed)
    return [Evidence.model_validate(item) for items in found for item in items]


def _judge(config: Config) -> Judge | None:
    if not config.raw.judge.enabled:
        return None
    from lingyi.judge import AnthropicJudge  # the anthropic client loads only when used

    return AnthropicJudge(config.raw.judge)


class Guard:
    """Verify, then log, in that order, before anything else happens."""

    def __init__(self, layer: ConstraintLayer, log: VerificationLog, *, source: str) -> None:
        self.layer, self.log, self.source = layer, log, source

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        source: str,
        council: CouncilRecord | None = None,
        lookups: dict[str, Lookup] | None = None,
    ) -> Guard:
        layer = ConstraintLayer(
            PolicyStore(config.validators_dir),
            council if council is not None else FileCouncil(config.council_path),
            services=services_from(config, lookups),
            language=config.language,
            judge=_judge(config),
            judge_unavailable=config.raw.judge.on_error,
        )
        return cls(
            layer, VerificationLog(config.log_path, fsync=config.raw.log.fsync), source=source
        )

    def check(self, assertion: Assertion, ledger: Ledger) -> VerificationResult:
        """Verify, log, and record what an active lookup found as this session's evidence."""
        result = self.layer.verify(assertion, ledger)
        member = self.member_id(assertion)
        self.log.append(verification_record(assertion, result, self.source, member))
        if found := found_evidence(result):
            ledger.record(assertion.session, member or assertion.member, "lookup", {}, found)
        return result

    def member_id(self, assertion: Assertion) -> str | None:
        member = self.layer.policies.resolve(assertion.member)
        return member.id if member else None

    def close(self) -> None:
        self.log.close()
