"""The guard as one object: layer + log, built from a config.

``Guard.check(assertion, ledger)`` verifies and appends the log record before returning,
which is what the server, the CLI and replay all need: the guard owns verify → log for
every path, so no caller decides or writes the log itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from lingyi.backends.kb import KnowledgeBase, open_kept
from lingyi.backends.kb.search import document_url
from lingyi.checks._registry import Services
from lingyi.config import Config, defaults_dir
from lingyi.council import CouncilRecord, FileCouncil
from lingyi.errors import PolicyError
from lingyi.kinds import kind_of
from lingyi.layer import ConstraintLayer, Judge, Scope
from lingyi.ledger import Ledger
from lingyi.log import VerificationLog, verification_record
from lingyi.log.setup import open_log
from lingyi.models import Assertion, Evidence, OnFail, VerificationResult
from lingyi.policy import PolicySet, PolicyStore, load_policies
from lingyi.telemetry import telemetry_from

if TYPE_CHECKING:  # the trace client brings httpx: only a deployment with traces loads it
    from lingyi.backends.traces import TraceBackend
    from lingyi.telemetry import Telemetry


def trace_lookup(url: str, timeout_s: float) -> Callable[[str], bool]:
    """GET {url}/{id}: 2xx means the id exists, 404 means it does not; anything else raises."""
    from lingyi.backends.traces import TraceBackend

    return TraceBackend.legacy(url, timeout_s).exists_one


def trace_backend(config: Config) -> TraceBackend | None:
    """The deployment's trace API: ``[traces] base_url``, else the older
    ``[evidence] trace_backend_url`` (GET {url}/{id}), else none."""
    traces, ev = config.raw.traces, config.raw.evidence
    if not (traces.base_url or ev.trace_backend_url):
        return None
    from lingyi.backends.traces import TraceBackend

    if traces.base_url:
        return TraceBackend(
            traces.base_url,
            timeout_s=traces.timeout_s,
            concurrency=traces.concurrency,
            cache_size=traces.cache_size,
        )
    if ev.trace_backend_url:
        return TraceBackend.legacy(ev.trace_backend_url, ev.trace_timeout_s)
    return None


Lookup = Callable[[str], list[Evidence]]


def services_from(config: Config, lookups: dict[str, Lookup] | None = None) -> Services:
    traces = trace_backend(config)
    return Services(
        repo_roots=config.repo_roots,
        data_roots=config.data_roots,
        data_sources=sorted(config.raw.data_sources),
        trace_lookup=traces.exists_one if traces else None,
        traces=traces,
        lookups=lookups or {},
        max_text_chars=config.raw.limits.max_text_chars,
    )


def shipped_policies() -> Path:
    """The policies lingyi ships: what a deployment's policies may not be weaker than."""
    return defaults_dir() / "validators"


KB_TOOL = "search_knowledge"  # the tool the knowledge base serves; its domains are the KB's


def kb_domains(policies: PolicySet) -> list[str] | None:
    """The knowledge base's domains: the ``domains`` values of the tool that searches it
    (灵知's policy), so the KB keeps no list of its own. None: any domain."""
    owner = policies.tool_owner(KB_TOOL)
    spec = owner.tools[KB_TOOL].args.get("domains") if owner else None
    return spec.values if spec else None


def open_kb(
    config: Config, policies: PolicySet | None = None, *, watch: bool = True
) -> KnowledgeBase:
    """The deployment's knowledge base with the domains its policy allows (any domain when
    the policies cannot be read: a broken policy must not hide the KB's own problems).
    Its index is kept in the user's cache: a restart reads only the files that changed.
    ``watch``: follow changes in the background (a one-shot command need not)."""
    if policies is None:
        try:
            policies = load_policies(
                config.validators_dir, require_shared=config.raw.policies.require_shared
            )
        except PolicyError:
            return open_kept(config.kb_dir, watch=watch)
    return open_kept(config.kb_dir, kb_domains(policies), watch=watch)


