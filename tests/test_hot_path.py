"""What the hot path's shortcuts must not change: the log's bytes, the ledger's terms, the
checks a member runs after a reload. Timings are in ``benchmarks/``, never asserted here.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest
from mcp_types import TextContent

from lingyi.council import MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Item, Ledger, LedgerEntry, LedgerLimits, SessionLedger, text_terms
from lingyi.log import VerificationLog, verify_log
from lingyi.log.chain import canonical
from lingyi.log.writer import _LINK
from lingyi.models import Assertion, AssertionType, Evidence
from lingyi.policy import PolicySet, load_policies
from lingyi.text._lang import ZH_STOP_CHARS, bigrams
from lingyi.verdict import Guarded, Verdict, refusal, success
from tests.conftest import SHIPPED_POLICIES

# What a model could send: placeholders of the same shape, but not this process's random
# nonce (and the private-use form placeholders had before).
FAKE = {name: "ghjk" * 6 for name in _LINK} | {"pua": "\ue000" + "\ue001" * 12 + "prev"}
RECORDS = [
    {"kind": "verification", "content": "灵通说v0.16审计已经完成", "checks": []},
    {"kind": "verification", "content": "The KB has an article on qigong", "n": 1.5},
    # nested keys named like the chain link, and look-alikes of its placeholders as content
    {"kind": "verification", "fallback": {"prev": "x", "seq": 3, "key_id": None}},
    {"kind": "verification", "content": FAKE["prev"], "payload": {"seq": FAKE["seq"]}},
    {"kind": "verification", "tool_call": {"arguments": {"prev": FAKE["pua"]}}},
    # a secret: redacted, then serialised again
    {"kind": "verification", "content": "password=hunter2-very-secret", "l": [True, None]},
    {"kind": "verification", "content": 'line\u2028break "quoted" é \\ back'},
]


@pytest.mark.parametrize("keyed", [False, True])
def test_a_record_serialised_once_is_the_chains_canonical_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: bool
) -> None:
    """Every line is exactly canonical(record) with the hash appended, and the chain verifies,
    for plain and keyed logs, Chinese and English content, nested prev/seq keys, the
    placeholders themselves as content, and a record whose secret was redacted."""
    path = tmp_path / "log.jsonl"
    options = None
    if keyed:
        from lingyi.log.keys import KeyRing
        from lingyi.log.writer import LogOptions

        secret = "0123456789abcdef0123456789abcdef"
        options = LogOptions(keys=KeyRing.from_text(secret, "test", "test"))
    with VerificationLog(path, options) as log:
        written = [log.append(dict(r)) for r in RECORDS]
    lines = path.read_bytes().split(b"\n")[:-1]
    assert len(lines) == len(RECORDS) + keyed  # a keyed log starts with its key rotation
    for line, record in zip(lines[keyed:], written, strict=True):
        parsed = json.loads(line)
        assert parsed == record
        digest = parsed.pop("hash")
        assert line == canonical(parsed).encode()[:-1] + f',"hash":"{digest}"}}'.encode()
        if not keyed:
            assert hashlib.sha256(canonical(parsed).encode()).hexdigest() == digest
    assert "hunter2-very-secret" not in path.read_text(encoding="utf-8")
    assert FAKE["prev"] in path.read_text(encoding="utf-8")  # content kept as it was
    assert verify_log(path, keys=options.keys if options else None).ok


def _old_bigrams(text: str) -> set[str]:
    """The definition the faster bigrams() must keep (the code before issue 10)."""
    from lingyi.text._lang import _CJK_RUN, ZH_FILLER

    out: set[str] = set()
    for run in _CJK_RUN.findall(ZH_FILLER.sub(" ", text)):
        grams = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
        out.update(g for g in grams if not all(c in ZH_STOP_CHARS for c in g))
    return out


def test_bigrams_are_those_of_the_definition() -> None:
    """Random texts of function characters, content characters, fillers and Latin letters:
    the same bigrams as the plain definition (pairs of two function characters dropped)."""
    rng = random.Random(10)
    alphabet = "的了是在有和气功庄子逍遥游已经目前 ab,。我们"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(500)]
    texts += ["的", "气", "的了", "已经完成", "灵通说v0.16审计已经完成"]
    for text in texts:
        assert bigrams(text) == _old_bigrams(text), text


def test_ledger_terms_are_cached_but_found_the_same() -> None:
    """An evidence text's terms are computed once, and a session finds the item by them,
    also after its oldest entries were forgotten."""
    ledger = Ledger(LedgerLimits(max_entries=4))
    hit = Evidence(id="kb:qg-1", title="气功源流", snippet="Qigong history, 1,200 years")
    for i in range(9):
        ledger.record("s", "lingzhi", "search_knowledge", {"query": "气功"}, [hit] if i else [])
    terms = text_terms("气功源流 qigong history, 1,200 years")
    assert {"气功", "qigong", "history"} <= terms
    found = ledger.session("s").related(["气功", "qigong"], ["search_knowledge"])
    assert {item.evidence.id for item in found} == {"kb:qg-1"}
    assert 1 <= len(found) <= 4  # no more than the trimmed session holds


def test_each_policy_snapshot_runs_its_own_checks(tmp_path: Path) -> None:
    """The layer works out a member's checks once per policy snapshot: one snapshot whose
    member disables a shared check and one whose member does not, verified by the same
    layer in turn, each run exactly their own checks (a reload's new snapshot too)."""
    shutil.copytree(SHIPPED_POLICIES, tmp_path / "off")
    policy = tmp_path / "off" / "lingzhi.toml"
    text = policy.read_text(encoding="utf-8")
    policy.write_text(text.replace('disable = ["', 'disable = ["inference.labelled", "', 1))
    shipped, off = load_policies(SHIPPED_POLICIES), load_policies(tmp_path / "off")
    layer = ConstraintLayer(shipped, MemoryCouncil())
    facts = [
        Assertion(member="lingzhi", type=AssertionType.FACT, content="庄子的逍遥游讲的是自由"),
        Assertion(member="LingZhi", type=AssertionType.FACT, content="Zhuangzi wrote of freedom"),
    ]
    for fact in facts * 2:  # twice: the second round reads the cached plans
        with_check = {c.code for c in layer.verify(fact, Ledger()).checks}
        without = {c.code for c in layer.verify(fact, Ledger(), policies=off).checks}
        assert with_check - without == {"inference.labelled"}
        assert without < with_check


def test_a_check_result_is_the_validated_model_of_its_outcome() -> None:
    """Each check's result is built through the model's own constructor: equal to a
    re-validated copy field by field and in its JSON, with a fallback and found evidence too;
    an outcome that is not as typed is coerced where pydantic coerces, refused otherwise."""
    from pydantic import ValidationError

    from lingyi.checks import Outcome
    from lingyi.layer import _result_of
    from lingyi.models import Fallback, OnFail, Stage, ToolCall
    from lingyi.policy import CheckEntry

    entry = CheckEntry(check="domain.scope", stage=Stage.BOUNDARY, on_fail=OnFail.FALLBACK)
    call = ToolCall(name="search_knowledge", arguments={"query": "气功", "domains": ["气"]})
    outcomes = [
        Outcome(True, "在范围内", detail={"domains": {"气": ["气功"]}}),
        Outcome(False, "out of scope", "ask lingyi", Fallback(kind="restrict_domains", tool_call=call)),
        Outcome(True, "found", found=(Evidence(id="kb:qg-1", title="气功源流"),), degraded=True),
        Outcome(False, "unsure", uncertain=True),
    ]  # fmt: skip
    for outcome in outcomes:
        made = _result_of(entry, outcome)
        validated = type(made).model_validate(made.model_dump())
        assert made == validated
        assert made.model_dump_json() == validated.model_dump_json()
        assert made.blocking is validated.blocking
    assert _result_of(entry, Outcome("no", "not a bool")).passed is False  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        _result_of(entry, Outcome(None, "not a bool"))  # type: ignore[arg-type]


def test_an_unregistered_check_still_fails_closed(policies: PolicySet) -> None:
    """A check entry whose check is not registered (a plugin gone, say) is looked up once for
    the cached plan, and still fails closed with its on_fail when it runs, call after call."""
    from lingyi.models import OnFail, Stage
    from lingyi.policy import CheckEntry

    member = policies.members["lingzhi"].model_copy(deep=True)
    ghost = CheckEntry(check="plugin.gone", stage=Stage.BOUNDARY, on_fail=OnFail.REJECT)
    member.checks.append(ghost)
    snapshot = policies.model_copy(update={"members": {**policies.members, "lingzhi": member}})
    layer = ConstraintLayer(snapshot, MemoryCouncil())
    fact = Assertion(member="lingzhi", type=AssertionType.FACT, content="庄子的逍遥游讲的是自由")
    for _ in range(2):
        result = layer.verify(fact, Ledger())
        gone = [c for c in result.checks if c.code == "plugin.gone"]
        assert [(c.passed, c.degraded) for c in gone] == [(False, True)]
        assert result.decision == "rejected"


# Tool calls of every member with nothing in the content (what every guarded call sends),
# content that is empty once canonical (spaces, zero-width), and, as a control, contents that
# do say something, in Chinese and English, with evidence in the session and on the council.
EMPTY_CONTENTS = ["", "   ", "\u200b\u200d", "\n\t"]
SAYING = ["灵通说v0.16审计已经完成，trace 4bf92f3577b34da6a3ce929d0e0e4736", "See kb:qg-007 at https://kb.lingyi.local/qg-007"]  # fmt: skip


def _verdicts(policies: PolicySet, assertions: list[Assertion]) -> list[object]:
    council = MemoryCouncil()
    from lingyi.council import CouncilMessage

    council.append(CouncilMessage(sender="lingtong", content="v0.16审计已经完成"))
    ledger = Ledger()
    hit = Evidence(id="kb:qg-007", title="气功与呼吸", snippet="调息是气功的核心")
    ledger.record("s", "lingzhi", "search_knowledge", {"query": "气功"}, [hit])
    out: list[object] = []
    for language in ("zh", "en"):
        layer = ConstraintLayer(policies, council, language=language)
        for assertion in assertions:
            result = layer.verify(assertion, ledger)
            checks = [c.model_dump_json(exclude={"found"}) for c in result.checks]
            out.append(
                (result.decision, result.reason, result.recommendation, result.fallback, *checks)
            )
    return out


def test_checks_with_nothing_to_read_decide_as_their_full_reading(
    policies: PolicySet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that reads only the content answers an empty one without reading it: every
    member's every tool call with an empty (or canonically empty) content, and contents that
    say something, get exactly the same checks, reasons and decisions with the shortcut as
    with the full reading, in Chinese and English."""
    from lingyi.checks import _registry
    from lingyi.models import ToolCall

    assertions = [
        Assertion(
            member=member.id,
            type=kind,
            content=content,
            session="s",
            tool_call=ToolCall(name=tool, arguments={}),
        )
        for member in policies.members.values()
        for tool in member.tools
        for kind in (AssertionType.ACTION, AssertionType.FACT)
        for content in EMPTY_CONTENTS + SAYING
    ]
    assert len(assertions) > 90
    shortcut = _verdicts(policies, assertions)
    monkeypatch.setattr(_registry, "SHORTCUTS", False)
    assert shortcut == _verdicts(policies, assertions)


SHA = "0123456789abcdef0123456789abcdef01234567"


def _random_entry(rng: random.Random, i: int) -> LedgerEntry:
    """Entries that share ids, URLs, terms, members, tools and a commit's short SHA."""
    tool = rng.choice(["search_knowledge", "run_analysis", "git_log"])
    evidence = [
        Evidence(
            id=rng.choice([f"kb:{rng.randint(0, 30)}", SHA, SHA[:39] + str(rng.randint(0, 9))]),
            title=rng.choice(["气功源流", "太极拳", "论语 学而"]) + f" {rng.randint(0, 5)}",
            snippet=rng.choice(["see https://kb.example/a", "1,200 years", "庄子逍遥游"]),
            url=rng.choice([None, f"https://kb.example/{rng.randint(0, 4)}"]),
        )
        for _ in range(rng.randint(0, 3))
    ]
    return LedgerEntry("s", rng.choice(["lingzhi", "lingtong"]), tool, {"n": i}, evidence)


def _view(session: SessionLedger) -> dict[str, object]:
    """Every index of a session, items named by (entry, evidence id): comparable across two
    sessions holding the same entries."""

    def name(item: Item) -> tuple[int, str]:
        return id(item.entry), item.evidence.id

    return {
        "entries": [id(e) for e in session.entries],
        "by_id": {k: name(v) for k, v in session.by_id.items()},
        "urls": session.urls,
        "by_url": {u: [name(i) for i in v] for u, v in session._by_url.items()},
        "by_member": {m: [id(e) for e in v] for m, v in session._by_member.items()},
        "by_tool": session._by_tool,
        "postings": {
            t: {term: [name(i) for i in d] for term, d in p.items()}
            for t, p in session._postings.items()
        },
        "hex_prefix": session._hex_prefix,
        "found": [name(i) for i in session.related(["气功", "太极拳", "years"], session.tools())],
        "short_sha": session.get(SHA[:9]) and name(session.get(SHA[:9])),  # type: ignore[arg-type]
    }


@pytest.mark.parametrize("seed", range(6))
def test_forgetting_in_place_holds_what_a_rebuild_would(seed: int) -> None:
    """A session forgets its oldest entries in place (no rebuild): every index then holds
    exactly what a session built from the newer entries alone holds, whatever ids, URLs,
    terms, members and tools the forgotten entries shared with the kept ones."""
    rng = random.Random(seed)
    session = SessionLedger()
    for i in range(300):
        session.add(_random_entry(rng, i))
        if rng.random() < 0.3:
            session.forget(rng.randint(1, 4))
        rebuilt = SessionLedger()
        for entry in session.entries:
            rebuilt.add(entry)
        assert _view(session) == _view(rebuilt)
    session.forget(len(session.entries))
    assert _view(session) == _view(SessionLedger())


def test_a_full_session_forgets_its_oldest_one_by_one() -> None:
    """Once full, each new tool result makes a session forget its oldest one: it keeps the
    newest ``max_entries``, every one counted, and what kinds keep per session stays."""
    ledger = Ledger(LedgerLimits(max_entries=10))
    ledger.open("s").state["note"] = 1
    for i in range(25):
        hit = Evidence(id=f"kb:{i}", title=f"气功 {i}", snippet="s")
        ledger.record("s", "lingzhi", "search_knowledge", {"query": "q"}, [hit])
    session = ledger.session("s")
    assert [e.evidence[0].id for e in session.entries] == [f"kb:{i}" for i in range(15, 25)]
    assert not session.has("kb:14") and session.has("kb:15")
    assert ledger.stats()["entries_forgotten"]["max_entries"] == 15
    assert session.state == {"note": 1}


@pytest.mark.parametrize(
    "outputs",
    [
        pytest.param(None, id="approved, nothing more"),
        pytest.param({"route": "revise", "feedback": "加一个来源", "n": 2**70}, id="big integer"),
    ],
)
def test_a_replys_text_is_its_structured_content(outputs: dict[str, object] | None) -> None:
    """The reply is serialised once: a client that reads only the text reads the structured
    content (nulls included), also when orjson cannot write it (an integer beyond 64 bits)."""
    verdict = Verdict(
        verification_id="v-1",
        member="lingzhi",
        decision="rejected",
        codes=["boundary.medical"],
        reason="医疗建议不在灵知的范围内",
        outputs=outputs,
    )
    for reply in (success(verdict), refusal(Guarded(verdict=verdict))):
        text = reply.result.content[0]
        assert isinstance(text, TextContent)
        assert json.loads(text.text) == reply.result.structured_content
    assert refusal(verdict).result.is_error and not success(verdict).result.is_error
