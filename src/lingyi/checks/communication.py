"""communication: what another member said or did must be on the record.

Every relay in a text (lingyi.checks.relays) is checked, whatever type the caller declared:
a relay inside a ``fact`` is still a relay. A relay matches when, for every clause it
claims, a message from that member on the council record, or evidence of that member's work
recorded in this session, supports the clause (lingyi.checks.claims): the entities agree,
the state of the work and the polarity do not contradict, and what the clause asserts is in
the record. Several speakers: each must be on record. A denial ("灵通并没有说…") fails when
the record does say it. Reported speech of a non-member (用户说…) is no council claim.

Where the record overlaps but neither supports nor contradicts (a relay across languages
whose words the glossary does not know), the check is uncertain and says what it found; the
policy's ``on_uncertain`` decides.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import lru_cache
from typing import Any

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
from lingyi.checks.claims import Clause, Statement, Verdict, Vocabulary
from lingyi.checks.claims import compare as compare_clause
from lingyi.checks.relays import MAX_RELAYS, Relay, find_relays
from lingyi.config import defaults_dir
from lingyi.council import RecordIndex, index_terms
from lingyi.ledger import Ledger, LedgerEntry
from lingyi.policy import Lexicon, LexiconRef, MemberPolicy, PolicySet, load_lexicon
from lingyi.text import canonical


class CommunicationParams(CheckParams):
    use_work_evidence: bool = True
    glossary: LexiconRef = "lexicons/glossary.toml"
    status: LexiconRef = "lexicons/status.toml"
    candidates: int = 5  # messages of the member compared in full with each clause
    work_candidates: int = 3  # pieces of recorded work, likewise


@dataclass(frozen=True)
class Record:
    """A message on the council record, or a piece of recorded work, as the check reads it."""

    id: str
    statement: Statement


# What a record gives another value (or says the opposite of): the claim is contradicted.
# Every other failure is a claim no record makes (a fabrication looks like that).
_CONTRADICTIONS = frozenset(
    {
        "status_differs",
        "value_differs",
        "negation_differs",
        "label_differs",
        "version_differs",
        "id_differs",
        "date_differs",
        "numbers_differ",
        "title_differs",
        "denied_but_said",
    }
)
_RANK = {ENTAILED: 0, NOT_SETTLED: 1, NO_RECORD: 2, CONTRADICTED: 3}


@dataclass
class Finding:
    """The outcome for one relay: ``status`` is "ok", "fail" or "unsure"."""

    relay: Relay
    status: str
    why: str
    values: dict[str, str] = field(default_factory=dict)
    record: str | None = None  # the record that supports it, or the closest one

    @property
    def outcome(self) -> str:
        """Which of the comparison's outcomes this is (docs/checks.md): entailed,
        contradicted, not_settled, or no_record (nothing on record about it)."""
        if self.status == "ok":
            return ENTAILED
        if self.status == "unsure":
            return NOT_SETTLED
        return CONTRADICTED if self.why in _CONTRADICTIONS else NO_RECORD


@register("communication.on_record", CommunicationParams)
def on_record(ctx: CheckContext, params: CommunicationParams) -> Outcome:
    """Every claim about another member's words or work must match that member's record."""
    if nothing_to_read(ctx):
        return ok(ctx.msg("no_claim"))
    text = ctx.canon.text
    relays = find_relays(text, ctx.policies, ctx.member.id)
    if relays.truncated:  # fail closed: what was not read is not passed
        return fail(ctx.msg("too_many", limit=MAX_RELAYS), ctx.msg("split", limit=MAX_RELAYS))
    if not relays:
        return ok(ctx.msg("no_claim"))
    vocab = vocabulary(ctx, params)
    # The claim is read with its case where folding kept positions (Kumarajiva is a name).
    cased = ctx.canon.cased if len(ctx.canon.cased) == len(text) else text
    # A relay repeated word for word (a pasted list, a long note) is compared once.
    seen: dict[tuple[str, str, str], Finding] = {}
    findings = []
    for relay in relays:
        key = (relay.member, relay.kind, relay.claim(cased))
        if key not in seen:
            seen[key] = _check(ctx, params, vocab, relay, cased)
        findings.append(replace(seen[key], relay=relay))
    return _outcome(ctx, findings, text)


def _check(
    ctx: CheckContext, params: CommunicationParams, vocab: Vocabulary, relay: Relay, text: str
) -> Finding:
    member = ctx.policies.members[relay.member]
    claim = vocab.analyse(relay.claim(text))
    if not claim.clauses:
        return Finding(relay, "ok", "no_claim")
    records = _Records(ctx, params, vocab, member, relay.kind == "work")
    if not records.any():
        status = "ok" if relay.kind == "denied" else "fail"
        return Finding(relay, status, "no_messages")
    verdicts = [(clause, records.best(clause)) for clause in claim.clauses]
    return _denied(relay, verdicts) if relay.kind == "denied" else _judged(relay, verdicts)


def _judged(relay: Relay, verdicts: list[tuple[Clause, tuple[str | None, Verdict]]]) -> Finding:
    """Every clause supported → ok; any contradicted or missing → fail; else unsure."""
    worst = None
    for clause, (rid, verdict) in verdicts:
        if verdict.supports:
            continue
        status = "unsure" if verdict.kind == "gap" or verdict.why == "words_unknown" else "fail"
        why = "clause_missing" if verdict.why == "nothing_shared" else verdict.why
        finding = Finding(relay, status, why, _values(clause, verdict), rid)
        if worst is None or (worst.status == "unsure" and status == "fail"):
            worst = finding
    if worst is not None:
        return worst
    return Finding(relay, "ok", "ok", {}, verdicts[0][1][0])


def _denied(relay: Relay, verdicts: list[tuple[Clause, tuple[str | None, Verdict]]]) -> Finding:
    """ "灵通并没有说 X": false when the record says X."""
    if all(v.supports for _, (_, v) in verdicts):
        return Finding(relay, "fail", "denied_but_said", {}, verdicts[0][1][0])
    return Finding(relay, "ok", "denied_ok")


def _values(clause: Clause, verdict: Verdict) -> dict[str, str]:
    values = dict(verdict.values)
    values.setdefault("clause", clause.text.strip(" ,.;:"))
    return values


class _Records:
    """The member's messages and, in this session, its recorded work, found by term."""

    def __init__(
        self,
        ctx: CheckContext,
        params: CommunicationParams,
        vocab: Vocabulary,
        member: MemberPolicy,
        work: bool,
    ) -> None:
        self.ctx, self.vocab, self.member = ctx, vocab, member
        self.limit, self.work_limit = params.candidates, params.work_candidates
        # Work done ("LingFlow merged PR #12") is backed by evidence that names the member too
        # (an analysis of who posted what); words said only by the member's own record.
        self.owners = [member.id, f"@{member.id}"] if work else [member.id]
        self.work = (
            work_index(ctx.ledger, ctx.assertion.session, ctx.policies)
            if params.use_work_evidence
            else None
        )

    def any(self) -> bool:
        names = self.member.names
        if _count(self.ctx, names):
            return True
        return self.work is not None and any(self.work.count(o) for o in self.owners)

    def best(self, clause: Clause) -> tuple[str | None, Verdict]:
        """The record that supports the clause, else the closest one and what it says.

        Messages come first, then recorded work; a record that supports the clause and
        shares all of it ends the search (no other record can be closer)."""
        terms = query_terms(self.vocab, clause)
        verdicts: list[tuple[str, Verdict]] = []
        for records in (self._messages, self._work):
            for record in records(terms):
                verdict = compare_clause(clause, record.statement)
                verdicts.append((record.id, verdict))
                if verdict.supports and verdict.shared >= clause.size:
                    return record.id, verdict
        if not verdicts:
            return None, Verdict("unrelated", "nothing_shared")
        return _pick(verdicts)

    def _messages(self, terms: list[frozenset[str]]) -> Iterator[Record]:
        for m in self.ctx.council.search(self.member.names, terms, self.limit):
            yield Record(m.id, self.vocab.analyse(canonical(m.content).cased))

    def _work(self, terms: list[frozenset[str]]) -> Iterator[Record]:
        if self.work is None or not any(self.work.count(o) for o in self.owners):
            return
        for item in self.work.search(self.owners, terms, self.work_limit):
            if isinstance(item, tuple):
                yield Record(str(item[0]), self.vocab.analyse(str(item[1])))


