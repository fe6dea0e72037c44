"""The command line: verify, log verify, policy check, global options, errors, colour, JSON.

Every test calls the real entry point: ``lingyi.cli.main`` in this process (with capsys), or
``python -m lingyi`` in a fresh one when stdin, the environment or a terminal matter.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from lingyi.cli import main
from lingyi.cli._app import App, Command, entry
from lingyi.log import read_log
from lingyi.models import Assertion
from tests.conftest import ROOT, SHIPPED_POLICIES
from tests.test_replay import lingyi

PACKAGED = (
    SHIPPED_POLICIES.parent / "lingyi.toml"
)  # the packaged config: every path it names exists
MEDICAL = ["--tool", "search_knowledge", "--args", '{"query": "失眠吃什么药"}']
ANSI = "\x1b["


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``lingyi ARGS`` in this process: exit code, stdout, stderr."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def config_file(tmp_path: Path, language: str = "zh", validators: Path = SHIPPED_POLICIES) -> Path:
    path = tmp_path / "lingyi.toml"
    path.write_text(
        f'language = "{language}"\n[paths]\nvalidators = "{validators.as_posix()}"\n',
        encoding="utf-8",
    )
    return path


# --------------------------------------------------------------------------- verify


@pytest.mark.parametrize(
    ("language", "reason"),
    [("zh", "越界：医疗建议"), ("en", "out of bounds: medical advice")],
)
def test_verify_prints_the_verdict_the_record_and_how_to_appeal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], language: str, reason: str
) -> None:
    """A rejection prints the decision, the reason in the config's language, each check, then
    the record id and the appeal command; exit 1."""
    log = tmp_path / "l.jsonl"
    config = config_file(tmp_path, language)
    code, out, _ = run(
        capsys,
        "--config",
        str(config),
        "--log",
        str(log),
        "verify",
        "--member",
        "lingzhi",
        *MEDICAL,
    )
    record = next(line.record for line in read_log(log) if line.record)
    assert code == 1
    assert out.startswith("REJECTED") and reason in out and "✗ boundary" in out
    assert f"record {record['id']}" in out
    assert f"lingyi --config {config} --log {log} appeal {record['id']} --reason" in out


def test_the_printed_appeal_command_files_the_appeal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --json: the real record id (not null) and an appeal command that works as given."""
    log = tmp_path / "l.jsonl"
    code, out, _ = run(
        capsys, "--log", str(log), "verify", "--member", "lingzhi", "--json", *MEDICAL
    )
    result = json.loads(out)
    record = next(line.record for line in read_log(log) if line.record)
    assert code == 1 and result["record_id"] == record["id"] == result["id"]
    command = shlex.split(result["appeal"])
    assert command[:5] == ["lingyi", "--log", str(log), "appeal", record["id"]]
    assert main([*command[1:-1], "the query was about history"]) == 0
    assert f"recorded against {record['id']}" in capsys.readouterr().out


def test_verify_json_from_stdin_with_context() -> None:
    """JSON in, JSON out; --context fills the ledger and council from a transcript."""
    assertion = {
        "member": "lingyi",
        "type": "communication",
        "content": "灵通说v0.16审计已经完成",
        "id": "q1",
    }
    done = lingyi(
        "--log", "/dev/null", "verify", "--stdin", "--json", "--context", "examples/council-basics.jsonl",
        stdin=json.dumps(assertion),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["id"] == "q1" and result["decision"] == "approved" and result["record_id"]


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--stdin"], "{not json", "stdin: -: Invalid JSON"),
        (["--stdin"], '{"member": "lingyi", "type": "opinion"}', 'stdin: type: "opinion" is not allowed; valid values: fact, action, communication, conclusion, answer'),
        (["--member", "lingzhi", "--tool", "search_knowledge", "--args", "{x"], None, "--args: not valid JSON"),
        (["--member", "lingzhi", "--tool", "search_knowledge", "--args", "[1]"], None, "--args: must be a JSON object"),
        (["--content", "x"], None, "give --member and --content"),
        (["--member", "lingyi", "--context", "nowhere.jsonl", "--content", "x"], None, "nowhere.jsonl: cannot read transcript"),
    ],
)  # fmt: skip
def test_verify_bad_input_is_a_clear_error(
    args: list[str], stdin: str | None, message: str
) -> None:
    """Bad input is exit 2 with one line naming what is wrong, never a traceback; with --json
    the same problem is JSON on stdout."""
    done = lingyi("--log", "/dev/null", "verify", *args, stdin=stdin or "")
    assert done.returncode == 2 and f"lingyi: error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    as_json = lingyi("--log", "/dev/null", "verify", "--json", *args, stdin=stdin or "")
    error = json.loads(as_json.stdout)
    assert error["ok"] is False and message in error["errors"][0]["message"]


