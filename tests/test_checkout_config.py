"""The checkout's own config/lingyi.toml works in a fresh clone, before anything was run.

A clone holds only what git tracks: no log, no council record, none of the folders a first run
creates. The copy below is exactly that (the tracked files of the folders the config names), so
a config that points at an untracked folder fails here, as it would for a newcomer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lingyi.cli import main
from tests.conftest import ROOT

# What config/lingyi.toml names, relative to the checkout (validators is a link into the package).
CONFIG_REACHES = ("config", "validators", "var", "src/lingyi/defaults")


def tracked_files(root: Path) -> list[str]:
    """The files git tracks under the folders the checkout's config reaches."""
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout: there is no clone to copy")
    listing = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--", *CONFIG_REACHES],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listing.split("\0") if name]


def fresh_clone(root: Path, into: Path) -> Path:
    """Copy what a clone of ``root`` would hold of the config's folders into ``into``."""
    for name in tracked_files(root):
        source, target = root / name, into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():  # a tracked file deleted in the work tree is not copied
            shutil.copy2(source, target)
    return into


def test_the_checkout_config_passes_policy_check_in_a_fresh_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lingyi policy check` with the checkout's config, in a copy holding only tracked files,
    finds every path it names (the repo root included) and the shipped members."""
    for variable in ("LINGYI_CONFIG", "LINGYI_LOG", "LINGYI_COUNCIL"):
        monkeypatch.delenv(variable, raising=False)
    clone = fresh_clone(ROOT, tmp_path / "clone")
    monkeypatch.chdir(clone)
    code = main(["--config", str(clone / "config" / "lingyi.toml"), "policy", "check", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report.get("errors", []) == [] and code == 0, report
    assert report["ok"] is True
    assert set(report["members"]) == {"lingflow", "lingresearch", "lingyi", "lingzhi"}
