"""The decision engine: stage order, fail closed, judge gating, reject > fallback > approve."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path

import pytest

from lingyi.checks import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.checks._registry import Services
from lingyi.council import MemoryCouncil
from lingyi.guard import trace_lookup
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, Fallback, OnFail, Principal, Stage
from lingyi.policy import load_policies
from tests.loopback import serving


class Flag(CheckParams):
    passed: bool = True


@register("test.flag", Flag)
def flag(ctx: CheckContext, params: Flag) -> Outcome:
    """Pass or fail as configured; fallbacks offer a relabel."""
    if params.passed:
        return ok("fine")
    return fail("flagged", "do the other thing", Fallback(kind="relabel", content="safe"))


@register("test.raises", Flag)
def raises(ctx: CheckContext, params: Flag) -> Outcome:
    """Always raises, like a check with a bug."""
    raise RuntimeError("boom")


def layer_with(tmp_path: Path, checks: str, judge: object = None) -> ConstraintLayer:
    folder = tmp_path / "validators"
    folder.mkdir(exist_ok=True)
    (folder / "m.toml").write_text('member = "m"\nname = "M"\n' + checks, encoding="utf-8")
    return ConstraintLayer(
        load_policies(folder, require_shared=False), MemoryCouncil(), language="en", judge=judge
    )  # type: ignore[arg-type]


def entry(check: str, stage: str, on_fail: str, **params: object) -> str:
    body = ", ".join(f"{k} = {str(v).lower()}" for k, v in params.items())
    return f'[[checks]]\ncheck = "{check}"\nstage = "{stage}"\non_fail = "{on_fail}"\nparams = {{ {body} }}\n'


def run(layer: ConstraintLayer) -> list[str]:
    result = layer.verify(Assertion(member="m", type="fact", content="x"), Ledger())
    return [result.decision.value, *result.failed_codes]


DECISIONS = [
    ([("test.flag", "reject", False), ("test.flag", "fallback", False)], "rejected"),
    ([("test.flag", "fallback", False), ("test.flag", "warn", False)], "fallback"),
    ([("test.flag", "warn", False)], "approved"),
    ([("test.flag", "reject", True)], "approved"),
    ([("test.raises", "reject", True)], "rejected"),
    ([("test.raises", "warn", True)], "approved"),
]


@pytest.mark.parametrize(("checks", "decision"), DECISIONS)
def test_reject_beats_fallback_beats_approve(
    tmp_path: Path, checks: list[tuple[str, str, bool]], decision: str
) -> None:
    """Any failed reject → rejected; else failed fallback → fallback; warn never blocks."""
    text = "".join(entry(c, "fact_verification", f, passed=p) for c, f, p in checks)
    assert run(layer_with(tmp_path, text))[0] == decision


def test_a_check_that_raises_fails_closed(tmp_path: Path) -> None:
    """An exception in a check is a failure that says so, marked degraded."""
    layer = layer_with(tmp_path, entry("test.raises", "boundary", "reject"))
    result = layer.verify(Assertion(member="m", type="fact", content="x"), Ledger())
    check = next(c for c in result.checks if c.code == "test.raises")
    assert not check.passed and check.degraded and "boom" in check.reason


def test_stages_run_in_cost_order_and_all_run(tmp_path: Path) -> None:
    """Checks report in stage order, and a failure early does not stop later stages."""
    text = (
        entry("test.flag", "fact_verification", "reject", passed=False)
        + entry("test.flag", "boundary", "reject", passed=False)
        + entry("test.flag", "pre_check", "reject", passed=True)
    )
    result = layer_with(tmp_path, text).verify(
        Assertion(member="m", type="fact", content="x"), Ledger()
    )
    stages = [c.stage for c in result.checks if c.code == "test.flag"]
    assert stages == [Stage.PRE_CHECK, Stage.BOUNDARY, Stage.FACT_VERIFICATION]


def test_fallback_travels_typed_from_the_check_to_the_result(tmp_path: Path) -> None:
    """The fallback a check offers is the result's fallback, typed, never round-tripped via dicts."""
    layer = layer_with(tmp_path, entry("test.flag", "fact_verification", "fallback", passed=False))
    result = layer.verify(Assertion(member="m", type="fact", content="x"), Ledger())
    check = next(c for c in result.checks if c.code == "test.flag")
    assert result.fallback == check.fallback == Fallback(kind="relabel", content="safe")
    assert "fallback" not in check.detail


TWO_MEMBERS = 'member = "{id}"\nname = "{name}"\naliases = ["{alias}"]\n'


def two_member_layer(tmp_path: Path, language: str) -> ConstraintLayer:
    folder = tmp_path / "validators"
    folder.mkdir(exist_ok=True)
    for member, name, alias in (("lingzhi", "灵知", "LingZhi"), ("lingflow", "灵通", "LingFlow")):
        (folder / f"{member}.toml").write_text(
            TWO_MEMBERS.format(id=member, name=name, alias=alias), encoding="utf-8"
        )
    return ConstraintLayer(
        load_policies(folder, require_shared=False), MemoryCouncil(), language=language
    )


BINDINGS = [
    # (language, member spoken for, token's members, decision, failed codes, reason says)
    ("en", "lingzhi", ("lingzhi",), "approved", [], "may speak for"),
    ("en", "灵知", ("LingZhi",), "approved", [], "may speak for"),  # names resolve both sides
    ("en", "lingzhi", (), "approved", [], "bound to no member"),
    ("en", "LingFlow", ("lingzhi",), "rejected", ["auth.member_bound"], "may not speak for"),
    ("en", "nobody", ("lingzhi",), "rejected", ["member.known", "auth.member_bound"], "unknown member"),
    ("zh", "灵通", ("灵知",), "rejected", ["auth.member_bound"], "不能代表"),
    ("zh", "灵知", ("灵知",), "approved", [], "可以代表"),
]  # fmt: skip