# --------------------------------------------------------------------------- log verify


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
    assert report["checked"]["hash_chain"] and "edited" in report["checked"]["detects"]


@pytest.mark.parametrize("broken", [False, True], ids=["intact", "edited"])
def test_log_verify_takes_the_file_as_an_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: bool
) -> None:
    """`lingyi log verify FILE` checks FILE, whatever log the config names (the demo's hint)."""
    log = tmp_path / "other.jsonl"
    main(["--log", str(log), "replay", "examples/council-english.jsonl"])
    if broken:
        log.write_text(
            log.read_text(encoding="utf-8").replace('"approved"', '"rejected"', 1), encoding="utf-8"
        )
    capsys.readouterr()
    code, out, _ = run(capsys, "--log", str(tmp_path / "unused.jsonl"), "log", "verify", str(log))
    assert out.startswith(f"{log}: ") and code == (1 if broken else 0)
    assert ("CHAIN BROKEN" in out) is broken and ("chain OK" in out) is not broken


def test_log_verify_of_a_missing_file_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FILE that does not exist is exit 2 naming it (not an empty, intact chain)."""
    code, out, err = run(capsys, "log", "verify", str(tmp_path / "nope.jsonl"), "--json")
    assert code == 2 and "nope.jsonl: no such log file" in err
    assert json.loads(out)["errors"][0]["message"].endswith("no such log file")


# --------------------------------------------------------------------------- policy check


def test_policy_check_reports_every_problem_of_the_folder(tmp_path: Path) -> None:
    """`policy check` exits 2 and lists every problem of every file, each with file and key,
    as lines on stderr and, with --json, as a list on stdout."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    flow = folder / "lingflow.toml"
    index = flow.read_text(encoding="utf-8").count("[[checks]]")
    flow.write_text(
        flow.read_text(encoding="utf-8")
        + '\n[[checks]]\ncheck = "inference.labelled"\nstage = "boundary"\non_fail = "maybe"\n',
        encoding="utf-8",
    )
    zhi = folder / "lingzhi.toml"
    zhi.write_text(
        zhi.read_text(encoding="utf-8").replace('stage = "boundary"', 'stage = "soon"', 1),
        encoding="utf-8",
    )
    config = config_file(tmp_path, validators=folder)
    (tmp_path / "kb").mkdir()  # the config's other paths exist: only the policies are wrong
    (tmp_path / "data").mkdir()
    done = lingyi("--config", str(config), "policy", "check")
    assert done.returncode == 2 and "2 problem(s)" in done.stderr
    assert (
        f'lingflow.toml: checks[{index}].on_fail: "maybe" is not allowed; valid values: reject, fallback, warn'
        in done.stderr
    )
    assert 'lingzhi.toml: checks[0].stage: "soon" is not allowed' in done.stderr
    report = json.loads(lingyi("--config", str(config), "policy", "check", "--json").stdout)
    assert report["ok"] is False
    assert [(Path(e["file"]).name, e["key"]) for e in report["errors"]] == [
        ("lingflow.toml", f"checks[{index}].on_fail"),
        ("lingzhi.toml", "checks[0].stage"),
    ]


