"""Failures that used to be silent or end in a traceback: each is one line naming what to fix.

``stats`` and ``report`` on a mistyped ``--log`` (or ``$LINGYI_LOG``) or on a device used to
print "ok (0 records)"; ``serve`` with a missing knowledge-base folder started without a word;
``--port 99999`` ended in a traceback; an upstream ``command = ["python", …]`` depended on the
PATH of whoever started the guard (Claude Desktop starts it with a short one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lingyi.gateway import Gateway
from tests.conftest import ROOT
from tests.gateway_kit import SERVER
from tests.test_cli import config_file, run
from tests.test_server import deploy

MISSING = "typo-verification.jsonl"


@pytest.mark.parametrize(
    "command", [["stats"], ["stats", "--json"], ["report", "--out", "/tmp/failB-reports"]]
)
@pytest.mark.parametrize("named", ["missing", "device"])
def test_stats_and_report_refuse_a_named_log_that_is_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], named: str
) -> None:
    """A ``--log`` that does not exist, or is a device (/dev/null here; /dev/full reads
    forever), is exit 2 naming the file, not an empty week."""
    log = str(tmp_path / MISSING) if named == "missing" else "/dev/null"
    config = str(config_file(tmp_path))
    code, out, err = run(capsys, "--config", config, "--log", log, *command)
    assert code == 2, (out, err)
    assert f"{log}: " in err and "(named by --log)" in err
    assert "0 records" not in out


def test_a_mistyped_lingyi_log_is_named_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """$LINGYI_LOG pointing nowhere: exit 2, naming the file and the variable."""
    monkeypatch.setenv("LINGYI_LOG", str(tmp_path / MISSING))
    code, _, err = run(capsys, "--config", str(config_file(tmp_path)), "stats")
    assert code == 2 and MISSING in err and "$LINGYI_LOG" in err


def test_stats_on_a_deployment_with_no_log_yet_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config's own log, not yet written (a fresh install), is an empty week, exit 0."""
    monkeypatch.delenv("LINGYI_LOG", raising=False)
    path = config_file(tmp_path)
    path.write_text(path.read_text() + f'log = "{tmp_path / "fresh.jsonl"}"\n')
    code, out, _ = run(capsys, "--config", str(path), "stats", "--json")
    assert code == 0 and isinstance(json.loads(out), dict)


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_a_port_out_of_range_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], port: str
) -> None:
    """``serve --http --port 99999``: exit 2 and one line naming --port, no traceback."""
    code, _, err = run(capsys, "--config", str(config_file(tmp_path)), "serve", "--http", "--port", port)  # fmt: skip
    assert code == 2 and err.strip().count("\n") == 0, err
    assert f"--port {port}" in err and "1..65535" in err


def _serve_stdio(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / ".venv/bin/lingyi"), "--config", str(config), "serve"],
        input="", capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_serve_warns_once_about_a_missing_knowledge_base(tmp_path: Path) -> None:
    """A knowledge-base folder that is not there: serve starts, with one warning line on
    stderr naming paths.knowledge_base; stdout stays protocol only; policy check fails."""
    dep = deploy(tmp_path / "deploy")
    text = dep.config_path.read_text(encoding="utf-8")
    kb = [line for line in text.splitlines() if line.startswith("knowledge_base")]
    assert kb, text
    dep.config_path.write_text(text.replace(kb[0], 'knowledge_base = "no-such-kb"'), "utf-8")
    done = _serve_stdio(dep.config_path)
    warnings = [line for line in done.stderr.splitlines() if "warning: paths." in line]
    assert done.stdout == "" and len(warnings) == 1, done.stderr
    assert "paths.knowledge_base" in warnings[0] and "no-such-kb" in warnings[0]
    check = subprocess.run(
        [str(ROOT / ".venv/bin/lingyi"), "--config", str(dep.config_path), "policy", "check"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.returncode != 0 and "no-such-kb" in check.stdout + check.stderr


def test_serve_with_every_path_in_place_warns_about_nothing(tmp_path: Path) -> None:
    """The test deployment as written: no warning line at start."""
    done = _serve_stdio(deploy(tmp_path / "deploy").config_path)
    assert "warning: paths." not in done.stderr


@pytest.mark.parametrize("python", ["python", "python3", "{python}"])
def test_an_upstream_run_with_python_uses_the_guards_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python: str
) -> None:
    """``command = ["python", …]`` starts the upstream with the interpreter running the guard,
    even with no python on PATH (as under Claude Desktop): its tools are listed."""
    dep = deploy(tmp_path / "deploy", f"""
[[upstreams]]
name = "fake"
command = ["{python}", "{SERVER.as_posix()}", "stdio"]
members = ["灵通"]
timeout_s = 20
""")  # fmt: skip
    config = dep.config()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    gateway = Gateway(config)
    try:
        assert gateway.unavailable == [] and "fake.echo" in gateway.tools
    finally:
        gateway.close()
    assert Path(sys.executable).exists()