def _count(ctx: CheckContext, names: Sequence[str]) -> int:
    counter = getattr(ctx.council, "count_from", None)
    if callable(counter):
        return int(counter(names))
    return sum(len(ctx.council.messages_from(n)) for n in names)


# A record about another version or id is about other work: it cannot outweigh one that backs
# the claim about this version (v0.16's audit found issues, v0.15's found none).
_OTHER_SUBJECT = frozenset({"version_differs", "version_absent", "id_differs"})


def _pick(verdicts: list[tuple[str, Verdict]]) -> tuple[str, Verdict]:
    """A supporting record wins unless a closer one contradicts the claim (the iOS build that
    failed is closer to "the iOS build is done" than the Android one that was submitted)."""
    supported = [(v.shared, i, rid, v) for i, (rid, v) in enumerate(verdicts) if v.supports]
    against = [
        (v.shared, i, rid, v)
        for i, (rid, v) in enumerate(verdicts)
        if v.kind == "contradicts" and v.why not in _OTHER_SUBJECT
    ]
    if supported and max(supported)[0] >= max((a[0] for a in against), default=-1):
        _, _, rid, verdict = max(supported)
        return rid, verdict
    order = {"contradicts": 4, "partial": 3, "gap": 2, "unrelated": 1, "supports": 0}
    _, _, rid, verdict = max(
        (order[v.kind], v.shared, i, rid, v) for i, (rid, v) in enumerate(verdicts)
    )[1:]
    return rid, verdict


