"""evidence.subject_supported: a fact agrees with the evidence it rests on.

A fact about a verifiable subject (the KB, a data set, a repository, an audit, a service)
needs evidence recorded in this session that supports it. Related evidence is not yet
supporting evidence: what the fact states (numbers, versions, names, titles, counts, whose
value, which is higher, findings or none) must agree with the evidence it cites, or, when it
cites none, with the session's evidence on its subject (see :mod:`lingyi.checks._agreement`).
Evidence that contradicts the fact fails it; evidence on the subject that neither confirms
nor contradicts it makes the check uncertain (its policy's ``on_uncertain`` decides).

What a text IS decides what is checked (:mod:`lingyi.checks._asserted`): questions,
requests, hedged clauses, a member's own plans, lead-ins and labelled or predicted
inferences assert no fact; another member's relayed words are communication.on_record's;
the declared type exempts nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from weakref import WeakKeyDictionary

from pydantic import Field, PrivateAttr

from lingyi import messages
from lingyi._regex import lazy_re
from lingyi.checks._agreement import (
    Evidence,
    Features,
    Found,
    Verdict,
    Vocabulary,
    clause_features,
    compare,
    contradicts,
    evidence_features,
    features,
    has_entities,
    names_in,
    numeric,
    overlaps,
)
from lingyi.checks._asserted import Assertions, Clause, Span, asserted, masked
from lingyi.checks._registry import (
    CONTRADICTED,
    ENTAILED,
    NO_RECORD,
    NOT_SETTLED,
    CheckContext,
    CheckParams,
    Outcome,
    fail,
    nothing_to_read,
    ok,
    register,
    unsure,
)
from lingyi.checks.claims import Clause as ClaimClause
from lingyi.checks.claims import Vocabulary as ClaimVocabulary
from lingyi.checks.claims import compare as compare_clause
from lingyi.checks.communication import CommunicationParams, members_named, query_terms, vocabulary
from lingyi.checks.evidence import relays, urls_in
from lingyi.checks.inference import prediction_signal
from lingyi.checks.relays import quoted_spans
from lingyi.ledger import Item, SessionLedger, number_key
from lingyi.models import Evidence as EvidenceModel
from lingyi.policy import LexiconRef
from lingyi.text import TermMatcher, canonical, canonical_text
from lingyi.text._lang import bigrams, content_query, words


class SubjectSpec(CheckParams):
    tools: list[str]
    markers: list[str] = []  # besides the markers lexicon's group of the subject's name
    lookup: str | None = None  # a lookup service the server provides, e.g. "knowledge_base"
    data_sources: bool = False  # the names of registered data sources mark it too


class SubjectParams(CheckParams):
    subjects: dict[str, SubjectSpec]
    stop_terms: list[str] = []  # words that say nothing about a subject, besides "generic"
    markers: LexiconRef = ""  # groups named by subject; "<subject>.quantity" needs a number
    assertions: LexiconRef = ""  # what a clause does: question, request, hedge, plan, …
    names: LexiconRef = ""  # proper names in every language: entities a fact states
    terms: LexiconRef = ""  # the council's nouns in every language: for coverage
    coverage: float = Field(0.5, ge=0, le=1)  # share of a clause's wording evidence must hold
    related: int = Field(5, ge=1, le=64)  # evidence items a fact is compared with, at most
    _vocabulary: Vocabulary | None = PrivateAttr(None)


_NONE = TermMatcher({})


def _matcher(ctx: CheckContext, ref: str) -> TermMatcher:
    return ctx.lexicon(ref).matcher if ref else _NONE


@lru_cache(maxsize=64)
def _extra(words_: tuple[str, ...]) -> TermMatcher:
    return TermMatcher({"extra": words_})


_FORMS: WeakKeyDictionary[TermMatcher, dict[str, tuple[str, ...]]] = WeakKeyDictionary()


def _forms(ctx: CheckContext, refs: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Every canonical form of every group of the name and term lexicons (cached per load)."""
    out: dict[str, tuple[str, ...]] = {}
    for ref in (r for r in refs if r):
        lexicon = ctx.lexicon(ref)
        if lexicon.matcher not in _FORMS:
            _FORMS[lexicon.matcher] = {g: lexicon.terms(g) for g in lexicon.groups}
        out.update(_FORMS[lexicon.matcher])
    return out


