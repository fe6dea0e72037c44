"""The deterministic checks of a conclusion, each with hostile rewrites and look-alikes.

Every row rewrites one part of a conclusion that passes (``tests/conclusion_kit.py``) and says
whether one check must still catch it (``False``) or must let it pass (``True``), in Chinese
and in English. Hostile rewrites are what a model does to slip past a literal comparison: an
id in another case or in UUID form, a placeholder finding dressed as a real one, a confidence
written "High " or 高度, a risk level written "HIGH".
"""

from __future__ import annotations

from typing import Any

import pytest

from lingyi.conclusions import rules as rules_module
from lingyi.policy import PolicySet, load_policies
from tests.conclusion_kit import TRACE, TRACE_UUID, Edit, check, edited, verify

DROP = object()


def at(path: str, value: Any) -> Edit:
    """Set (or with DROP, delete) the value at a dotted path; digits index lists."""

    def edit(given: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = given
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        key: Any = int(last) if last.isdigit() else last
        if value is DROP:
            del node[key]
        else:
            node[key] = value

    return edit


def both(*edits: Edit) -> Edit:
    def edit(given: dict[str, Any]) -> None:
        for one in edits:
            one(given)

    return edit


LANGS = ("zh", "en")

FABRICATED = [
    # (what, rewrite, passes)
    ("an id no finding holds", at("conclusion.evidence_ids", [TRACE, "met-1", "met-404"]), False),
    ("an id only a placeholder holds", both(at("findings.log_finding", {"fallback": True, "evidence_ids": ["log-9"]}), at("conclusion.evidence_ids", [TRACE, "met-1", "log-9"])), False),
    ("an id under a field that holds no finding", both(at("findings.notes", {"evidence_ids": ["n-1"]}), at("conclusion.evidence_ids", [TRACE, "met-1", "n-1"])), False),
    ("a trace one digit off, in UUID form", at("conclusion.evidence_ids", [TRACE_UUID[:-1] + "7", "met-1"]), False),
    ("an id one letter off, upper case", at("conclusion.evidence_ids", [TRACE, "MET-2"]), False),
    # look-alikes that must pass
    ("a metric id in upper case", at("conclusion.evidence_ids", [TRACE, "MET-1", "dep-1"]), True),
    ("the trace in UUID form, upper case", at("conclusion.evidence_ids", [TRACE_UUID.upper(), "met-1"]), True),
    ("ids of wrong types are ignored", at("conclusion.evidence_ids", [TRACE, 42, None, {"id": "x"}, "met-1"]), True),
    ("findings that are not objects are skipped", both(at("findings.log_finding", "see the logs"), at("findings.event_finding", [])), True),
    ("an id only the ledger holds", at("conclusion.evidence_ids", [TRACE]), True),
    ("no evidence_ids at all", at("conclusion.evidence_ids", DROP), True),
]  # fmt: skip

CORROBORATION = [
    ("one specialist cited", at("conclusion.evidence_ids", [TRACE]), False),
    ("the second is a placeholder", both(at("conclusion.evidence_ids", [TRACE, "met-1"]), at("findings.metric_finding.fallback", True)), False),
    ('placeholder flag as "true"', both(at("conclusion.evidence_ids", [TRACE, "met-1"]), at("findings.metric_finding.fallback", "true")), False),
    ("placeholder flag as 1, key in upper case", both(at("conclusion.evidence_ids", [TRACE, "met-1"]), at("findings.metric_finding.Fallback", 1)), False),
    ('status "FALLBACK"', both(at("conclusion.evidence_ids", [TRACE, "met-1"]), at("findings.metric_finding.status", "FALLBACK")), False),
    ("status 降级", both(at("conclusion.evidence_ids", [TRACE, "met-1"]), at("findings.metric_finding.status", "降级")), False),
    ("only placeholder ids", both(at("findings.metric_finding", {"evidence_ids": ["placeholder-1"]}), at("conclusion.evidence_ids", [TRACE, "placeholder-1"])), False),
    ("a second finding repeating the first's evidence", both(at("findings.metric_finding", {"evidence_ids": [TRACE.upper()]}), at("conclusion.evidence_ids", [TRACE])), False),
    ("a finding under a field the policy does not list", both(at("findings.my_finding", {"evidence_ids": ["m-9"]}), at("conclusion.evidence_ids", [TRACE, "m-9"])), False),
    ("non-dict findings do not count", both(at("findings", {"trace_finding": {"evidence_ids": [TRACE]}, "metric_finding": ["met-1"]}), at("conclusion.evidence_ids", [TRACE, "met-1"])), False),
    # look-alikes that must pass
    ('"fallback": "false" is real', both(at("conclusion.evidence_ids", [TRACE, "met-1"]), at("findings.metric_finding.fallback", "false")), True),
    ('"fallback": 0 and null are real', both(at("findings.metric_finding.fallback", 0), at("findings.deploy_finding.fallback", None)), True),
    ("an id that only starts like a placeholder word", both(at("findings.metric_finding", {"evidence_ids": ["nonempty-pool"]}), at("conclusion.evidence_ids", [TRACE, "nonempty-pool"])), True),
    ("evidences with extra fields", at("findings.metric_finding", {"evidences": [{"id": "met-1", "value": 5, "unit": "conn"}]}), True),
]  # fmt: skip

SCHEMA = [
    ('confidence "High "', at("conclusion.confidence", "High "), False),
    ('confidence "HIGH"', at("conclusion.confidence", "HIGH"), False),
    ("confidence 高度", at("conclusion.confidence", "高度"), False),
    ("confidence as a number", at("conclusion.confidence", 0.9), False),
    ("no confidence", at("conclusion.confidence", DROP), False),
    ('risk level "HIGH"', at("conclusion.hypotheses.0.risk_level", "HIGH"), False),
    ("risk level 高", at("conclusion.hypotheses.0.risk_level", "高"), False),
    ("risk level empty", at("conclusion.hypotheses.1.risk_level", ""), False),
    ("hypotheses an object", at("conclusion.hypotheses", {"text": "x"}), False),
    ("no hypotheses", at("conclusion.hypotheses", DROP), False),
    ("a hypothesis that is a string", at("conclusion.hypotheses.1", "the pool"), False),
    ("actions not a list", at("conclusion.hypotheses.1.actions", {"name": "x"}), False),
    ('verify_first "true"', at("conclusion.hypotheses.0.actions.0.verify_first", "true"), False),
    ("no summary", at("conclusion.summary", DROP), False),
    # look-alikes that must pass
    ("confidence 中", at("conclusion.confidence", "中"), True),
    ("confidence low", at("conclusion.confidence", "low"), True),
    ("no risk level", at("conclusion.hypotheses.1.risk_level", DROP), True),
    ("risk level null", at("conclusion.hypotheses.1.risk_level", None), True),
    ("no actions", at("conclusion.hypotheses.1.actions", DROP), True),
    ("empty hypotheses", at("conclusion.hypotheses", []), True),
]  # fmt: skip

VERIFY_FIRST = [
    ("rollback under high, no verify_first", at("conclusion.hypotheses.0.actions.0.verify_first", DROP), False),
    ("any action under HIGH", at("conclusion.hypotheses.1.risk_level", "HIGH"), False),
    ("any action under 高", at("conclusion.hypotheses.1.risk_level", "高"), False),
    ("any action under ' High'", at("conclusion.hypotheses.1.risk_level", " High"), False),
    ("Roll-Back under low", at("conclusion.hypotheses.1.actions.0.name", "Roll-Back"), False),
    ("RollBack under low", at("conclusion.hypotheses.1.actions.0.name", "RollBack"), False),
    ("ROLL_BACK under low", at("conclusion.hypotheses.1.actions.0.name", "ROLL_BACK"), False),
    ("full-width restart", at("conclusion.hypotheses.1.actions.0.name", "ｒｅｓｔａｒｔ payment"), False),
    ("重启 under low", at("conclusion.hypotheses.1.actions.0.name", "重启支付服务"), False),
    ("回滚 under low", at("conclusion.hypotheses.1.actions.0.name", "回滚到 v2.2"), False),
    ("scale_to_zero", at("conclusion.hypotheses.1.actions.0.name", "scale_to_zero"), False),
    ("scale with replicas 0", at("conclusion.hypotheses.1.actions.0", {"name": "scale", "args": {"replicas": 0}}), False),
    ('verify_first "true" (a string)', at("conclusion.hypotheses.0.actions.0.verify_first", "true"), False),
    ("verify_first 1", at("conclusion.hypotheses.0.actions.0.verify_first", 1), False),
    # look-alikes that must pass
    ("a read-only action about rollbacks", at("conclusion.hypotheses.1.actions.0.name", "check_rollback_status"), True),
    ("counting restarts", at("conclusion.hypotheses.1.actions.0.name", "get_restart_count"), True),
    ("查看重启记录", at("conclusion.hypotheses.1.actions.0.name", "查看重启记录"), True),
    ("scaling to three", at("conclusion.hypotheses.1.actions.0", {"name": "scale", "args": {"replicas": 3}}), True),
    ("a restart that says verify first", at("conclusion.hypotheses.1.actions.0", {"name": "restart", "verify_first": True}), True),
    ("no risk level, harmless action", at("conclusion.hypotheses.1.risk_level", DROP), True),
]  # fmt: skip


def _rows(table: list[tuple[str, Edit, bool]]) -> list[Any]:
    return [
        pytest.param(lang, edit, passes, id=f"{lang}-{what}")
        for what, edit, passes in table
        for lang in LANGS
    ]


def _assert(policies: PolicySet, lang: str, edit: Edit, code: str, passes: bool) -> None:
    result = verify(policies, edited(lang, edit), lang)
    found = check(result, code)
    assert found.passed is passes, found.reason
    if not passes:
        assert found.recommendation and result.decision == "rejected"


@pytest.mark.parametrize(("lang", "edit", "passes"), _rows(FABRICATED))
def test_fabricated_evidence(policies: PolicySet, lang: str, edit: Edit, passes: bool) -> None:
    """Cited minus held by real findings and the ledger, in one id form; wrong types ignored."""
    _assert(policies, lang, edit, "conclusion.fabricated_evidence", passes)


@pytest.mark.parametrize(("lang", "edit", "passes"), _rows(CORROBORATION))
def test_corroboration(policies: PolicySet, lang: str, edit: Edit, passes: bool) -> None:
    """Two specialists, each with cited evidence of its own; placeholders never count."""
    _assert(policies, lang, edit, "conclusion.corroboration", passes)


@pytest.mark.parametrize(("lang", "edit", "passes"), _rows(SCHEMA))
def test_schema(policies: PolicySet, lang: str, edit: Edit, passes: bool) -> None:
    """Exact allowed values; a risk level absent but never invalid; lists where lists belong."""
    _assert(policies, lang, edit, "conclusion.schema", passes)


@pytest.mark.parametrize(("lang", "edit", "passes"), _rows(VERIFY_FIRST))
def test_verify_first(policies: PolicySet, lang: str, edit: Edit, passes: bool) -> None:
    """High risk read in canonical form; risky actions by their words; only true is true."""
    _assert(policies, lang, edit, "conclusion.verify_first", passes)


@pytest.mark.parametrize("lang", LANGS)
def test_the_base_conclusion_passes_every_check(policies: PolicySet, lang: str) -> None:
    """The conclusion every row rewrites passes as it is, with its reasons in its language."""
    result = verify(policies, edited(lang, None), lang)
    assert result.decision == "approved", result.reason
    schema = check(result, "conclusion.schema")
    assert ("结构" in schema.reason) is (lang == "zh")


def test_a_near_miss_names_the_exact_value(policies: PolicySet) -> None:
    """'High ' is told to write high, so the revision can fix it in one go."""
    result = verify(policies, edited("en", at("conclusion.confidence", "High ")), "en")
    assert "write exactly high" in check(result, "conclusion.schema").reason


def test_every_violation_is_reported_at_once(policies: PolicySet) -> None:
    """Schema, fabricated ids, corroboration and verify_first all fail in one verification."""
    edit = both(
        at("conclusion.confidence", "高度"),
        at("conclusion.evidence_ids", ["ev-9"]),
        at("conclusion.hypotheses.0.actions.0.verify_first", DROP),
    )
    result = verify(policies, edited("zh", edit), "zh")
    failed = {c.code for c in result.checks if not c.passed}
    assert {
        "conclusion.schema",
        "conclusion.fabricated_evidence",
        "conclusion.corroboration",
        "conclusion.verify_first",
    } <= failed


# --- business rules ---------------------------------------------------------------------

RULES = """
member = "m"
name = "M"

[[checks]]
check = "conclusion.rules"
stage = "fact_verification"
types = ["conclusion"]

[[checks.params.rules]]
name = "env"
field = "conclusion.environment"
allowed = ["prod", "staging"]

[[checks.params.rules]]
name = "prod_ticket"
when = { field = "conclusion.environment", equals = "prod" }
field = "conclusion.ticket"
required = true

[[checks.params.rules]]
name = "impact"
field = "conclusion.impact_percent"
min = 0
max = 100
severity = "warn"

[[checks.params.rules]]
name = "actions_named"
field = "conclusion.hypotheses.*.actions.*.owner"
allowed = ["sre", "dba"]
"""

RULE_ROWS = [
    # (what, conclusion fields, decision, failed on_fail or None)
    ("a value outside the set", {"environment": "production"}, "rejected", "reject"),
    ("a value in another case", {"environment": "Prod", "ticket": "T-1"}, "rejected", "reject"),
    ("prod without its ticket", {"environment": "prod"}, "rejected", "reject"),
    ("a list item outside the set", {"hypotheses": [{"text": "x", "actions": [{"name": "a", "owner": "intern"}]}]}, "rejected", "reject"),
    ("a warn rule: out of range", {"impact_percent": 140}, "approved", "warn"),
    ("a warn rule: not a number", {"impact_percent": "lots"}, "approved", "warn"),
    # look-alikes that must pass
    ("prod with its ticket", {"environment": "prod", "ticket": "T-1"}, "approved", None),
    ("staging needs no ticket", {"environment": "staging"}, "approved", None),
    ("absent fields are not checked", {}, "approved", None),
    ("in range", {"impact_percent": 40.5, "hypotheses": [{"text": "x", "actions": [{"name": "a", "owner": "dba"}]}]}, "approved", None),
]  # fmt: skip


@pytest.fixture
def rule_policies(tmp_path: Any) -> PolicySet:
    (tmp_path / "m.toml").write_text(RULES, encoding="utf-8")
    return load_policies(tmp_path, require_shared=False)


@pytest.mark.parametrize(
    ("what", "fields", "decision", "on_fail"), RULE_ROWS, ids=[r[0] for r in RULE_ROWS]
)
@pytest.mark.parametrize("lang", LANGS)
def test_business_rules(
    rule_policies: PolicySet,
    lang: str,
    what: str,
    fields: dict[str, Any],
    decision: str,
    on_fail: str | None,
) -> None:
    """A set, a when/then requirement and a range; error rules reject, warn rules only warn."""
    given = {"member": "m", "conclusion": {"summary": "s", **fields}}
    result = verify(rule_policies, given, lang)
    found = check(result, "conclusion.rules")
    assert result.decision == decision, result.reason
    assert (None if found.passed else found.on_fail) == on_fail


def test_a_rule_that_raises_is_a_violation(
    rule_policies: PolicySet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule whose evaluation raises counts as violated, never as a pass. (The evaluation is
    replaced by one that raises: no rule a policy can write makes the real one raise.)"""

    def broken(*args: object) -> list[str]:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(rules_module, "violations", broken)
    result = verify(rule_policies, {"member": "m", "conclusion": {"summary": "s"}}, "en")
    found = check(result, "conclusion.rules")
    assert result.decision == "rejected" and "counted as violated" in found.reason


def test_a_rule_that_says_nothing_is_a_policy_error(tmp_path: Any) -> None:
    """A rule with no required, allowed, min or max is refused when the policies load."""
    (tmp_path / "m.toml").write_text(RULES.replace("min = 0\nmax = 100\n", ""), encoding="utf-8")
    with pytest.raises(Exception, match="give required, allowed, min or max"):
        load_policies(tmp_path, require_shared=False)