def _outcome(ctx: CheckContext, findings: list[Finding], text: str) -> Outcome:
    failed = [f for f in findings if f.status == "fail"]
    doubtful = [f for f in findings if f.status == "unsure"]
    relays = [_detail(f, text) for f in findings]
    outcome = max((f.outcome for f in findings), key=_RANK.__getitem__)
    compared = [f.record for f in findings if f.record]
    found: dict[str, Any] = {"relays": relays, "outcome": outcome, "compared_with": compared}
    if failed:
        why = "; ".join(_why(ctx, f) for f in failed)
        first = ctx.policies.members[failed[0].relay.member]
        return fail(ctx.msg("fail", why=why), ctx.msg("hint", **_who(first)), **found)
    if doubtful:
        why = "; ".join(_why(ctx, f) for f in doubtful)
        first = ctx.policies.members[doubtful[0].relay.member]
        return unsure(ctx.msg("unsure", why=why), ctx.msg("hint", **_who(first)), **found)
    records = ", ".join(dict.fromkeys(f.record for f in findings if f.record)) or "-"
    members = [ctx.policies.members[m] for m in dict.fromkeys(f.relay.member for f in findings)]
    names, ids = ", ".join(m.name for m in members), ", ".join(m.id for m in members)
    return ok(ctx.msg("ok", name=names, id=ids, record=records), **found)


def _why(ctx: CheckContext, finding: Finding) -> str:
    member = ctx.policies.members[finding.relay.member]
    if finding.why in ("no_messages", "denied_but_said"):
        return ctx.msg(finding.why, **_who(member), record=finding.record or "-")
    values = _filled(finding.values)
    if finding.why == "status_differs":  # state names in the configured language
        values = {**values, **{k: ctx.msg(f"state_{values[k]}") for k in ("claim", "record")}}
    closest = ctx.msg(finding.why, **values)
    return ctx.msg("no_match", **_who(member), record=finding.record or "-", closest=closest)


