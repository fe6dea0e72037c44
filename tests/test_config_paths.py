"""``lingyi policy check`` checks every path the config names, before a tool needs it.

The attack (an operator's slip, really): a missing knowledge-base folder only showed when a
check reached it, and a missing CSV was approved by the guard and then failed in the backend.
Now each path is checked for its use (a folder to read, a file inside the data roots, a file to
append to), and each problem names the config file and the key. Real folders and files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lingyi.config import load_config
from lingyi.config_paths import path_problems
from tests.conftest import SHIPPED_POLICIES
from tests.test_cli import run


def deployment(tmp_path: Path, extra: str = "") -> Path:
    """A config whose every path exists: validators, kb, data with one CSV, a repo root."""
    for folder in ("kb", "data", "repos", "var"):
        (tmp_path / folder).mkdir()
    (tmp_path / "data" / "runs.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    config = tmp_path / "lingyi.toml"
    config.write_text(
        f'[paths]\nvalidators = "{SHIPPED_POLICIES.as_posix()}"\nknowledge_base = "kb"\n'
        'data_roots = ["data"]\nrepo_roots = ["repos"]\nlog = "var/log.jsonl"\n'
        'council = "var/council.jsonl"\n[data_sources.runs]\npath = "runs.csv"\n' + extra,
        encoding="utf-8",
    )
    return config


BREAKS = [
    # (how the deployment is broken, the keys named, words of the first message)
    ("rm kb", ["paths.knowledge_base"], "folder not found"),
    ("rm repos", ["paths.repo_roots[0]"], "folder not found"),
    ("file data", ["paths.data_roots[0]", "data_sources.runs.path"], "is not a folder"),
    ("rm csv", ["data_sources.runs.path"], "file not found"),
    ("csv outside", ["data_sources.outside.path"], "outside the allowed roots"),
    ("file var", ["paths.log", "paths.council"], "cannot be written"),
]


def _break(tmp_path: Path, how: str) -> str:
    """Break one path of the deployment; return config text to add."""
    if how.startswith("rm "):
        target = {"kb": "kb", "repos": "repos", "csv": "data/runs.csv"}[how[3:]]
        path = tmp_path / target
        path.unlink() if path.is_file() else path.rmdir()
    elif how.startswith("file "):
        folder = tmp_path / how[5:]
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()
        folder.write_text("not a folder\n", encoding="utf-8")
    elif how == "csv outside":
        (tmp_path / "secret.csv").write_text("a\n1\n", encoding="utf-8")
        return '[data_sources.outside]\npath = "../secret.csv"\n'
    return ""


@pytest.mark.parametrize(("how", "keys", "words"), BREAKS)
def test_each_broken_path_is_a_problem_naming_config_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, keys: list[str], words: str
) -> None:
    """`policy check` exits 2 and names the config file, the key and the path; the same
    deployment with the path in place passes."""
    config = deployment(tmp_path)
    code, _, _ = run(capsys, "--config", str(config), "policy", "check")
    assert code == 0
    with config.open("a", encoding="utf-8") as out:
        out.write(_break(tmp_path, how))
    code, out, err = run(capsys, "--config", str(config), "policy", "check", "--json")
    errors = json.loads(out)["errors"]
    assert code == 2 and [(e["kind"], e["file"], e["key"]) for e in errors] == [
        ("path", str(config.resolve()), key) for key in keys
    ]
    assert words in errors[0]["message"] and f"{keys[0]}: " in err


def test_a_log_that_cannot_be_created_is_a_problem(tmp_path: Path) -> None:
    """A log (or council) whose folder cannot be written is named before the first append."""
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    config = deployment(tmp_path)
    (tmp_path / "var").chmod(0o500)
    try:
        found = {p.key: p.message for p in path_problems(load_config(config))}
    finally:
        (tmp_path / "var").chmod(0o700)
    assert set(found) == {"paths.log", "paths.council"}
    assert "no permission" in found["paths.log"]


def test_missing_parent_folders_of_the_log_are_fine(tmp_path: Path) -> None:
    """The writer creates the log's folders: a log under folders not made yet is no problem."""
    config = deployment(tmp_path)
    text = config.read_text(encoding="utf-8").replace("var/log.jsonl", "var/a/b/log.jsonl")
    config.write_text(text, encoding="utf-8")
    assert path_problems(load_config(config)) == []


def test_hidden_files_are_listed_as_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hidden or editor file beside the policies is said to be ignored, and is no problem."""
    import shutil

    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    (folder / ".lingzhi.toml").write_text('member = "lingzhi"\nname = "X"\n', encoding="utf-8")
    config = deployment(tmp_path)
    code, _, err = run(capsys, "--config", str(config), "policy", "check", str(folder))
    assert code == 0 and ".lingzhi.toml: hidden file, ignored" in err