def _vocabulary(ctx: CheckContext, params: SubjectParams) -> Vocabulary:
    """The matchers of the check's lexicons, built once per loaded policy entry (the
    parameters and the lexicons are loaded, and reloaded, together)."""
    if params._vocabulary is None:
        params._vocabulary = _build_vocabulary(ctx, params)
    return params._vocabulary


def _build_vocabulary(ctx: CheckContext, params: SubjectParams) -> Vocabulary:
    owners = tuple(
        (canonical_text(n), m.id) for m in ctx.policies.members.values() for n in m.names
    )
    extra = [*params.stop_terms, *(m for s in params.subjects.values() for m in s.markers)]
    extra += [name for name, _ in owners]  # "LingResearch here." is who speaks, not what
    return Vocabulary(
        names=_matcher(ctx, params.names),
        terms=_matcher(ctx, params.terms),
        assertions=_matcher(ctx, params.assertions),
        subjects=_matcher(ctx, params.markers),
        extra=_extra(tuple(extra)),
        owners=owners,
        forms=_forms(ctx, (params.names, params.terms)),
        combined=TermMatcher(_combined_groups(ctx, params, extra)),
    )


def _combined_groups(
    ctx: CheckContext, params: SubjectParams, extra: list[str]
) -> dict[str, tuple[str, ...]]:
    """Names, terms and the words to ignore, as groups of one automaton (one pass a text)."""
    groups: dict[str, tuple[str, ...]] = {}
    for kind, ref in (("name", params.names), ("term", params.terms)):
        if ref:
            groups |= {f"{kind}:{g}": t for g, t in ctx.lexicon(ref).groups.items()}
    markers = ctx.lexicon(params.markers).groups if params.markers else {}
    generic = ctx.lexicon(params.assertions).groups.get("generic", ()) if params.assertions else ()
    ignored = [t for terms in markers.values() for t in terms] + [*generic, *extra]
    return groups | {"ignore:words": tuple(ignored)}


@dataclass
class Fact:
    """The speaker's own statements of fact in a text, and what they rest on."""

    clauses: list[Clause]
    anchors: list[Item]  # evidence the text cites or names
    subjects: list[str]


# A token that may be an evidence id: it has a digit (kb:zz-101, an-77, audit-v2.3, hex).
_ID_TOKEN = lazy_re(r"[0-9a-z][0-9a-z:_./\-]{2,}[0-9a-z]")


def _named(ctx: CheckContext, ledger: SessionLedger) -> list[tuple[int, int, Item]]:
    """(start, end, item) of each recorded id the text names."""
    out = []
    for match in _ID_TOKEN.finditer(ctx.canon.text):
        if any(c.isdigit() for c in match.group(0)):
            item = ledger.get(match.group(0))
            if item is not None:
                out.append((match.start(), match.end(), item))
    return out


def _anchors(
    ctx: CheckContext, ledger: SessionLedger, named: list[tuple[int, int, Item]]
) -> list[Item]:
    """Recorded evidence the assertion cites, or names in its text (an id or a URL)."""
    cited = [ledger.get(i) for i in ctx.assertion.evidence_ids]
    urls = [ledger.by_url(u) for u, _, _ in urls_in(ctx)]
    in_text = [i for _, _, i in named]
    found = [i for i in [*cited, *in_text, *(x for u in urls for x in u)] if i is not None]
    return list({id(i): i for i in found}.values())


@lru_cache(maxsize=64)
def _aliased(names: tuple[str, ...]) -> re.Pattern[str]:
    """A member named with an alias in brackets, then a speech verb: "灵研(lingyan)说…"."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(
        rf"(?<![a-z0-9])(?:{alt})\s*\([^)]{{1,24}}\)\s*(?:说|表示|提到|告诉|said|says|told|reported)"
        r"[^。!?\n]*"
    )


def _relayed(ctx: CheckContext) -> list[tuple[int, int]]:
    """Spans that report another member's words: find_relays, and the bracketed-alias form."""
    spans = [(r.start, r.end) for r in relays(ctx)]
    names = tuple(
        n for m in ctx.policies.members.values() if m.id != ctx.member.id for n in m.names
    )
    pattern = _aliased(tuple(canonical_text(n) for n in names))
    return spans + [(m.start(), m.end()) for m in pattern.finditer(ctx.canon.text)]


