"""The policy parse cache: a start skips TOML parsing, and nothing else about a load changes.

What it must hold: a load from the cache gives the same policy set as a load without it (and
so the same decisions); a changed file is seen at once; a corrupt, foreign or truncated cache
file, one that others may write, or a cache folder that cannot be written falls back to
parsing the files, never to an error or another decision; ``[policies] cache = false`` writes
nothing. Real folders in tmp_path (the shipped policies), real files; the cache lives in the
test session's $XDG_CACHE_HOME (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from lingyi.errors import PolicyError
from lingyi.models import Assertion
from lingyi.policy import PolicySet, load_policies
from lingyi.policy._cache import cache_path
from lingyi.policy._load import policy_errors
from tests.conftest import SHIPPED_POLICIES

WINDOWS = os.name == "nt"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, copy)
    return copy


def shape(policies: PolicySet) -> tuple[dict[str, Any], list[Any]]:
    """Everything a load produced: the models' data and each check's parsed parameters."""
    parsed = [e.parsed for m in policies.members.values() for e in m.checks]
    return policies.model_dump(), parsed


def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, parsing any TOML fails the test: what loads came from the cache."""

    def refuse(_: str) -> Any:
        raise AssertionError("parsed a file the cache holds")

    monkeypatch.setattr(tomllib, "loads", refuse)


def test_a_second_load_parses_nothing_and_builds_the_same_policies(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first load writes the cache (private to the user); the second reads every policy
    and lexicon from it and gives the same policies, parameters and version as a load
    without the cache."""
    uncached = load_policies(folder, cache=False)
    assert not cache_path(folder).exists()
    load_policies(folder)
    path = cache_path(folder)
    assert path.is_file()
    if not WINDOWS:
        assert path.stat().st_mode & 0o077 == 0 and path.parent.stat().st_mode & 0o077 == 0
    no_parsing(monkeypatch)
    cached = load_policies(folder)
    assert shape(cached) == shape(uncached) and cached.version == uncached.version


@pytest.mark.parametrize(
    ("edit", "seen"),
    [
        (("lingzhi.toml", "aliases = [", 'aliases = ["知知", '), "知知"),
        (
            (
                "lexicons/domains.toml",
                '[groups."儒"]',
                '[groups."新"]\nzh = ["新域词"]\n\n[groups."儒"]',
            ),
            "新",
        ),
    ],
    ids=["policy file", "lexicon file"],
)
def test_a_changed_file_is_seen_at_the_next_load(
    folder: Path, edit: tuple[str, str, str], seen: str
) -> None:
    """An edited policy or lexicon is parsed again (its content is the key), so the next
    load has the change, and the one after (from the cache) too."""
    load_policies(folder)
    name, old, new = edit
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    for _ in range(2):
        policies = load_policies(folder)
        names = [*policies.aliases, *(g for lex in policies.lexicons.values() for g in lex.groups)]
        assert seen.lower() in names or seen in names


CORRUPT = [
    b"",
    b"{not json",
    b'{"key": "policies 1|another python", "entries": {}}',
    b'{"key": 1, "entries": []}',
    b"[1, 2, 3]",
    "日志".encode("utf-16"),
]


@pytest.mark.parametrize("junk", CORRUPT, ids=range(len(CORRUPT)))
def test_a_corrupt_or_foreign_cache_file_falls_back_to_parsing(folder: Path, junk: bytes) -> None:
    """A cache file that is empty, not JSON, of another format or Python, or of another
    shape is ignored: the load parses the files, gives the same policies, and rewrites it."""
    expected = shape(load_policies(folder, cache=False))
    path = cache_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(junk)
    os.chmod(path, 0o600)
    assert shape(load_policies(folder)) == expected
    assert json.loads(path.read_bytes())["entries"]  # rewritten, usable next time


def _weakened_cache(folder: Path) -> Path:
    """A cache whose entry for 灵知's real file says medical advice is merely a warning."""
    load_policies(folder)
    path = cache_path(folder)
    data = json.loads(path.read_bytes())
    for entry in data["entries"].values():
        for check in entry.get("checks", []) if entry.get("member") == "lingzhi" else []:
            check["on_fail"] = "warn"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


MEDICAL = Assertion(member="lingzhi", type="fact", content="失眠吃什么药最有效")


@pytest.mark.skipif(WINDOWS, reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_a_cache_file_others_may_write_is_never_used(folder: Path, mode: int) -> None:
    """A cache file writable by group or others could carry anyone's policy data for a
    digest they know: it is ignored, and 灵知's checks keep their on_fail from the files."""
    path = _weakened_cache(folder)
    os.chmod(path, mode)
    policies = load_policies(folder)
    zhi = policies.members["lingzhi"]
    assert {e.on_fail.value for e in zhi.checks if e.check not in policies.shared} != {"warn"}
    assert shape(policies) == shape(load_policies(folder, cache=False))


@pytest.mark.skipif(WINDOWS, reason="POSIX permission bits")
def test_a_cache_folder_others_may_write_is_never_used(folder: Path) -> None:
    """The same for the folder: whoever may write it may replace the file."""
    path = _weakened_cache(folder)
    os.chmod(path.parent, 0o777)
    try:
        assert shape(load_policies(folder)) == shape(load_policies(folder, cache=False))
    finally:
        os.chmod(path.parent, 0o700)


def test_an_unwritable_cache_folder_means_parsing_every_time(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$XDG_CACHE_HOME naming a file (no folder can be made there): loads still work."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert shape(load_policies(folder)) == shape(load_policies(folder, cache=False))
    assert not cache_path(folder).exists()


def test_problems_are_the_same_with_and_without_the_cache(folder: Path) -> None:
    """lingyi policy check's list comes from validating the data, cached or not: a broken
    file (not TOML) and a bad parameter are reported alike, the broken one never cached."""
    zhi = folder / "lingzhi.toml"
    zhi.write_text(zhi.read_text(encoding="utf-8").replace("reject", "rejekt", 1), "utf-8")
    (folder / "lingyi.toml").write_text("member = [", encoding="utf-8")
    without = [str(e) for e in policy_errors(folder, cache=False)]
    assert without and [str(e) for e in policy_errors(folder)] == without
    assert [str(e) for e in policy_errors(folder)] == without  # second run, from the cache
    with pytest.raises(PolicyError):
        load_policies(folder)


def test_cache_false_in_the_config_writes_nothing(folder: Path, tmp_path: Path) -> None:
    """``[policies] cache = false``: the guard loads its policies without the cache."""
    from lingyi.config import load_config
    from lingyi.guard import Guard
    from lingyi.ledger import Ledger

    config = tmp_path / "lingyi.toml"
    config.write_text(
        f'[paths]\nvalidators = "{folder.as_posix()}"\nlog = "{(tmp_path / "log.jsonl").as_posix()}"'
        "\n\n[policies]\ncache = false\n",
        encoding="utf-8",
    )
    guard = Guard.from_config(load_config(config), source="test")
    try:
        assert guard.check(MEDICAL, Ledger()).decision.value == "rejected"
    finally:
        guard.close()
    assert not cache_path(folder).exists()