def test_policy_check_takes_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`policy check FOLDER` checks that folder, not the config's (like `opa check DIR`)."""
    folder = tmp_path / "mine"
    shutil.copytree(SHIPPED_POLICIES, folder)
    (folder / "extra.toml").write_text('member = "extra"\nname = "Extra"\n', encoding="utf-8")
    code, out, _ = run(capsys, "--config", str(PACKAGED), "policy", "check", str(folder), "--json")
    assert code == 0 and "extra" in json.loads(out)["members"]


def test_policy_check_passes_on_shipped_policies() -> None:
    """The shipped policies validate; --json lists members, their files and their tools."""
    done = lingyi("--config", str(PACKAGED), "policy", "check", "--json")
    assert done.returncode == 0
    zhi = json.loads(done.stdout)["members"]["lingzhi"]
    assert zhi["tools"] == ["search_knowledge"] and zhi["file"].endswith("lingzhi.toml")


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            '[paths]\nvalidatorz = "x"\n',
            "paths.validatorz: unknown key 'validatorz' (did you mean 'validators'?)",
        ),
        ('language = "fr"\n', 'language: "fr" is not allowed; valid values: zh, en'),
        ('[server]\nport = "high"\n', 'server.port: must be an integer, not "high"'),
        ('[log]\nfsync = "sometimes"\n', 'log.fsync: must be true or false, not "sometimes"'),
        ('[[server.tokens]]\nenv = "X"\n', "server.tokens[0].name: required key is missing"),
        ('[data_sources.x]\nkind = "http"\n', "data_sources.x: an http data source needs 'url'"),
        ("[data_sources.x]\n", "data_sources.x: a file data source needs 'path'"),
        ("[paths\n", "cannot read config"),
    ],
)
def test_bad_config_names_the_file_and_key(tmp_path: Path, toml: str, expected: str) -> None:
    """A wrong config is exit 2 naming the file, the key and what would be valid, in our words
    (no pydantic wording or help links)."""
    config = tmp_path / "lingyi.toml"
    config.write_text(toml, encoding="utf-8")
    done = lingyi("--config", str(config), "policy", "check")
    assert done.returncode == 2 and f"{config}: " in done.stderr and expected in done.stderr
    assert "pydantic" not in done.stderr and "Input should" not in done.stderr


def test_bad_config_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every problem of a config file is reported at once, one line and one JSON item each."""
    config = tmp_path / "lingyi.toml"
    config.write_text(
        'language = "fr"\n[server]\nport = "high"\n[judge]\non_error = "x"\n', encoding="utf-8"
    )
    code, out, err = run(capsys, "--config", str(config), "config", "show", "--json")
    assert code == 2 and err.count("lingyi: error: ") == 3
    keys = [e["key"] for e in json.loads(out)["errors"]]
    assert keys == ["language", "server.port", "judge.on_error"]


def test_server_start_stops_on_an_invalid_policy(tmp_path: Path) -> None:
    """`lingyi serve` refuses to start on a bad policy file and names the file and key."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    path = folder / "lingzhi.toml"
    path.write_text(
        path.read_text(encoding="utf-8").replace('stage = "boundary"', 'stage = "soon"', 1),
        encoding="utf-8",
    )
    config = config_file(tmp_path, validators=folder)
    done = lingyi("--config", str(config), "--log", str(tmp_path / "l.jsonl"), "serve", stdin="")
    assert done.returncode == 2 and done.stdout == ""
    assert "lingzhi.toml" in done.stderr and "checks[0].stage" in done.stderr


# --------------------------------------------------------------------------- global options