_PLACEHOLDERS = ("claim", "record", "numbers", "clause", "words")


def _filled(values: dict[str, str]) -> dict[str, str]:
    """Every placeholder a reason may use, so that no message shows a bare {name}."""
    return {k: values.get(k, "-") for k in _PLACEHOLDERS}


def _detail(finding: Finding, text: str) -> dict[str, object]:
    return {
        "member": finding.relay.member,
        "kind": finding.relay.kind,
        "claim": finding.relay.claim(text),
        "status": finding.status,
        "why": finding.why,
        "outcome": finding.outcome,
        "record": finding.record,
        **({"found": finding.values} if finding.values else {}),
    }


def _who(member: MemberPolicy) -> dict[str, str]:
    """A member as messages name it: by display name (灵通) or by id (lingflow)."""
    return {"name": member.name, "id": member.id}


@dataclass(frozen=True)
class Claim:
    member: str
    text: str


def find_claim(
    text: str, policies: PolicySet, speaker: str, *, speech: bool = False
) -> Claim | None:
    """The first relay in ``text`` (any form) of a member other than ``speaker``.

    Kept for callers written before :func:`lingyi.checks.relays.find_relays`, which finds
    every relay with its span; with ``speech``, only reported speech counts, not work.
    """
    canon = canonical(text, policies.names).text
    for relay in find_relays(canon, policies, speaker):
        if not speech or relay.kind != "work":
            return Claim(relay.member, relay.claim(canon) or canon)
    return None


@dataclass(frozen=True)
class Match:
    """Whether a record supports a claim, and why: a message of ``communication.on_record``."""

    ok: bool
    why: str  # the message name in the catalog, filled with ``values``
    values: dict[str, str] = field(default_factory=dict)
    contradicts: bool = False  # the record says the opposite about the same work


def compare(claim: str, record: str, vocab: Vocabulary | None = None) -> Match:
    """Does ``record`` support every clause of ``claim``? (texts in any form; the shipped
    glossary and status words unless ``vocab`` is given)."""
    vocab = vocab or shipped_vocabulary()
    said = vocab.analyse(canonical(record).cased)
    for clause in vocab.analyse(canonical(claim).cased).clauses:
        verdict = compare_clause(clause, said)
        if not verdict.supports:
            why = "clause_missing" if verdict.why == "nothing_shared" else verdict.why
            values = _filled(_values(clause, verdict))
            return Match(False, why, values, verdict.kind == "contradicts")
    return Match(True, "same_claim")


@lru_cache(maxsize=1)
def shipped_vocabulary() -> Vocabulary:
    """The vocabulary of the packaged lexicons (for callers without loaded policies)."""
    folder = defaults_dir() / "validators" / "lexicons"
    glossary = load_lexicon(folder / "glossary.toml")
    status = load_lexicon(folder / "status.toml")
    return Vocabulary(glossary.groups, status.groups, {})


# ---- the vocabulary and the queries ----------------------------------------------------

_VOCABULARIES: dict[tuple[int, int, int], tuple[Lexicon, Lexicon, Vocabulary]] = {}


def vocabulary(ctx: CheckContext, params: CommunicationParams) -> Vocabulary:
    """The glossary and status lexicons of the loaded policies, built once per policy version."""
    glossary, status = ctx.lexicon(params.glossary), ctx.lexicon(params.status)
    key = (id(glossary), id(status), id(ctx.policies))
    if key not in _VOCABULARIES:
        if len(_VOCABULARIES) >= 8:  # old policy versions
            _VOCABULARIES.pop(next(iter(_VOCABULARIES)))
        members = {m.id: m.names for m in ctx.policies.members.values()}
        built = Vocabulary(glossary.groups, status.groups, members)
        _VOCABULARIES[key] = (glossary, status, built)  # the lexicons pin their ids
    return _VOCABULARIES[key][2]


