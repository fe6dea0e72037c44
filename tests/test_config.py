"""`lingyi config show`: what is in effect and where each value came from (the search order)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lingyi.cli import main
from lingyi.config import defaults_dir, load_config


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with no config in it and none of lingyi's variables set."""
    for name in ("LINGYI_CONFIG", "LINGYI_LOG", "LINGYI_COUNCIL"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def show(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "config", "show", "--json"]) == 0
    view: dict[str, Any] = json.loads(capsys.readouterr().out)
    return view


@pytest.mark.parametrize("found_by", ["flag", "env", "cwd", "packaged"])
def test_the_config_file_and_the_rule_that_found_it(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    found_by: str,
) -> None:
    """--config, then $LINGYI_CONFIG, then ./config/lingyi.toml, then the packaged defaults."""
    mine = write(isolated / "elsewhere" / "mine.toml", 'language = "en"\n')
    local = write(isolated / "config" / "lingyi.toml", 'language = "zh"\n')
    args: list[str] = []
    if found_by == "flag":
        args = ["--config", str(mine)]
    elif found_by == "env":
        monkeypatch.setenv("LINGYI_CONFIG", str(mine))
    elif found_by == "packaged":
        local.unlink()
    expected = {"flag": mine, "env": mine, "cwd": local, "packaged": defaults_dir() / "lingyi.toml"}
    view = show(capsys, *args)
    assert view["config"]["from"] == found_by
    assert Path(view["config"]["path"]) == expected[found_by].resolve()


@pytest.mark.parametrize("given", ["flag", "env", "file", "default"])
def test_the_log_and_where_it_came_from(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """--log, then $LINGYI_LOG, then paths.log in the file (relative to it), then its default."""
    text = '[paths]\nlog = "var/from-file.jsonl"\n' if given != "default" else ""
    config = write(isolated / "cfg" / "lingyi.toml", text)
    args = ["--config", str(config)]
    if given == "flag":
        args += ["--log", "flag.jsonl"]
    if given in ("flag", "env"):
        monkeypatch.setenv("LINGYI_LOG", str(isolated / "env.jsonl"))
    expected = {
        "flag": isolated / "flag.jsonl",  # relative to where the user is
        "env": isolated / "env.jsonl",
        "file": isolated / "cfg" / "var" / "from-file.jsonl",  # relative to the file
        "default": Path("~/.local/state/lingyi/verification.jsonl").expanduser(),
    }
    log = show(capsys, *args)["paths"]["log"]
    assert log["from"] == given and Path(log["path"]) == expected[given]


def test_every_path_in_effect_has_an_origin(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Council from $LINGYI_COUNCIL; paths the file sets come from it, the rest are defaults."""
    config = write(isolated / "lingyi.toml", '[paths]\nvalidators = "v"\nrepo_roots = ["r"]\n')
    monkeypatch.setenv("LINGYI_COUNCIL", str(isolated / "c.jsonl"))
    origins = {k: o.kind for k, o in load_config(config).origins.items()}
    assert origins == {
        "config": "flag",
        "log": "default",
        "council": "env",
        "validators": "file",
        "knowledge_base": "default",
        "repo_roots": "file",
        "data_roots": "default",
    }


def test_show_prints_each_value_with_its_origin_and_never_a_token(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The human view names each origin; token values never appear (text or JSON)."""
    shipped = defaults_dir()
    config = write(
        isolated / "lingyi.toml",
        f'[paths]\nvalidators = "{(shipped / "validators").as_posix()}"\n'
        f'knowledge_base = "{(shipped / "kb").as_posix()}"\n'
        '[[server.tokens]]\nname = "desk"\ntoken = "s3cret-value-0123456789abcdef0123"\n',
    )
    monkeypatch.setenv("LINGYI_LOG", str(isolated / "l.jsonl"))
    assert main(["--config", str(config), "config", "show"]) == 0
    text = capsys.readouterr().out
    assert f"config          {config.resolve()}  (--config)" in text
    assert f"log             {isolated / 'l.jsonl'}  ($LINGYI_LOG)" in text
    assert "policies        version " in text and "lingzhi" in text
    assert "documents       37 in the knowledge base" in text
    assert "1 token(s)" in text
    view = show(capsys, "--config", str(config))
    assert "s3cret" not in text and "s3cret" not in json.dumps(view)
    assert view["settings"]["server"]["tokens"][0]["token"] == "(set)"


def test_show_reports_broken_policies_and_skipped_documents(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy folder that does not load and a KB document that cannot be indexed are shown,
    not fatal: show is where one looks when something is wrong."""
    write(isolated / "v" / "m.toml", 'member = "m"\n')
    write(isolated / "kb" / "ok.md", "---\nid: kb:ok\ntitle: ok\ndomain: 气\n---\ntext\n")
    write(isolated / "kb" / "bad.md", "---\nid: bad id\ntitle: x\ndomain: 气\n---\ntext\n")
    config = write(isolated / "lingyi.toml", '[paths]\nvalidators = "v"\nknowledge_base = "kb"\n')
    view = show(capsys, "--config", str(config))
    assert (
        view["policies"]["ok"] is False
        and "m.toml: name: required key is missing" in view["policies"]["error"]
    )
    kb = view["knowledge_base"]
    assert kb["documents"] == 1 and [(p["file"], p["line"]) for p in kb["problems"]] == [
        ("bad.md", 2)
    ]
