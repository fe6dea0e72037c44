"""Shared fixtures: the shipped policies, a layer with an in-memory council, a temp config."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lingyi.checks._registry import Services
from lingyi.config import defaults_dir
from lingyi.council import CouncilMessage, MemoryCouncil
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, Evidence, VerificationResult
from lingyi.policy import PolicySet, load_policies

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_POLICIES = defaults_dir() / "validators"
TIERS = Path(__file__).with_name("tiers.toml")
FAST_TIER_LIMIT_S = 1.0  # a fast-tier test slower than this is named at the end of the run


def _tiers() -> dict[str, tuple[set[str], set[str]]]:
    """Each kind of slow test in tests/tiers.toml: the modules and the module::function names."""
    kinds = tomllib.loads(TIERS.read_text(encoding="utf-8"))
    return {kind: (set(t["modules"]), set(t["tests"])) for kind, t in kinds.items()}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test tests/tiers.toml names with its kind and with `slow` (the tier)."""
    tiers = _tiers()
    for item in items:
        module = item.path.name
        name = f"{module}::{getattr(item, 'originalname', item.name)}"
        kinds = {k for k, (mods, tests) in tiers.items() if module in mods or name in tests}
        if kinds:
            for kind in sorted(kinds | {"slow"}):
                item.add_marker(kind)


_unmarked_slow: list[tuple[float, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note a test outside the slow tier that took longer than the fast tier allows."""
    fast_tier = "slow" not in report.keywords
    if report.when == "call" and fast_tier and report.duration > FAST_TIER_LIMIT_S:
        _unmarked_slow.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the fast-tier tests that belong in tests/tiers.toml, so `make check` stays fast."""
    if _unmarked_slow:
        terminalreporter.section("slow tests outside the slow tier (add them to tests/tiers.toml)")
        for duration, nodeid in sorted(_unmarked_slow, reverse=True):
            terminalreporter.write_line(f"{duration:6.2f}s {nodeid}")


@pytest.fixture(scope="session", autouse=True)
def _kb_index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The knowledge-base indexes that servers and the CLI keep (in $XDG_CACHE_HOME) go to
    a temporary folder, not the user's cache; subprocesses inherit it."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")
def policies() -> PolicySet:
    return load_policies(SHIPPED_POLICIES)


@pytest.fixture
def council() -> MemoryCouncil:
    return MemoryCouncil(
        [
            CouncilMessage.model_validate(m)
            for m in (
                {
                    "id": "m-1",
                    "from": "lingflow",
                    "content": "v0.16 审计已完成，报告见 audit-v0.16.md",
                },
                {
                    "id": "m-2",
                    "from": "lingresearch",
                    "content": "Dataset v3 labelling is finished: 12,400 samples.",
                },
                {"id": "m-3", "from": "lingflow", "content": "v0.17 的发布暂缓，等待安全评审"},
                {"id": "m-4", "from": "lingzhi", "content": "知识库迁移尚未开始，计划下个月进行"},
                {
                    "id": "m-5",
                    "from": "lingresearch",
                    "content": "A/B 实验 exp-37 仍在进行中，尚未得出结论",
                },
                {
                    "id": "m-6",
                    "from": "lingflow",
                    "content": "PR #3317 has been merged into release/2.4.",
                },
                {
                    "id": "m-7",
                    "from": "lingflow",
                    "content": "Android 版 v2.4.1 已提交 Google Play 审核",
                },
                {
                    "id": "m-8",
                    "from": "lingflow",
                    "content": "iOS v2.4.1 的构建因证书过期而失败，正在重新签名",
                },
            )
        ]
    )


@pytest.fixture
def ledger() -> Ledger:
    led = Ledger()
    led.record(
        "s1",
        "lingzhi",
        "search_knowledge",
        {"query": "气功"},
        [
            Evidence(id="kb:qg-001", title="气功源流", snippet="气功一词……"),
            Evidence(id="kb:qg-007", title="气功与呼吸", snippet="调息是气功的核心……"),
        ],
    )
    led.record(
        "s1",
        "lingresearch",
        "analyze_data",
        {"source": "experiment_logs"},
        [
            Evidence(
                id="an-3",
                title="A/B accuracy",
                snippet="variant B accuracy 0.874 vs A 0.851",
                url="https://reports.example/an-3",
            ),
        ],
    )
    led.record(
        "s1",
        "lingflow",
        "query_traces",
        {"service": "checkout"},
        [
            Evidence(id="5b8efff798038103d269b633813fc60c", title="checkout 502"),
        ],
    )
    return led


Verify = Callable[..., VerificationResult]


@pytest.fixture
def verify(policies: PolicySet, council: MemoryCouncil, ledger: Ledger, tmp_path: Path) -> Verify:
    """Verify one assertion (keyword fields) in session s1 against the fixtures."""
    repos = tmp_path / "repos"
    repos.mkdir()
    layer = ConstraintLayer(
        policies,
        council,
        services=Services(
            repo_roots=[repos], data_roots=[tmp_path], data_sources=["experiment_logs"]
        ),
        language="en",
    )

    def run(**fields: object) -> VerificationResult:
        fields.setdefault("session", "s1")
        return layer.verify(Assertion.model_validate(fields), ledger)

    return run