_QUERIES: weakref.WeakKeyDictionary[Clause, list[frozenset[str]]] = weakref.WeakKeyDictionary()


def query_terms(vocab: Vocabulary, clause: Clause) -> list[frozenset[str]]:
    """What to look a clause up by (kept with the clause: clauses are cached by the
    vocabulary, and one vocabulary gives one query)."""
    if (found := _QUERIES.get(clause)) is None:
        found = _QUERIES[clause] = _query_terms(vocab, clause)
    return found


def _query_terms(vocab: Vocabulary, clause: Clause) -> list[frozenset[str]]:
    """Each concept in all its forms, each literal, each entity."""
    groups = [vocab.index_forms(u[2:]) for u in clause.units | clause.negated if u.startswith("c:")]
    groups += [frozenset(index_terms(u[2:])) for u in clause.units if u[:2] in ("w:", "z:")]
    ents = clause.entities
    groups += [frozenset({v}) for v in ents.versions]
    groups += [frozenset(index_terms(i)) for i in ents.ids]
    groups += [frozenset(_number_terms(n.values)) for n in ents.numbers]
    return [g for g in groups if g]


def _number_terms(values: frozenset[Decimal]) -> set[str]:
    return {format(v.normalize(), "f") for v in values}


# ---- work evidence of this session ------------------------------------------------------

_WORK: weakref.WeakKeyDictionary[Ledger, dict[tuple[str, int], tuple[int, RecordIndex]]] = (
    weakref.WeakKeyDictionary()
)


def work_index(ledger: Ledger, session: str, policies: PolicySet) -> RecordIndex:
    """The session's recorded work, indexed by the member who did it ("lingflow") and by the
    members it names ("@lingflow"), and by term; only entries new since the last call are read.

    Evidence of a member's work backs a relay only in the session that recorded it.
    """
    sessions = _WORK.setdefault(ledger, {})
    key = (session, id(policies))
    seen, index = sessions.get(key, (0, RecordIndex()))
    entries = _session_entries(ledger, session)
    for entry in entries[seen:]:
        for item in entry.evidence:
            canon = canonical(_work_text(entry, item.title, item.snippet))
            owners = {entry.member} | {f"@{m}" for m in members_named(canon.text, policies)}
            for owner in owners:
                index.add(owner, canon.text, (item.id, canon.cased), canonical=True)
    if len(sessions) > 64:  # old policy versions and long-gone sessions
        sessions.pop(next(iter(sessions)))
    sessions[key] = (len(entries), index)
    return index


def members_named(text: str, policies: PolicySet) -> set[str]:
    """Members a text names (by any of their names, as whole words)."""
    pattern, owners = _name_finder(policies)
    return {owners[m.group(0)] for m in pattern.finditer(text)}


_FINDERS: dict[int, tuple[PolicySet, re.Pattern[str], dict[str, str]]] = {}


def _name_finder(policies: PolicySet) -> tuple[re.Pattern[str], dict[str, str]]:
    """One pattern of every member name, built once per policy set (which pins its id)."""
    if id(policies) not in _FINDERS:
        if len(_FINDERS) >= 8:
            _FINDERS.pop(next(iter(_FINDERS)))
        owners = {n.casefold(): m.id for m in policies.members.values() for n in m.names}
        alt = "|".join(re.escape(n) for n in sorted(owners, key=len, reverse=True))
        pattern = re.compile(rf"(?<![a-z0-9])(?:{alt})(?![a-z0-9])")
        _FINDERS[id(policies)] = (policies, pattern, owners)
    return _FINDERS[id(policies)][1:]


def _session_entries(ledger: Ledger, session: str) -> Sequence[LedgerEntry]:
    return ledger.session(session).entries


def _work_text(entry: LedgerEntry, title: str, snippet: str) -> str:
    args = " ".join(f"{k} {v}" for k, v in entry.arguments.items())
    return f"{entry.tool} {args} {title} {snippet}"
