"""Who may call over HTTP fails closed (issue 24, items 4 and 5).

A configured bearer token whose environment variable is not set, a token shorter than 32
characters and a second token of the same name are refused at start with the variable or key
named (exit 2), and ``config show`` and ``policy check`` say so: ``serve --http`` never serves
members unauthenticated because a token failed to load. A member name in a token's or an
upstream's ``members`` that no policy knows is a load error naming the file and key, with the
closest member. The real ``lingyi serve --http`` runs in a subprocess on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lingyi.cli import main
from lingyi.config import load_config
from lingyi.errors import ConfigError
from lingyi.server import GuardApp
from tests.test_server import deploy
from tests.test_server_http import free_port

LONG = "0123456789abcdef0123456789abcdef"  # 32 characters: the shortest token accepted
FLOW_ENV = "LINGYI_TEST_UNSET_FLOW_TOKEN"


def _token(
    name: str, *, env: str | None = None, token: str | None = None, members: str = ""
) -> str:
    source = f'env = "{env}"' if env else f'token = "{token}"'
    listed = f"\nmembers = [{members}]" if members else ""
    return f'\n[[server.tokens]]\nname = "{name}"\n{source}{listed}\n'


def _serve(config: Path, timeout_s: float = 60.0) -> tuple[int | None, str]:
    """Start the real ``lingyi serve --http``: its exit code (None: it started serving) and
    what it wrote to stderr by then."""
    env = {k: v for k, v in os.environ.items() if k != FLOW_ENV} | {"LINGYI_DAEMON": "0"}
    cmd = [sys.executable, "-m", "lingyi", "--config", str(config), "serve", "--http"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(free_port())],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    deadline, seen = time.monotonic() + timeout_s, ""
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return proc.returncode, seen + proc.stderr.read()
            line = proc.stderr.readline()
            seen += line
            if "tokens:" in line:
                return None, seen
        return None, seen
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_token_whose_variable_is_not_set_stops_the_start(tmp_path: Path, lang: str) -> None:
    """With the token's environment variable not exported, serve --http exits 2 naming the
    variable and the token, instead of serving every member with no authentication."""
    dep = deploy(tmp_path / "d")
    text = dep.config_path.read_text(encoding="utf-8").replace(
        'language = "zh"', f'language = "{lang}"', 1
    )
    dep.config_path.write_text(text + _token("flow", env=FLOW_ENV, members='"lingflow"'))
    code, err = _serve(dep.config_path)
    assert code == 2, err
    assert FLOW_ENV in err and "flow" in err and "server.tokens[0].env" in err


def test_with_no_token_configured_the_start_line_says_it_is_unauthenticated(
    tmp_path: Path,
) -> None:
    """No [[server.tokens]] at all: loopback only, as documented, and the start line says
    that every member is served without authentication."""
    dep = deploy(tmp_path / "d")
    code, err = _serve(dep.config_path)
    assert code is None, err
    assert "tokens: none" in err and "no authentication" in err and "loopback only" in err


@pytest.mark.parametrize(
    ("tokens", "key", "words"),
    [
        (_token("desk", token="tok-1"), "server.tokens[0].token", "at least 32"),
        (_token("desk", token=LONG[:31]), "server.tokens[0].token", "at least 32"),
        (_token("desk", token=LONG) + _token("desk", token=LONG + "x"), "server.tokens[1].name",
         "'desk' is used twice"),
        ('\n[[server.tokens]]\nname = "desk"\n', "server.tokens[0]", "set env or token"),
    ],
)  # fmt: skip
def test_short_duplicate_or_empty_tokens_are_config_errors(
    tmp_path: Path, tokens: str, key: str, words: str
) -> None:
    """A token under 32 characters, a second token of one name, a token with neither env nor
    token: the config does not load, the error names the key (and never the value)."""
    dep = deploy(tmp_path / "d", tokens)
    with pytest.raises(ConfigError) as caught:
        load_config(dep.config_path)
    assert key in str(caught.value) and words in str(caught.value)
    assert "tok-1" not in str(caught.value) and LONG[:31] not in str(caught.value)


def test_a_token_variable_holding_a_short_value_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The variable is set, but to fewer than 32 characters: refused at start, naming it."""
    from lingyi.server import http_app

    monkeypatch.setenv(FLOW_ENV, "short")
    dep = deploy(tmp_path / "d", _token("flow", env=FLOW_ENV))
    app = GuardApp(dep.config())
    try:
        with pytest.raises(ConfigError, match=rf"{FLOW_ENV}.*at least 32"):
            http_app(app, "127.0.0.1", free_port())
    finally:
        app.close()


def test_config_show_and_policy_check_report_a_missing_token_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """config show marks the token unusable, naming the variable; policy check fails (2)."""
    monkeypatch.delenv(FLOW_ENV, raising=False)
    dep = deploy(tmp_path / "d", _token("flow", env=FLOW_ENV))
    assert main(["--config", str(dep.config_path), "config", "show"]) == 0
    out = capsys.readouterr().out
    assert "UNUSABLE" in out and FLOW_ENV in out
    assert main(["--config", str(dep.config_path), "config", "show", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert FLOW_ENV in view["server"]["token_problems"][0]["message"]
    assert main(["--config", str(dep.config_path), "policy", "check"]) == 2
    err = capsys.readouterr().err
    assert FLOW_ENV in err and "server.tokens[0].env" in err


MEMBERS = [
    # (config text, the key, the closest member named)
    (_token("flow", token=LONG, members='"lingflwo"'), "server.tokens[0].members[0]", "lingflow"),
    (_token("desk", token=LONG, members='"lingyi", "LingZhii"'), "server.tokens[0].members[1]",
     "LingZhi"),
    ('\n[[upstreams]]\nname = "git"\ncommand = ["python", "-m", "mcp_server_git"]\n'
     'members = ["lingflw"]\n', "upstreams[0].members[0]", "lingflow"),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "key", "close"), MEMBERS)
def test_unknown_members_of_a_token_or_an_upstream_are_load_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, key: str, close: str
) -> None:
    """A member no policy knows, in a token's or an upstream's members, stops the server
    (file, key, closest member) before any upstream starts, and fails policy check."""
    dep = deploy(tmp_path / "d", extra)
    with pytest.raises(ConfigError) as caught:
        GuardApp(dep.config()).close()
    message = str(caught.value)
    assert str(dep.config_path.resolve()) in message and key in message and repr(close) in message
    assert main(["--config", str(dep.config_path), "policy", "check"]) == 2
    assert key in capsys.readouterr().err