@pytest.mark.parametrize(
    "args",
    [
        ["--log", "{log}", "log", "verify", "--json"],
        ["log", "--log", "{log}", "verify", "--json"],
        ["log", "verify", "--json", "--log", "{log}"],
        ["--log", "/elsewhere.jsonl", "log", "verify", "--log", "{log}", "--json"],
    ],
    ids=["before", "between", "after", "last-wins"],
)
def test_global_options_work_before_or_after_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """--log (like --config, -v, --color) is accepted anywhere; given twice, the last wins."""
    log = tmp_path / "l.jsonl"
    main(["replay", "examples/council-basics.jsonl", "--log", str(log)])
    capsys.readouterr()
    code, out, _ = run(capsys, *(a.format(log=log) for a in args))
    assert code == 0 and json.loads(out)["records"] == 28


def test_version_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """--version; -h on any command; a usage error is exit 2, one line, and JSON with --json."""
    assert run(capsys, "--version") == (0, "lingyi 0.1.0\n", "")
    code, out, _ = run(capsys, "replay", "-h")
    assert code == 0 and "Usage: lingyi replay [OPTIONS] PATH..." in out
    code, out, err = run(capsys, "verify", "--type", "opinion", "--json")
    assert code == 2 and err.startswith("lingyi: error: Invalid value for '--type'")
    assert "Try 'lingyi verify --help'" in err and json.loads(out)["errors"][0]["kind"] == "usage"
    code, _, err = run(capsys, "teleport")
    assert code == 2 and "No such command 'teleport'" in err


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "--member", "lingyi", "--content", "x"],
        ["replay", "examples/council-basics.jsonl"],
        ["log", "verify"],
        ["log", "tail"],
        ["log", "query"],
        ["policy", "check"],
        ["stats"],
        ["report"],
        ["appeal", "list"],
        ["appeal", "X", "--reason", "r"],
        ["config", "show"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_command_reports_errors_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """With --json, a command that fails (here: a config with an unknown key) prints
    {"ok": false, "errors": [...]} on stdout, each error naming file and key; exit 2."""
    config = tmp_path / "lingyi.toml"
    config.write_text("colour = true\n", encoding="utf-8")
    code, out, err = run(capsys, "--config", str(config), *command, "--json")
    error = json.loads(out)
    assert code == 2 and error["ok"] is False and "lingyi: error:" in err
    assert error["errors"] == [
        {
            "kind": "config",
            "file": str(config),
            "key": "colour",
            "message": error["errors"][0]["message"],
        }
    ]
    assert error["errors"][0]["message"].startswith("unknown key 'colour'")


def test_a_closed_pipe_is_not_an_error() -> None:
    """`lingyi policy checks | head -1`: the reader leaving early is exit 0, no traceback."""
    done = subprocess.run(
        f"set -o pipefail; '{sys.executable}' -m lingyi policy checks | head -n 1",
        shell=True, executable="/bin/bash", capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- colour and progress


@pytest.mark.parametrize(
    ("flag", "coloured"),
    [([], False), (["--color", "never"], False), (["--color", "always"], True)],
    ids=["pipe", "never", "always"],
)
def test_colour_never_reaches_a_pipe_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str], coloured: bool
) -> None:
    """Output into a pipe or file has no escape codes; --color always puts them back."""
    code, out, _ = run(
        capsys, "--log", str(tmp_path / "l.jsonl"), *flag, "verify", "--member", "lingzhi", *MEDICAL
    )
    assert code == 1 and (ANSI in out) is coloured and "REJECTED" in out


