"""`lingyi init DIR`: a deployment that works at once and never overwrites a file."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from lingyi.cli import main
from lingyi.config import defaults_dir, load_config


def init(capsys: pytest.CaptureFixture[str], folder: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["init", str(folder), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "path",
    [
        "config/lingyi.toml",
        "validators/_common.toml",
        "validators/lingzhi.toml",
        "kb/sample-001.md",
        "data/sample.csv",
        "transcripts/sample.jsonl",
        "repos",
    ],
)
def test_init_writes_a_complete_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    """Config, every shipped policy (the shared file too), a KB document, a CSV, policy
    tests and the repos folder are all there."""
    assert init(capsys, tmp_path / "d")[0] == 0
    assert (tmp_path / "d" / path).exists()


def test_the_config_points_inside_the_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every path of the written config resolves inside DIR, the CSV is registered, and the
    shipped policies are copied byte for byte."""
    folder = tmp_path / "d"
    init(capsys, folder)
    config = load_config(folder / "config" / "lingyi.toml")
    inside = [
        config.validators_dir,
        config.log_path,
        config.council_path,
        config.kb_dir,
        *config.repo_roots,
        *config.data_roots,
    ]
    assert all(p.is_relative_to(folder.resolve()) for p in inside)
    assert config.raw.data_sources["sample"].path == "sample.csv"
    assert (config.data_roots[0] / "sample.csv").is_file()
    for shipped in (defaults_dir() / "validators").glob("*.toml"):
        assert (config.validators_dir / shipped.name).read_bytes() == shipped.read_bytes()


def test_the_deployment_passes_its_own_policy_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From inside DIR (found by ./config/lingyi.toml), `policy check` and `replay --check
    transcripts/` pass, and the replay's records go to DIR's own log."""
    for name in ("LINGYI_CONFIG", "LINGYI_LOG", "LINGYI_COUNCIL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "d"
    init(capsys, folder)
    monkeypatch.chdir(folder)
    assert main(["policy", "check"]) == 0
    assert main(["replay", "--check", "transcripts/"]) == 0
    assert "5 of 5 expectations met" in capsys.readouterr().err
    assert (folder / "var" / "verification.jsonl").stat().st_size > 0


def test_init_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second init into the same folder is exit 2 naming what it would overwrite, and
    leaves an edited file as it is; an existing empty folder is fine."""
    folder = tmp_path / "d"
    folder.mkdir()
    assert init(capsys, folder)[0] == 0
    config = folder / "config" / "lingyi.toml"
    config.write_text('language = "en"\n', encoding="utf-8")
    code, _, err = init(capsys, folder)
    assert code == 2 and f"would overwrite {config}" in err
    assert config.read_text(encoding="utf-8") == 'language = "en"\n'


def test_init_json_lists_what_it_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: the config path and every file and folder created."""
    code, out, _ = init(capsys, tmp_path / "d", "--json")
    result = json.loads(out)
    assert code == 0 and result["config"] == str(tmp_path / "d" / "config" / "lingyi.toml")
    assert all(Path(p).exists() for p in result["created"])


def test_the_written_config_lists_every_key_with_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commented defaults become the defaults when uncommented (the template tells the truth)."""
    init(capsys, tmp_path / "d")
    text = (tmp_path / "d" / "config" / "lingyi.toml").read_text(encoding="utf-8")
    assert "# fsync = false" in text and "# port = 8765" in text and "# [[server.tokens]]" in text
    defaults = "\n".join(
        line.removeprefix("# ")
        for line in text.splitlines()
        if line.startswith(("# port", "# host", "# model"))
    )
    assert tomllib.loads(defaults) == {
        "host": "127.0.0.1",
        "port": 8765,
        "model": "claude-haiku-4-5",
    }
