"""Judge rules in the policy files: validated on load (file and key), chosen per member, tool
and kind, and the pre-flight review of destructive tool calls (rule gates first)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lingyi.checks import CheckContext
from lingyi.checks._registry import Services
from lingyi.config import JudgeSection
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.judge import plan_for
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence
from lingyi.policy import PolicySet, load_policies
from lingyi.policy._load import policy_errors
from tests import messages_api as api
from tests.conftest import SHIPPED_POLICIES
from tests.judge_kit import judged, policy_folder, rig, trace

MEMBER = 'member = "scribe"\nname = "Scribe"\n[tools.scale]\ndestructive = true\n[tools.note]\n'
RUBRIC = 'rubric = """\nThe action fits the incident\n- Nothing says the target is in use\n"""\n'


def errors_of(tmp_path: Path, text: str) -> list[tuple[str, str, str]]:
    folder = policy_folder(tmp_path, SHIPPED_POLICIES, {})
    (folder / "scribe.toml").write_text(MEMBER + text, encoding="utf-8")
    return [(Path(e.path).name, e.key, e.message) for e in policy_errors(folder)]


BAD = [
    # (the [[judge]] table, key, message)
    ('[[judge]]\nrubric = "  \\n# only a comment\\n"\n', "judge[0].rubric", "at least one criterion"),
    ("[[judge]]\n" + RUBRIC + "rubrik = 'x'\n", "judge[0].rubrik", "unknown key 'rubrik'"),
    ("[[judge]]\n", "judge[0].rubric", "at least one criterion (one a line), or signals"),
    ('[[judge]]\nkind = "verdict"\n' + RUBRIC, "judge[0].kind", '"verdict" is not allowed; valid values: assertion, conclusion, answer, destructive'),
    ('[[judge]]\ntools = ["push"]\n' + RUBRIC, "judge[0].tools", "'push' is not a tool of this member (its tools: note, scale)"),
    ('[[judge]]\nkind = "destructive"\ntools = ["note"]\n' + RUBRIC, "judge[0].tools", "'note' is not declared destructive = true"),
    ("[[judge]]\nrubric = '''\n" + "\n".join(f"criterion {i}" for i in range(13)) + "\n'''\n", "judge[0].rubric", "at most 12 criteria"),
    ("[[judge]]\nrubric = '''\nsame\n- same\n'''\n", "judge[0].rubric", "a criterion appears twice"),
    ("[[judge]]\n" + RUBRIC + "max_revisions = -1\n", "judge[0].max_revisions", "at least 0"),
    ("[[judge]]\n" + RUBRIC + "timeout_s = 0\n", "judge[0].timeout_s", "greater than 0"),
    ("[[judge]]\n" + RUBRIC + 'on_error = "maybe"\n', "judge[0].on_error", '"maybe" is not allowed; valid values: pass, fail'),
    ("[[judge]]\n" + RUBRIC + "max_tokens = 10\n", "judge[0].max_tokens", "at least 64"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "key", "message"), BAD, ids=[b[1] + ":" + b[2][:20] for b in BAD])
def test_bad_judge_rules_name_file_and_key(
    tmp_path: Path, text: str, key: str, message: str
) -> None:
    """A mistake in a [[judge]] table is a policy error with the file and the key."""
    found = errors_of(tmp_path, text)
    assert [(f, k) for f, k, _ in found] == [("scribe.toml", key)], found
    assert message in found[0][2]


GOOD = [
    '[[judge]]\nkind = "destructive"\ntools = ["scale"]\n' + RUBRIC + "max_revisions = 0\n",
    '[[judge]]\nkind = "conclusion"\n' + RUBRIC,  # kinds of the next issue are accepted now
    '[[judge]]\nkind = "answer"\nmodel = "claude-sonnet-4-5"\n' + RUBRIC,
    '[[judge]]\ntypes = ["communication"]\non_fail = "warn"\n' + RUBRIC,
]


@pytest.mark.parametrize("text", GOOD)
def test_good_judge_rules_load(tmp_path: Path, text: str) -> None:
    """The other side: well-formed rules load, with their criteria, placed by file."""
    assert errors_of(tmp_path, text) == []
    folder = tmp_path / "validators"
    rule = load_policies(folder).members["scribe"].judge[0]
    assert rule.criteria == ["The action fits the incident", "Nothing says the target is in use"]
    assert rule.source == "scribe.toml judge[0]"


def test_shared_rules_come_after_the_members_own(tmp_path: Path) -> None:
    """[[judge]] in _common.toml applies to every member, read after a member's own."""
    folder = policy_folder(
        tmp_path,
        SHIPPED_POLICIES,
        {"_common.toml": "[[judge]]\n" + RUBRIC, "lingzhi.toml": "[[judge]]\n" + RUBRIC},
    )
    members = load_policies(folder).members
    # _common.toml judge[0] is the shipped critic of answers; judge[1] the one added here.
    assert [r.source for r in members["lingzhi"].judge] == [
        "lingzhi.toml judge[0]",
        "_common.toml judge[0]",
        "_common.toml judge[1]",
    ]
    assert [r.source for r in members["lingyi"].judge] == [
        "_common.toml judge[0]",
        "_common.toml judge[1]",
    ]


# --------------------------------------------------------------------------- which rule