def kb_lookup(kb: Callable[[], KnowledgeBase], limit: int = 5, url_base: str = "") -> Lookup:
    """Active verification against the knowledge base (opened on first use)."""

    def search(query: str) -> list[Evidence]:
        return [hit.with_url(url_base).to_evidence() for hit in kb().search(query, limit)]

    return search


def kb_document(kb: Callable[[], KnowledgeBase], url_base: str = "") -> Lookup:
    """A cited document's whole text (its body as the snippet), for evidence.cited_documents;
    nothing for an id the knowledge base does not hold."""

    def document(doc_id: str) -> list[Evidence]:
        doc = kb().get(doc_id)
        if doc is None:
            return []
        url = document_url(url_base, doc.id) if url_base else None
        return [Evidence(id=doc.id, title=doc.title, snippet=doc.body, url=url)]

    return document


def kb_lookups(kb: Callable[[], KnowledgeBase], url_base: str = "") -> dict[str, Lookup]:
    """The lookups the knowledge base serves the checks: search, and a document by id."""
    return {
        "knowledge_base": kb_lookup(kb, url_base=url_base),
        "knowledge_base.document": kb_document(kb, url_base),
    }


def _judge(config: Config) -> Judge | None:
    if not config.raw.judge.enabled:
        return None
    from lingyi.judge import Judge as ModelJudge  # the anthropic client loads only when used

    return ModelJudge(config.raw.judge)


def layer_from(
    config: Config,
    policies: PolicyStore | PolicySet,
    council: CouncilRecord,
    lookups: dict[str, Lookup] | None = None,
) -> ConstraintLayer:
    """The constraint layer the config describes, over ``policies`` (a store that reloads, or
    one fixed snapshot: ``lingyi policy diff`` decides under two of them)."""
    return ConstraintLayer(
        policies,
        council,
        services=services_from(config, lookups),
        language=config.language,
        judge=_judge(config),
        judge_unavailable=config.raw.judge.on_error,
    )


class Guard:
    """Verify, then log, in that order, before anything else happens."""

    def __init__(
        self,
        layer: ConstraintLayer,
        log: VerificationLog,
        *,
        source: str,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.layer, self.log, self.source = layer, log, source
        self.telemetry = telemetry  # one span per verification, when [telemetry] is enabled

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        source: str,
        council: CouncilRecord | None = None,
        lookups: dict[str, Lookup] | None = None,
    ) -> Guard:
        store = PolicyStore(
            config.validators_dir,
            require_shared=config.raw.policies.require_shared,
            judge_on_fail=OnFail(config.raw.judge.on_fail),
            baseline=shipped_policies(),
            allow_weakening=config.raw.policies.allow_weakening,
        )
        council = council if council is not None else FileCouncil(config.council_path)
        layer = layer_from(config, store, council, lookups)
        telemetry = telemetry_from(config.raw.telemetry)
        return cls(layer, open_log(config), source=source, telemetry=telemetry)

    def check(
        self, assertion: Assertion, ledger: Ledger, **scope: Unpack[Scope]
    ) -> VerificationResult:
        """Verify, log, and record what an active lookup found as this session's evidence.

        Every path goes through here: a tool call, a bare assertion, a council post, a token
        speaking for a member it is not bound to (``auth.member_bound``, a check like any
        other). ``scope`` is the request's policy snapshot and principal (see ``Scope``).
        """
        started = time.time_ns()
        result = self.layer.verify(assertion, ledger, **scope)
        if (kind := kind_of(assertion.type.value)) is not None:
            result.outputs = kind.finish(assertion, result, ledger.open(assertion.session))
        self.log.append(verification_record(assertion, result, self.source, result.member))
        if found := result.found:
            ledger.record(assertion.session, result.member or assertion.member, "lookup", {}, found)
        if self.telemetry is not None:  # after the log: the record never waits for a span
            self.telemetry.record(assertion, result, self.source, started)
        return result

    def close(self) -> None:
        self.log.close()
        if self.telemetry is not None:
            self.telemetry.close()
        close_judge = getattr(self.layer.judge, "close", None)  # the judge's loop and client
        if callable(close_judge):
            close_judge()
        close_traces = getattr(self.layer.services.traces, "close", None)  # its HTTP client
        if callable(close_traces):
            close_traces()