# Hex ids (trace ids, SHAs, UUIDs), recorded or not: their digits are no numbers of the fact
# (evidence.id_patterns checks them).
_HEXLIKE = lazy_re(
    r"(?<![0-9a-z])(?=[0-9a-f-]*[a-f])(?=[0-9a-f-]*\d)[0-9a-f][0-9a-f-]{6,}(?![0-9a-z])"
)


def _masks(ctx: CheckContext, named: list[tuple[int, int, Item]]) -> list[tuple[int, int, str]]:
    """What is not the speaker's own fact: relayed spans, quoted and fenced text (an example
    of a bad sentence is not the speaker's claim), URLs, recorded and hex ids."""
    spans = [(start, end, "\n") for start, end in _relayed(ctx)]
    spans += [(s, e, "\n") for s, e in quoted_spans(ctx.canon.text, ctx.policies)]
    spans += [(s, e, " ") for _, s, e in urls_in(ctx)]
    spans += [(m.start(), m.end(), " ") for m in _HEXLIKE.finditer(ctx.canon.text)]
    return spans + [(s, e, " ") for s, e, _ in named]


_LABEL = lazy_re(r"^\W*(?:[【\[(]\s*)?(?:推演|推断|推测|inference|prediction)\s*[】\]):]")


def _is_fact(sentence: Span) -> bool:
    """Labelled or predicted inferences are not facts (inference.labelled holds them to a
    label)."""
    return not _LABEL.match(sentence.text) and prediction_signal(sentence.text) is None


def _has_marker(text: str, vocab: Vocabulary) -> bool:
    return bool(vocab.subjects.find(text) or vocab.extra.find(text))


def _fact(ctx: CheckContext, params: SubjectParams, vocab: Vocabulary) -> Fact:
    ledger = ctx.ledger.session(ctx.assertion.session)
    named = _named(ctx, ledger)
    span = masked(ctx.canon, _masks(ctx, named))
    assertions = Assertions(vocab.assertions, tuple(n for n, _ in vocab.owners))

    def lead_in(part: Span) -> bool:  # no number, title, id or subject: only a lead-in
        return not has_entities(part.text) and not _has_marker(part.text, vocab)

    clauses = asserted(span, assertions, lead_in, _is_fact)
    return Fact(clauses, _anchors(ctx, ledger, named), _subjects(ctx, params, vocab, clauses))


def _subjects(
    ctx: CheckContext, params: SubjectParams, vocab: Vocabulary, clauses: list[Clause]
) -> list[str]:
    """The subjects the clauses are about, in the policy's order."""
    groups: set[str] = set()
    for clause in clauses:
        counted = bool(re.search(r"\d", numeric(clause.text)))
        for hit in vocab.subjects.find(clause.text):
            groups |= {g.removesuffix(".quantity") for g in hit.groups if counted or "." not in g}
    text = " ".join(c.text for c in clauses)
    sources = [canonical_text(s) for s in ctx.services.data_sources]
    return [
        name
        for name, spec in params.subjects.items()
        if name in groups
        or any(canonical_text(m) in text for m in spec.markers)
        or (spec.data_sources and any(s in text for s in sources))
    ]


@register("evidence.subject_supported", SubjectParams)
def subject_supported(ctx: CheckContext, params: SubjectParams) -> Outcome:
    """A fact about a verifiable subject needs evidence from this session that supports it.

    Where a lookup service is configured for the subject (the KB), the check may verify
    actively: it searches, and passes with what it found in ``Outcome.found``.
    """
    if nothing_to_read(ctx):  # no clause; the session is looked at as a reading would
        ctx.ledger.session(ctx.assertion.session)
        return ok(ctx.msg("nothing"))
    vocab = _vocabulary(ctx, params)
    fact = _fact(ctx, params, vocab)
    if not fact.clauses:
        return ok(ctx.msg("nothing"))
    if not (fact.anchors or fact.subjects):
        return _named_only(ctx, vocab, fact)
    if fact.anchors:
        pieces = [_of_item(i, vocab) for i in fact.anchors]
        return _judged(ctx, params, vocab, fact, pieces, [], cited=True)
    return _by_subject(ctx, params, vocab, fact)


