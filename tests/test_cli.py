"""The command line: verify, log verify, policy check; exit codes and clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lingyi.cli import main
from tests.conftest import SHIPPED_POLICIES
from tests.test_replay import lingyi


def test_verify_from_flags_prints_a_readable_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rejected assertion prints the decision, the reason and what to do; exit 1."""
    code = main(
        [
            "--log",
            str(tmp_path / "l.jsonl"),
            "verify",
            "--member",
            "lingzhi",
            "--type",
            "action",
            "--content",
            "检索",
            "--tool",
            "search_knowledge",
            "--args",
            '{"query": "失眠吃什么药"}',
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("REJECTED") and "boundary.medical" in out and "→" in out


def test_verify_json_from_stdin_with_context() -> None:
    """JSON in, JSON out; --context fills the ledger and council from a transcript."""
    assertion = {
        "member": "lingyi",
        "type": "communication",
        "content": "灵通说v0.16审计已经完成",
        "id": "q1",
    }
    done = lingyi(
        "--log",
        "/dev/null",
        "verify",
        "--stdin",
        "--json",
        "--context",
        "examples/council-basics.jsonl",
        stdin=json.dumps(assertion),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["id"] == "q1" and result["decision"] == "approved"


def test_verify_bad_input_is_a_clear_error() -> None:
    """Malformed stdin JSON is exit 2 with a message, never a traceback."""
    done = lingyi("--log", "/dev/null", "verify", "--stdin", stdin="{not json")
    assert done.returncode == 2
    assert "lingyi: error:" in done.stderr and "Traceback" not in done.stderr


def test_log_verify_names_the_first_bad_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After an edit, `log verify` exits 1 and names the line and id of the first bad record."""
    log = tmp_path / "l.jsonl"
    main(["--log", str(log), "replay", "examples/council-basics.jsonl"])
    assert main(["--log", str(log), "log", "verify"]) == 0
    rows = log.read_text(encoding="utf-8").splitlines()
    bad = next(i for i, row in enumerate(rows) if '"decision":"rejected"' in row)
    edited = json.loads(rows[bad])
    rows[bad] = rows[bad].replace('"decision":"rejected"', '"decision":"approved"')
    log.write_text("\n".join(rows) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["--log", str(log), "log", "verify", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (
        report["breaks"][0]["lineno"] == bad + 1
        and report["breaks"][0]["record_id"] == edited["id"]
    )


def test_policy_check_stops_on_an_invalid_file(tmp_path: Path) -> None:
    """`policy check` exits 2 naming the file and key of the first error."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    original = (folder / "lingflow.toml").read_text(encoding="utf-8")
    index = original.count("[[checks]]")
    (folder / "lingflow.toml").write_text(
        original + '\n[[checks]]\ncheck = "inference.labelled"\n'
        'stage = "boundary"\non_fail = "maybe"\n',
        encoding="utf-8",
    )
    config = tmp_path / "lingyi.toml"
    config.write_text(f'[paths]\nvalidators = "{folder}"\n', encoding="utf-8")
    done = lingyi("--config", str(config), "policy", "check")
    assert done.returncode == 2
    assert "lingflow.toml" in done.stderr and f"checks[{index}].on_fail" in done.stderr


def test_policy_check_passes_on_shipped_policies() -> None:
    """The shipped policies validate; --json lists members and their tools."""
    done = lingyi("policy", "check", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["members"]["lingzhi"]["tools"] == ["search_knowledge"]


def test_bad_config_names_the_file_and_key(tmp_path: Path) -> None:
    """A config with a wrong key is exit 2 naming the file and the key."""
    config = tmp_path / "lingyi.toml"
    config.write_text('[paths]\nvalidatorz = "x"\n', encoding="utf-8")
    done = lingyi("--config", str(config), "policy", "check")
    assert (
        done.returncode == 2 and "lingyi.toml" in done.stderr and "paths.validatorz" in done.stderr
    )


def test_server_start_stops_on_an_invalid_policy(tmp_path: Path) -> None:
    """`lingyi serve` refuses to start on a bad policy file and names the file and key."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    path = folder / "lingzhi.toml"
    path.write_text(
        path.read_text(encoding="utf-8").replace('stage = "boundary"', 'stage = "soon"', 1),
        encoding="utf-8",
    )
    config = tmp_path / "lingyi.toml"
    config.write_text(f'[paths]\nvalidators = "{folder}"\n', encoding="utf-8")
    done = lingyi("--config", str(config), "--log", str(tmp_path / "l.jsonl"), "serve", stdin="")
    assert done.returncode == 2 and done.stdout == ""
    assert "lingzhi.toml" in done.stderr and "checks[0].stage" in done.stderr


def test_global_options_work_after_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lingyi log verify --log X` reads X, as `lingyi --log X log verify` does."""
    log = tmp_path / "l.jsonl"
    main(["replay", "examples/council-basics.jsonl", "--log", str(log)])
    capsys.readouterr()
    assert main(["log", "verify", "--json", "--log", str(log)]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 28