def on_terminal(args: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``lingyi ARGS`` with stdout and stderr on a pseudo-terminal; what the terminal got."""
    import pty

    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "lingyi", *args],
        stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=ROOT,
        env={**os.environ, "COLUMNS": "120", **(env or {})},
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    child.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace")


terminal_only = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")


@terminal_only
@pytest.mark.parametrize(
    ("env", "coloured"), [({}, True), ({"NO_COLOR": "1"}, False)], ids=["tty", "NO_COLOR"]
)
def test_colour_on_a_terminal_honours_no_color(
    tmp_path: Path, env: dict[str, str], coloured: bool
) -> None:
    """On a terminal the verdict is coloured, unless $NO_COLOR is set (https://no-color.org)."""
    shown = on_terminal(
        ["--log", str(tmp_path / "l.jsonl"), "verify", "--member", "lingzhi", *MEDICAL], env
    )
    assert "REJECTED" in shown and (ANSI in shown) is coloured


def big_transcript(path: Path, lines: int = 40) -> Path:
    """A transcript of a few MB that replays fast: council messages carry a large ignored field."""
    filler = "x" * 100_000
    rows = [
        json.dumps(
            {
                "event": "council_message",
                "id": f"m-{i}",
                "from": "lingflow",
                "content": "ok",
                "pad": filler,
            }
        )
        for i in range(lines)
    ]
    rows.append(
        json.dumps(
            {"event": "assertion", "id": "a", "member": "lingyi", "type": "fact", "content": "ok"}
        )
    )
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@terminal_only
def test_progress_is_drawn_on_a_terminal_for_a_large_replay(tmp_path: Path) -> None:
    """Replaying megabytes shows a progress line on a terminal, and clears it at the end."""
    transcript = big_transcript(tmp_path / "big.jsonl")
    shown = on_terminal(["--log", str(tmp_path / "l.jsonl"), "replay", str(transcript)])
    assert "replay [" in shown and "MB" in shown and "\r\x1b[K" in shown
    assert '"id": "a"' in shown


def test_progress_never_reaches_a_pipe(tmp_path: Path) -> None:
    """The same replay into pipes: stdout is the contract's lines, stderr has no bar."""
    transcript = big_transcript(tmp_path / "big.jsonl")
    done = lingyi("--log", str(tmp_path / "l.jsonl"), "replay", str(transcript))
    assert done.returncode == 0 and done.stderr == ""
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == ["a"]


# --------------------------------------------------------------------------- completion


def complete(words: str) -> list[str]:
    """What click's completion offers for the command line ``words`` (bash protocol)."""
    parts = words.split(" ")
    env = {
        **os.environ,
        "_LINGYI_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(parts) - 1),
    }
    done = subprocess.run(
        [sys.executable, "-m", "lingyi"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ("lingyi ver", ["verify"]),
        ("lingyi log ", ["query", "tail", "verify"]),
        ("lingyi verify --member ling", ["lingflow", "lingresearch", "lingyi", "lingzhi"]),
        ("lingyi verify --tool git_p", ["git_push"]),
        ("lingyi verify --type ", ["fact", "action", "communication"]),
    ],
)
def test_shell_completion_offers_commands_choices_members_and_tools(
    words: str, offered: list[str]
) -> None:
    """Tab completes commands, choices, and the member and tool names of the policies in effect."""
    assert complete(words) == offered


def test_completion_prints_the_script_for_each_shell(capsys: pytest.CaptureFixture[str]) -> None:
    """`lingyi completion bash|zsh|fish` prints click's script for that shell."""
    for shell in ("bash", "zsh", "fish"):
        code, out, _ = run(capsys, "completion", shell)
        assert code == 0 and "_LINGYI_COMPLETE" in out and f"{shell}_complete" in out


def test_a_validation_error_no_loader_translated_is_still_in_our_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last line of defence: a pydantic error escaping a command is exit 2, in our words,
    without pydantic's wording or help link."""

    @click.command(cls=Command)
    @entry
    def broken(app: App) -> int:
        Assertion.model_validate({"member": "lingyi", "type": "opinion"})
        return 0

    assert broken.main([], standalone_mode=False, obj=App()) == 2
    err = capsys.readouterr().err
    assert err.startswith('lingyi: error: Assertion: type: "opinion" is not allowed')
    assert "errors.pydantic.dev" not in err and "Input should" not in err