def _named_only(ctx: CheckContext, vocab: Vocabulary, fact: Fact) -> Outcome:
    """No subject, no citation, but the fact names what the session's evidence is about
    (a title, a name): it must not contradict that evidence."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    for clause in fact.clauses:
        claim = clause_features(clause, vocab)
        if not (claim.names or claim.titles):
            continue
        keys = _name_keys(claim, vocab)
        pieces = [_of_item(i, vocab) for i in ledger.related(keys, ledger.tools(), 8)]
        pieces = [p for p in pieces if _names_shared(claim, p)]
        verdict = contradicts(claim, Evidence([p.features for p in pieces], ""))
        if verdict.contradictions:
            ids = ", ".join(p.id for p in pieces)
            what = _described(ctx, verdict.contradictions)
            hint = ctx.msg("hint_contradicted", ids=ids)
            return fail(
                ctx.msg("contradicted", ids=ids, what=what),
                hint,
                evidence=ids,
                outcome=CONTRADICTED,
            )
    return ok(ctx.msg("nothing"))


def _name_keys(claim: Features, vocab: Vocabulary) -> set[str]:
    forms = [f for n in claim.names for f in vocab.forms.get(n, ())] + list(claim.titles)
    return {k for f in forms for k in _split(f)}


def _names_shared(claim: Features, piece: Piece) -> bool:
    return bool(claim.names & piece.features.names) or any(t in piece.text for t in claim.titles)


def _by_subject(ctx: CheckContext, params: SubjectParams, vocab: Vocabulary, fact: Fact) -> Outcome:
    """No citation: the session's evidence on the subject, else what a lookup finds."""
    ledger = ctx.ledger.session(ctx.assertion.session)
    specs = [params.subjects[s] for s in fact.subjects]
    tools = list(dict.fromkeys(t for s in specs for t in s.tools))
    empty = [n for n, s in zip(fact.subjects, specs, strict=True) if not ledger.count_from(s.tools)]
    related = ledger.related(_keys(fact, vocab), tools, _limit(fact, vocab, params.related))
    if related and not empty:
        return _judged(ctx, params, vocab, fact, [_of_item(i, vocab) for i in related], [])
    found = _look_up(ctx, vocab, fact, specs)
    if found:
        pieces = [_of_model(e, vocab) for e in found]
        return _judged(ctx, params, vocab, fact, pieces, found)
    # A subject the server can look up (the KB) is settled by looking; another member's
    # work (an audit, a branch, an analysis) by what that member posted.
    looked = any(s.lookup for s in specs)
    if not looked and (backing := on_council_record(ctx, fact.clauses)):
        return ok(ctx.msg("on_record", ids=backing), evidence=backing, outcome=ENTAILED)
    name = (empty or fact.subjects)[0]
    return _unsupported(ctx, name, params.subjects[name])


def on_council_record(ctx: CheckContext, clauses: list[Clause]) -> str:
    """The council messages that back every clause (a fact that restates the record: the
    audit is done, as 灵通 posted), or "" when one clause is backed by none. The record is
    read as communication.on_record reads it (lingyi.checks.claims). Only the messages of
    the other members the fact names back it: a restatement says whose record it restates,
    and a member's own earlier post is no evidence of what it says."""
    named = members_named(" ".join(c.text for c in clauses), ctx.policies) - {ctx.member.id}
    if not named:
        return ""
    vocab = vocabulary(ctx, CommunicationParams())
    senders = [n for m in named for n in ctx.policies.members[m].names]
    backing: list[str] = []
    for clause in clauses:
        for part in vocab.analyse(
            clause.cased if len(clause.cased) == len(clause.text) else clause.text
        ).clauses:
            found = _backing(ctx, vocab, senders, part)
            if found is None:
                return ""
            backing.append(found)
    return ", ".join(dict.fromkeys(backing))


