"""Every problem of a policy folder at once, each in our own words with file, key and the
valid values (``policy_errors``), and ``load_policies`` refusing on the first of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lingyi.errors import PolicyError
from lingyi.policy import load_policies
from lingyi.policy._load import policy_errors
from tests.conftest import SHIPPED_POLICIES

MEMBER = 'member = "scribe"\nname = "Scribe"\n'


def folder_with(tmp_path: Path, files: dict[str, str]) -> Path:
    """The shipped policies plus (or with replaced) ``files``."""
    folder = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, folder)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (MEMBER + "nmae = 'x'\n", "nmae", "unknown key 'nmae' (did you mean 'name'?); valid keys here: member, name, aliases"),
        ('member = "scribe"\n', "name", "required key is missing"),
        (MEMBER + "language = 'fr'\n", "language", '"fr" is not allowed; valid values: zh, en'),
        (MEMBER + "aliases = 'Scribe'\n", "aliases", 'must be a list, not "Scribe"'),
        (MEMBER + '[[checks]]\ncheck = "pre.content"\nstage = "soon"\n', "checks[0].stage", '"soon" is not allowed; valid values: pre_check, tool_validation, boundary, fact_verification, judge'),
        (MEMBER + '[[checks]]\ncheck = "pre.content"\nstage = "pre_check"\non_fail = "maybe"\n', "checks[0].on_fail", '"maybe" is not allowed; valid values: reject, fallback, warn'),
        (MEMBER + '[[checks]]\ncheck = "inference.labeled"\nstage = "boundary"\n', "checks[0].check", "unknown check 'inference.labeled' (did you mean 'inference.labelled'?); known: "),
        (MEMBER + '[[checks]]\ncheck = "pre.content"\nstage = "pre_check"\nparams = { max_length = "long" }\n', "checks[0].params.max_length", 'must be an integer, not "long"'),
        (MEMBER + '[[checks]]\ncheck = "pre.content"\nstage = "pre_check"\nparams = { maxlen = 5 }\n', "checks[0].params.maxlen", "unknown key 'maxlen' (did you mean 'max_length'?); valid keys here: max_length"),
        (MEMBER + '[[checks]]\ncheck = "boundary.medical"\nstage = "boundary"\ntools = ["git_push"]\n', "checks[0].tools", "'git_push' is not a tool of scribe (its tools: none)"),
        (MEMBER + 'disable = ["pre.contnt"]\n', "disable[0]", "no shared check named 'pre.contnt'; shared checks: answer.attempts, answer.catalog_sources, "),
        (MEMBER + 'aliases = ["LingZhi"]\n', "aliases", "'LingZhi' also names lingzhi"),
        (MEMBER + '[tools.x.args.n]\ntype = "integr"\n', "tools.x.args.n.type", '"integr" is not allowed; valid values: string, enum, integer'),
        ("member = \n", "-", "not valid TOML"),
    ],
)  # fmt: skip
def test_each_problem_names_file_key_and_what_is_valid(
    tmp_path: Path, text: str, key: str, message: str
) -> None:
    """A mistake in a member file is reported with the file, the key as written in TOML, and
    the valid keys or values, in our words (never pydantic's)."""
    folder = folder_with(tmp_path, {"scribe.toml": text})
    errors = policy_errors(folder)
    assert [(Path(e.path).name, e.key) for e in errors] == [("scribe.toml", key)]
    assert message in errors[0].message and "Input should" not in errors[0].message


def test_every_problem_of_every_file_is_reported_at_once(tmp_path: Path) -> None:
    """Problems in two files, and several in one file (structure and a check's parameters),
    all come back from one call, in file order."""
    broken = (
        MEMBER
        + "colour = 1\n"
        + '[[checks]]\ncheck = "pre.content"\nstage = "later"\nparams = { max_length = "x" }\n'
    )
    folder = folder_with(tmp_path, {"a-scribe.toml": broken, "z-other.toml": 'member = "z"\n'})
    found = [(Path(e.path).name, e.key) for e in policy_errors(folder)]
    assert found == [
        ("a-scribe.toml", "checks[0].stage"),
        ("a-scribe.toml", "colour"),
        ("a-scribe.toml", "checks[0].params.max_length"),
        ("z-other.toml", "name"),
    ]


def test_a_valid_folder_has_no_problems(tmp_path: Path) -> None:
    """The shipped policies, and a new member beside them, load without a problem."""
    assert policy_errors(SHIPPED_POLICIES) == []
    assert policy_errors(folder_with(tmp_path, {"scribe.toml": MEMBER})) == []


@pytest.mark.parametrize(
    ("setup", "message"),
    [("missing", "policy folder not found"), ("empty", "no member policy files (*.toml) found")],
)
def test_a_folder_without_member_files_is_a_problem(
    tmp_path: Path, setup: str, message: str
) -> None:
    """A missing folder, or one with only shared files, is one problem naming the folder."""
    folder = tmp_path / "validators"
    if setup == "empty":
        folder.mkdir()
        shutil.copy(SHIPPED_POLICIES / "_common.toml", folder)
    assert [(e.path, e.message) for e in policy_errors(folder)] == [(str(folder), message)]


def test_load_policies_refuses_on_the_first_problem_and_counts_the_others(tmp_path: Path) -> None:
    """The server's loader raises the first problem and says how many more there are."""
    folder = folder_with(tmp_path, {"scribe.toml": MEMBER + "a = 1\nb = 2\n"})
    with pytest.raises(PolicyError) as raised:
        load_policies(folder)
    assert raised.value.key == "a"
    assert raised.value.message.endswith(
        "(and 1 more problem(s): lingyi policy check lists them all)"
    )


def test_a_problem_in_a_shared_file_is_reported_once(tmp_path: Path) -> None:
    """A broken check in _common.toml is one problem, not one per member that shares it."""
    common = (SHIPPED_POLICIES / "_common.toml").read_text(encoding="utf-8")
    folder = folder_with(
        tmp_path, {"_common.toml": common.replace("max_length = 4000", "max_length = -")}
    )
    errors = policy_errors(folder)
    assert len(errors) == 1 and errors[0].path.endswith("_common.toml")
