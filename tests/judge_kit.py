"""Shared set-up of the judge tests: a layer whose judge talks to the loopback Messages API."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lingyi.config import JudgeSection
from lingyi.council import CouncilRecord, MemoryCouncil
from lingyi.judge import Judge
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion, CheckResult, VerificationResult
from lingyi.policy import PolicySet

KEY_ENV = "LINGYI_TEST_JUDGE_KEY"  # never set by the tests: a key is handed over directly
FAKE_KEY = "sk-ant-loopback-not-a-secret-0123456789abcdef"
SUPPORTED = "会议纪要已发送给所有成员"  # passes every deterministic check of lingyi


def judge_config(url: str, **settings: Any) -> JudgeSection:
    settings.setdefault("timeout_s", 5.0)
    return JudgeSection(enabled=True, base_url=url, api_key_env=KEY_ENV, **settings)


@dataclass
class Rig:
    """A layer with a real judge, and the judge itself (its cache, budget, loop)."""

    layer: ConstraintLayer
    judge: Judge
    ledger: Ledger

    def verify(self, content: str = SUPPORTED, **fields: Any) -> VerificationResult:
        fields.setdefault("member", "lingyi")
        fields.setdefault("type", "fact")
        assertion = Assertion.model_validate({"content": content, **fields})
        return self.layer.verify(assertion, self.ledger)

    def close(self) -> None:
        self.judge.close()


def rig(
    policies: PolicySet,
    url: str,
    *,
    key: str | None = FAKE_KEY,
    council: CouncilRecord | None = None,
    ledger: Ledger | None = None,
    **settings: Any,
) -> Rig:
    config = judge_config(url, **settings)
    judge = Judge(config, api_key=key if key is not None else "")
    layer = ConstraintLayer(
        policies,
        council if council is not None else MemoryCouncil(),
        language="en",
        judge=judge,
        judge_unavailable=config.on_error,
    )
    return Rig(layer, judge, ledger if ledger is not None else Ledger())


def judged(result: VerificationResult) -> CheckResult:
    """The judge's check of a result (exactly one)."""
    found = [c for c in result.checks if c.stage.value == "judge"]
    assert len(found) == 1, [c.code for c in result.checks]
    return found[0]


def trace(result: VerificationResult) -> dict[str, Any]:
    value: dict[str, Any] = judged(result).detail["judge"]
    return value


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connections are refused at once."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def policy_folder(tmp: Path, shipped: Path, extra: dict[str, str]) -> Path:
    """A copy of the shipped policies with text appended to some files."""
    import shutil

    folder = tmp / "validators"
    shutil.copytree(shipped, folder)
    for name, text in extra.items():
        path = folder / name
        path.write_text(path.read_text(encoding="utf-8") + "\n" + text, encoding="utf-8")
    return folder