RULES = """
[[judge]]
rubric = "general"

[[judge]]
tools = ["note"]
rubric = "for notes"

[[judge]]
kind = "destructive"
tools = ["scale"]
rubric = "pre-flight of scale"
"""
CASES = [
    # (assertion fields, config, expected (kind, source, first criterion) or None)
    ({"type": "fact", "content": "x"}, {}, ("assertion", "scribe.toml judge[0]", "general")),
    ({"type": "action", "tool_call": {"name": "note"}}, {}, ("assertion", "scribe.toml judge[1]", "for notes")),
    ({"type": "action", "tool_call": {"name": "scale"}}, {}, ("destructive", "scribe.toml judge[2]", "pre-flight of scale")),
    ({"type": "fact", "content": "x"}, {"members": ["lingzhi"]}, None),
]  # fmt: skip
DEFAULTS = [
    ({"type": "fact", "content": "x"}, ("assertion", "default")),
    ({"type": "action", "tool_call": {"name": "search_knowledge", "arguments": {}}}, None),
]


def _ctx(policies: PolicySet, member: str, **fields: Any) -> CheckContext:
    assertion = Assertion.model_validate({"member": member, **fields})
    return CheckContext(
        assertion,
        policies.members[member],
        policies,
        Ledger(),
        MemoryCouncil(),
        Services(),
        "en",
    )


@pytest.mark.parametrize(("fields", "settings", "expected"), CASES)
def test_the_rule_is_chosen_by_member_tool_and_kind(
    tmp_path: Path, fields: dict[str, Any], settings: dict[str, Any], expected: Any
) -> None:
    """Destructive calls get their pre-flight rule; a rule naming the tool beats a general one."""
    assert errors_of(tmp_path, RULES) == []
    policies = load_policies(tmp_path / "validators")
    plan = plan_for(_ctx(policies, "scribe", **fields), JudgeSection(enabled=True, **settings))
    got = (plan.kind, plan.source, plan.criteria[0]) if plan else None
    assert got == expected


@pytest.mark.parametrize(("fields", "expected"), DEFAULTS)
def test_without_a_rule_content_gets_the_default_rubric(
    policies: PolicySet, fields: dict[str, Any], expected: Any
) -> None:
    """No rule: content is judged on the default rubric; a bare tool call is not judged."""
    member = "lingzhi"
    plan = plan_for(_ctx(policies, member, **fields), JudgeSection(enabled=True))
    assert ((plan.kind, plan.source) if plan else None) == expected


def test_rule_limits_override_the_config() -> None:
    """A rule's model, timeout, tokens, on_error and revisions win over [judge]'s."""
    text = RULES.replace(
        'rubric = "general"', 'rubric = "general"\nmodel = "m2"\nmax_revisions = 0'
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        assert errors_of(Path(tmp), text) == []
        policies = load_policies(Path(tmp) / "validators")
    ctx = _ctx(policies, "scribe", type="fact", content="x")
    plan = plan_for(ctx, JudgeSection(enabled=True, max_revisions=5, model="m1"))
    assert plan is not None and (plan.model, plan.max_revisions) == ("m2", 0)
    assert plan.timeout_s == 20.0 and plan.on_error == "pass"


# --------------------------------------------------------------------------- pre-flight


OPS = """member = "ops"
name = "Ops"
[tools.scale_service]
destructive = true
args.service = { type = "string", required = true, min_length = 1 }
args.replicas = { type = "integer", required = true, min = 0, max = 50 }

[[judge]]
kind = "destructive"
tools = ["scale_service"]
rubric = '''
The action fits the incident the session's evidence describes
The action does not take a service the council is relying on out of service
'''
"""


@pytest.fixture
def ops(tmp_path: Path) -> PolicySet:
    folder = policy_folder(tmp_path, SHIPPED_POLICIES, {})
    (folder / "ops.toml").write_text(OPS, encoding="utf-8")
    return load_policies(folder)


def reviewer(req: dict[str, Any]) -> api.Reply:
    """Scaling to zero while the council relies on the service needs a revision."""
    data = api.data_of(req)
    assert data["kind"] == "destructive" and data["council"] and data["evidence"]
    if data["tool_call"]["arguments"]["replicas"] == 0:
        gap = "checkout is serving the incident's traffic (m-1); scaling it to zero takes it down"
        return api.tool_use(req, api.verdict(req, {"c2": gap}))
    return api.tool_use(req, api.verdict(req))


@pytest.fixture
def model() -> Iterator[tuple[api.FakeModel, str]]:
    with api.messages_api(api.FakeModel(script=reviewer)) as served:
        yield served


PREFLIGHT = [
    # (replicas, decision, judge asked)
    (3, "approved", True),
    (0, "rejected", True),  # the judge blocks it
    (-1, "rejected", False),  # the argument schema (a rule gate) rejects first: no call
    ("lots", "rejected", False),
]


@pytest.mark.parametrize(("replicas", "decision", "asked"), PREFLIGHT)
def test_destructive_calls_are_reviewed_before_they_run(
    ops: PolicySet, model: tuple[api.FakeModel, str], replicas: Any, decision: str, asked: bool
) -> None:
    """The judge sees the call with the session's evidence and council messages, and can
    block it; the rule gates run first and a call they refuse costs no judge call."""
    state, url = model
    council = MemoryCouncil(
        [
            CouncilMessage.model_validate(
                {"id": "m-1", "from": "lingflow", "content": "checkout 正在承接故障流量"}
            )
        ]
    )
    made = rig(ops, url, council=council)
    made.ledger.record(
        "inc", "lingflow", "query_traces", {}, [Evidence(id="t-1", title="checkout 502")]
    )
    call = {"name": "scale_service", "arguments": {"service": "checkout", "replicas": replicas}}
    result = made.verify("", member="ops", type="action", tool_call=call, session="inc")
    made.close()
    assert result.decision == decision and (len(state.requests) == 1) is asked
    if asked:
        assert judged(result).code == "judge.preflight" and trace(result)["kind"] == "destructive"
    if decision == "rejected" and asked:
        assert "scaling it to zero" in (result.recommendation or "")