def _backing(
    ctx: CheckContext, vocab: ClaimVocabulary, senders: list[str], part: ClaimClause
) -> str | None:
    for message in ctx.council.search(senders, query_terms(vocab, part), 5):
        said = vocab.analyse(canonical(message.content).cased)
        if compare_clause(_unnamed(ctx, part, message.sender), said).supports:
            return message.id
    return None


def _unnamed(ctx: CheckContext, part: ClaimClause, sender: str) -> ClaimClause:
    """The clause without the sender's own name: "LingFlow's audit is done" is what the
    message from LingFlow says, though it does not name itself."""
    member = ctx.policies.resolve(sender)
    key = f"c:member.{member.id if member else sender}"
    return replace(part, units=part.units - {key}) if key in part.units else part


def _limit(fact: Fact, vocab: Vocabulary, related: int) -> int:
    """How many pieces to compare with: more when a clause counts documents ("8 篇")."""
    counts = [n for c in fact.clauses for n in clause_features(c, vocab).counts]
    return min(64, max([related, *counts]))


def _keys(fact: Fact, vocab: Vocabulary) -> set[str]:
    """What to find related evidence by: what the clauses state (not the subject markers
    and generic words), numbers, and every form of each name and term group."""
    keys: set[str] = set()
    for clause in fact.clauses:
        claim = clause_features(clause, vocab)
        keys |= {t for t in claim.terms if not t.startswith("@")} | set(claim.identifiers)
        keys |= {number_key(v) for v in claim.values}
        groups = claim.names | {t[1:] for t in claim.terms if t.startswith("@")}
        keys |= {k for g in groups for form in vocab.forms.get(g, ()) for k in _split(form)}
        keys |= {k for t in claim.titles for k in _split(t)}
    return keys


def _split(form: str) -> set[str]:
    return bigrams(form) | words(form)


def _look_up(
    ctx: CheckContext, vocab: Vocabulary, fact: Fact, specs: list[SubjectSpec]
) -> list[EvidenceModel]:
    """Search the subject ourselves (raises on outage: the layer applies on_error)."""
    text = " ".join(c.text for c in fact.clauses)
    query = content_query(_stripped(text, vocab))
    found: list[EvidenceModel] = []
    for spec in specs:
        lookup = ctx.services.lookups.get(spec.lookup) if spec.lookup else None
        if lookup is not None and query:
            found += [e for e in lookup(query) if _shares(text, e, vocab)]
    return found


def _stripped(text: str, vocab: Vocabulary) -> str:
    """``text`` without subject markers and generic words: what to search for."""
    chars = list(text)
    for kind, hit in vocab.hits(text):
        if kind == "ignore":
            chars[hit.start : hit.end] = " " * (hit.end - hit.start)
    return "".join(chars)


def _shares(text: str, item: EvidenceModel, vocab: Vocabulary) -> bool:
    """Does a looked-up document share a name or a term with the fact?"""
    mine = features(text, text, vocab, claim=False)
    theirs = _of_model(item, vocab).features
    return bool(mine.terms & theirs.terms or mine.names & theirs.names)


@dataclass(frozen=True)
class Piece:
    """One piece of evidence a fact is compared with."""

    id: str
    text: str
    features: Features


def _of_item(item: Item, vocab: Vocabulary) -> Piece:
    canon = item.canon
    return Piece(item.evidence.id, canon.text, evidence_features(canon.text, canon.cased, vocab))


def _of_model(item: EvidenceModel, vocab: Vocabulary) -> Piece:
    canon = canonical(f"{item.id} {item.title} {item.snippet}")
    return Piece(item.id, canon.text, evidence_features(canon.text, canon.cased, vocab))


