"""evidence.cited_documents: a claim that cites a document agrees with what it says.

A fact that cites a knowledge-base document (its id in ``evidence_ids`` or in the text, or a
URL the knowledge base serves, as a tool returned them in this session) is compared with the
document's whole text, not only with the snippet a search showed and not only with the
document's existence: the runbook says to roll back above 2%, a claim that cites it and says
10% is contradicted. Three outcomes (docs/checks.md):

- contradicted: the document gives the same quantity (a rate, a year, an amount of the same
  unit), a finding, an order or a label's value otherwise: the check fails;
- entailed: what the claim states is in the document (a value agrees, or most of its wording,
  ``coverage``, across languages through the terms lexicon);
- not settled: the document neither backs nor contradicts it: uncertain (``on_uncertain``).

A cited id no tool returned is evidence.cited_ids_exist's failure, not this check's. The
document text comes from the lookup the server provides (``knowledge_base.document``); with
none configured (an offline replay), the check has nothing to compare and passes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lingyi.checks._agreement import (
    Evidence,
    Found,
    Vocabulary,
    clause_features,
    compare,
    names_in,
)
from lingyi.checks._asserted import Clause
from lingyi.checks._registry import (
    CONTRADICTED,
    ENTAILED,
    NOT_SETTLED,
    CheckContext,
    Outcome,
    fail,
    nothing_to_read,
    ok,
    register,
    unsure,
)
from lingyi.checks.facts import Piece, SubjectParams, SubjectSpec, _fact, _of_model
from lingyi.checks.facts import _vocabulary as vocabulary
from lingyi.models import Evidence as EvidenceModel


class DocumentParams(SubjectParams):
    subjects: dict[str, SubjectSpec] = {}
    lookup: str = "knowledge_base.document"  # id -> the document (snippet = its whole text)


_KINDS = frozenset({"rate", "year"})


@register("evidence.cited_documents", DocumentParams)
def cited_documents(ctx: CheckContext, params: DocumentParams) -> Outcome:
    """What a fact states must agree with the documents it cites."""
    lookup = ctx.services.lookups.get(params.lookup)
    if lookup is None or nothing_to_read(ctx):
        return ok(ctx.msg("none"))
    vocab = vocabulary(ctx, params)
    fact = _fact(ctx, params, vocab)
    docs = _documents(lookup, [item.evidence.id for item in fact.anchors])
    if not (fact.clauses and docs):
        return ok(ctx.msg("none"))
    pieces = [_of_model(d, vocab) for d in docs]
    ids = ", ".join(p.id for p in pieces)
    contradictions, doubts = _compared(vocab, fact.clauses, pieces, params.coverage)
    if contradictions:
        what = _described(ctx, contradictions)
        hint = ctx.msg("hint", ids=ids)
        return fail(ctx.msg("contradicted", ids=ids, what=what), hint, **_detail(ids, CONTRADICTED))
    if doubts:
        what = _described(ctx, doubts)
        hint = ctx.msg("hint", ids=ids)
        return unsure(ctx.msg("unsure", ids=ids, what=what), hint, **_detail(ids, NOT_SETTLED))
    return ok(ctx.msg("ok", ids=ids), **_detail(ids, ENTAILED))


Lookup = Callable[[str], list[EvidenceModel]]


def _documents(lookup: Lookup, ids: list[str]) -> list[EvidenceModel]:
    """The cited documents the lookup knows (an id it does not know is no document of its)."""
    return [doc for doc_id in dict.fromkeys(ids) for doc in lookup(doc_id)]


def _compared(
    vocab: Vocabulary, clauses: list[Clause], pieces: list[Piece], coverage: float
) -> tuple[list[Found], list[Found]]:
    """(contradictions, doubts) of the clauses against the documents. A clause with no value
    to compare is backed when the documents hold most of its wording (``coverage``)."""
    evidence = Evidence([p.features for p in pieces], " ".join(p.text for p in pieces), _KINDS)
    contradictions: list[Found] = []
    doubts: list[Found] = []
    for clause in clauses:
        claim = clause_features(clause, vocab)
        titles = {t: names_in(t, vocab) for t in claim.titles}
        verdict = compare(claim, evidence, related=len(pieces), titles=titles, coverage=coverage)
        contradictions += verdict.contradictions
        doubts += verdict.doubts
    return contradictions, doubts


def _described(ctx: CheckContext, found: list[Found]) -> str:
    """The findings in the words evidence.subject_supported gives them (one catalog)."""
    texts = [ctx.msg(f"{_WORDS}.{name}", **values) for name, values in found]
    return ctx.msg(f"{_WORDS}.sep").join(dict.fromkeys(texts))


_WORDS = "evidence.subject_supported"


def _detail(ids: str, outcome: str) -> dict[str, Any]:
    return {"documents": ids, "outcome": outcome}