@pytest.mark.parametrize(("lang", "member", "bound", "decision", "codes", "says"), BINDINGS)
def test_a_token_speaks_only_for_its_members(
    tmp_path: Path,
    lang: str,
    member: str,
    bound: tuple[str, ...],
    decision: str,
    codes: list[str],
    says: str,
) -> None:
    """auth.member_bound is a check of the layer: its verdict, reason and hint, zh and en."""
    layer = two_member_layer(tmp_path, lang)
    principal = Principal(name="desktop", members=bound)
    assertion = Assertion(member=member, type="fact", content="x")
    result = layer.verify(assertion, Ledger(), principal=principal)
    assert result.decision.value == decision and result.failed_codes == codes
    texts = " ".join(c.reason for c in result.checks)
    assert says in texts and "desktop" in texts
    if decision == "rejected":
        assert result.recommendation


def test_no_principal_runs_no_binding_check(tmp_path: Path) -> None:
    """stdio, the CLI and replay authenticate nobody: no auth.member_bound in their results."""
    result = two_member_layer(tmp_path, "en").verify(
        Assertion(member="lingzhi", type="fact", content="x"), Ledger()
    )
    assert "auth.member_bound" not in [c.code for c in result.checks]
    assert result.member == "lingzhi"


def test_an_unbound_speaker_runs_none_of_the_members_checks(tmp_path: Path) -> None:
    """A token refused for a member learns nothing from that member's checks: none run."""
    layer = layer_with(tmp_path, entry("test.flag", "boundary", "reject", passed=False))
    principal = Principal(name="other", members=("someone-else",))
    result = layer.verify(
        Assertion(member="m", type="fact", content="x"), Ledger(), principal=principal
    )
    assert [c.code for c in result.checks] == ["auth.member_bound"]


def test_the_snapshot_given_is_the_one_that_decides_and_is_named(tmp_path: Path) -> None:
    """One policy snapshot per request: its member and version are the result's."""
    layer = layer_with(tmp_path, "")
    before = layer.policies
    (tmp_path / "validators" / "m.toml").write_text(
        'member = "m"\nname = "M"\n' + entry("test.flag", "boundary", "reject", passed=False),
        encoding="utf-8",
    )
    after = load_policies(tmp_path / "validators", require_shared=False)
    assertion = Assertion(member="M", type="fact", content="x")
    old = layer.verify(assertion, Ledger(), policies=before)
    new = layer.verify(assertion, Ledger(), policies=after)
    assert (old.decision.value, old.policy_version, old.member) == ("approved", before.version, "m")
    assert (new.decision.value, new.policy_version) == ("rejected", after.version)
    assert before.version != after.version


def test_judge_runs_only_after_every_deterministic_check_passed(tmp_path: Path) -> None:
    """The costly judge is never called after a deterministic failure."""
    calls: list[str] = []

    def judge(ctx: CheckContext) -> CheckResult:
        calls.append(ctx.assertion.content)
        return CheckResult(
            stage=Stage.JUDGE, code="judge.llm", passed=True, reason="ok", on_fail=OnFail.REJECT
        )

    failing = layer_with(tmp_path, entry("test.flag", "boundary", "reject", passed=False), judge)
    assert run(failing)[0] == "rejected" and calls == []
    passing = layer_with(tmp_path, entry("test.flag", "boundary", "reject", passed=True), judge)
    assert run(passing)[0] == "approved" and calls == ["x"]


@pytest.fixture
def trace_server() -> Iterator[str]:
    """A real loopback trace backend: 200 for one known id, 404 otherwise."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            known = self.path.endswith("/" + "a" * 32)
            self.send_response(200 if known else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url + "/traces"


@pytest.mark.parametrize(("trace", "decision"), [("a" * 32, "approved"), ("b" * 32, "rejected")])
def test_trace_ids_confirmed_by_the_backend(
    policies: object, trace_server: str, trace: str, decision: str
) -> None:
    """A trace id not in the ledger is looked up over HTTP: found passes, 404 rejects."""
    services = Services(trace_lookup=trace_lookup(trace_server, 1.0))
    layer = ConstraintLayer(policies, MemoryCouncil(), services=services, language="en")  # type: ignore[arg-type]
    result = layer.verify(
        Assertion(member="lingflow", type="fact", content=f"502 in trace {trace}"), Ledger()
    )
    assert result.decision == decision


@pytest.mark.parametrize(("on_error", "decision"), [("fail", "rejected"), ("pass", "approved")])
def test_backend_outage_follows_on_error_and_is_degraded(
    tmp_path: Path, on_error: str, decision: str
) -> None:
    """With the trace backend down, the policy's on_error decides, and the result says degraded."""
    folder = tmp_path / "validators"
    folder.mkdir()
    (folder / "m.toml").write_text(
        'member = "m"\nname = "M"\n[[checks]]\ncheck = "evidence.id_patterns"\nstage = "fact_verification"\n'
        f'on_error = "{on_error}"\n',
        encoding="utf-8",
    )
    services = Services(
        trace_lookup=trace_lookup("http://127.0.0.1:9", 0.5)
    )  # nothing listens on port 9
    layer = ConstraintLayer(
        load_policies(folder, require_shared=False),
        MemoryCouncil(),
        services=services,
        language="en",
    )
    result = layer.verify(
        Assertion(member="m", type="fact", content="see trace " + "c" * 32), Ledger()
    )
    check = next(c for c in result.checks if c.code == "evidence.id_patterns")
    assert result.decision == decision and check.degraded