def _judged(
    ctx: CheckContext,
    params: SubjectParams,
    vocab: Vocabulary,
    fact: Fact,
    pieces: list[Piece],
    looked_up: list[EvidenceModel],
    *,
    cited: bool = False,
) -> Outcome:
    """Compare every clause with the evidence: contradicted, uncertain, or supported."""
    contradictions, doubts = _findings(params, vocab, fact, pieces, cited)
    ids = ", ".join(dict.fromkeys(p.id for p in pieces))
    if contradictions:
        what = _described(ctx, contradictions)
        hint = ctx.msg("hint_contradicted", ids=ids)
        return fail(
            ctx.msg("contradicted", ids=ids, what=what),
            hint,
            evidence=ids,
            what=what,
            outcome=CONTRADICTED,
        )
    if doubts:
        what = _described(ctx, doubts)
        hint = ctx.msg("hint_unsure", ids=ids)
        return unsure(
            ctx.msg("unsure", ids=ids, what=what),
            hint,
            evidence=ids,
            what=what,
            outcome=NOT_SETTLED,
        )
    if looked_up:  # what the lookup found becomes the session's evidence (Outcome.found)
        detail = {"evidence": ids, "outcome": ENTAILED}
        return Outcome(True, ctx.msg("found", ids=ids), detail=detail, found=tuple(looked_up))
    return ok(ctx.msg("ok", subjects=ids), evidence=ids, outcome=ENTAILED)


def _findings(
    params: SubjectParams, vocab: Vocabulary, fact: Fact, pieces: list[Piece], cited: bool
) -> tuple[list[Found], list[Found]]:
    """(contradictions, doubts) of the fact's clauses against the pieces.

    A fact that cites its evidence may word it freely: what it states must agree, and it
    must share something with what it cites; one that does not cite is held, clause by
    clause, to wording its evidence covers.
    """
    evidence = Evidence([p.features for p in pieces], " ".join(p.text for p in pieces))
    coverage = 0.0 if cited else params.coverage
    verdicts = [_clause_verdict(c, vocab, evidence, pieces, coverage) for c in fact.clauses]
    contradictions = [f for v in verdicts for f in v.contradictions]
    if not cited:
        return contradictions, [f for v in verdicts for f in v.doubts]
    claims = [clause_features(c, vocab) for c in fact.clauses]
    stated = any(c.terms or c.names for c in claims)
    if stated and not any(v.anchored for v in verdicts) and not overlaps(claims, evidence):
        ids = ", ".join(dict.fromkeys(p.id for p in pieces))
        return contradictions, [("what_unrelated", {"value": ids})]
    return contradictions, []


def _clause_verdict(
    clause: Clause, vocab: Vocabulary, evidence: Evidence, pieces: list[Piece], coverage: float
) -> Verdict:
    claim = clause_features(clause, vocab)
    titles = {t: names_in(t, vocab) for t in claim.titles}
    related = _related_count(claim, pieces)
    return compare(claim, evidence, related=related, titles=titles, coverage=coverage)


def _related_count(claim: Features, pieces: list[Piece]) -> int:
    """How many pieces of evidence are about what the clause names (for counts of documents);
    a clause that names nothing ("两篇相关文档") counts all it rests on."""
    if claim.names or claim.titles:
        return sum(
            1
            for p in pieces
            if claim.names & p.features.names or any(t in p.text for t in claim.titles)
        )
    if claim.terms:
        return sum(1 for p in pieces if claim.terms & p.features.terms)
    return len(pieces)


def subject_name(lang: str, subject: str) -> str:
    """A subject as a person reads it (知识库, not knowledge_base): from the catalog, else the
    id with its separators as spaces (a subject a policy added without naming it)."""
    key = f"subjects.{subject}"
    if messages.has(lang, key) or messages.has("en", key):
        return messages.text(lang, key)
    return subject.replace("_", " ").replace(".", " ")


def _described(ctx: CheckContext, found: list[Found]) -> str:
    texts = [ctx.msg(name, **values) for name, values in found]
    return ctx.msg("sep").join(dict.fromkeys(texts))


def _unsupported(ctx: CheckContext, name: str, spec: SubjectSpec) -> Outcome:
    return fail(
        ctx.msg("fail", subject=subject_name(ctx.lang, name)),
        ctx.msg("hint", tools=", ".join(spec.tools)),
        subject=name,
        tools=spec.tools,
        outcome=NO_RECORD,
    )
