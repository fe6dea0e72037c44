"""Lexicons are data beside the policies: loaded, validated and versioned with them.

A check parameter typed ``LexiconRef`` names a TOML file inside the validators folder; errors
name the file and the key, a path out of the folder is refused, and editing a lexicon changes
the policy version and is picked up by a running store like a policy edit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lingyi.checks import CheckContext, CheckParams, Outcome, fail, ok, register
from lingyi.errors import PolicyError
from lingyi.policy import LexiconRef, PolicyStore, load_policies
from lingyi.text import canonical_text


class _Words(CheckParams):
    lexicon: LexiconRef = "lexicons/words.toml"


@register("test.lexicon_words", _Words)
def _words(ctx: CheckContext, params: _Words) -> Outcome:
    """Fails when the content holds a term of the lexicon's "bad" group."""
    found = ctx.lexicon(params.lexicon).matcher.groups(ctx.canon.text).get("bad")
    return fail(f"found {found}") if found else ok("clean")


MEMBER = 'member = "tester"\nname = "Tester"\n[[checks]]\ncheck = "test.lexicon_words"\nstage = "boundary"\n'


def _folder(tmp_path: Path, lexicon: str | None, params: str = "") -> Path:
    folder = tmp_path / "validators"
    (folder / "lexicons").mkdir(parents=True, exist_ok=True)
    (folder / "tester.toml").write_text(MEMBER + params, encoding="utf-8")
    if lexicon is not None:
        (folder / "lexicons" / "words.toml").write_text(lexicon, encoding="utf-8")
    return folder


def test_a_lexicon_is_loaded_and_its_terms_match_canonical_text(tmp_path: Path) -> None:
    """Terms written in traditional script match a simplified text, and the other way round."""
    policies = load_policies(
        _folder(tmp_path, 'groups.bad = ["吃什麼藥", "cure*"]'), require_shared=False
    )
    matcher = policies.lexicon("lexicons/words.toml").matcher
    assert matcher.groups(canonical_text("失眠吃什么药")) == {"bad": ["吃什么药"]}
    assert matcher.groups(canonical_text("It CURES everything")) == {"bad": ["cures"]}


BAD = [
    (None, "", "lexicon file not found"),
    ("groups = 3", "", "groups"),
    ('groups.bad = ["x"]\nsurprise = 1', "", "surprise"),
    ('groups.bad = ["x"]', 'params = { lexicon = "../outside.toml" }', "relative path inside"),
    ('groups.bad = ["x"]', 'params = { lexicon = "/etc/words.toml" }', "relative path inside"),
]


@pytest.mark.parametrize(("lexicon", "params", "message"), BAD)
def test_a_bad_lexicon_is_a_policy_error_naming_file_and_key(
    tmp_path: Path, lexicon: str | None, params: str, message: str
) -> None:
    """Missing, malformed or escaping lexicons fail at load, not at call time."""
    with pytest.raises(PolicyError) as caught:
        load_policies(_folder(tmp_path, lexicon, params), require_shared=False)
    assert message in str(caught.value)


def test_editing_a_lexicon_changes_the_version_and_reloads(tmp_path: Path) -> None:
    """A running store picks up a lexicon edit; the policy version says it changed."""
    folder = _folder(tmp_path, 'groups.bad = ["alpha"]')
    store = PolicyStore(folder, check_interval_s=0, require_shared=False)
    before = store.current().version
    words = folder / "lexicons" / "words.toml"
    words.write_text('groups.bad = ["alpha", "beta"]', encoding="utf-8")
    os.utime(words, ns=(1, 1))  # a different mtime even on a coarse clock
    after = store.current()
    assert after.version != before
    assert after.lexicon("lexicons/words.toml").matcher.groups("beta") == {"bad": ["beta"]}
