"""Policy files: validated on load with file and key named, aliases, reload on change."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from lingyi.council import MemoryCouncil
from lingyi.errors import PolicyError
from lingyi.layer import ConstraintLayer
from lingyi.ledger import Ledger
from lingyi.models import Assertion
from lingyi.policy import PolicyStore, load_policies
from tests.conftest import SHIPPED_POLICIES


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "validators"
    shutil.copytree(SHIPPED_POLICIES, target)
    return target


def test_shipped_policies_load_with_the_four_members() -> None:
    """The shipped validators define lingyi, lingzhi, lingflow and lingresearch."""
    policies = load_policies(SHIPPED_POLICIES)
    assert set(policies.members) == {"lingyi", "lingzhi", "lingflow", "lingresearch"}
    assert policies.tool_owner("git_push").id == "lingflow"  # type: ignore[union-attr]


@pytest.mark.parametrize("alias", ["lingyan", "LingYan", "灵研", "LingResearch", "lingresearch"])
def test_lingyan_is_an_alias_of_lingresearch(alias: str) -> None:
    """Every name of 灵研 resolves to the same policy."""
    member = load_policies(SHIPPED_POLICIES).resolve(alias)
    assert member is not None and member.id == "lingresearch"


BAD = [
    ('on_fail = "reject"', 'on_fail = "explode"', "checks[0].on_fail"),
    ('check = "boundary.medical"', 'check = "boundary.nonsense"', "checks[0].check"),
    ('fields = ["query"]', 'fieldz = ["query"]', "checks[1].params.fieldz"),
    ('zh = "请咨询执业医师', 'fr = "请咨询执业医师', "checks[0].params.referral"),
    ('stage = "boundary"', 'stage = "later"', "checks[0].stage"),
    ('member = "lingzhi"', 'member = "lingzhi"\ncolour = "blue"', "colour"),
    ("[tools.search_knowledge.args.query]", "[tools.search_knowledge.args.query", "not valid TOML"),
    ('type = "string"', 'type = "strin"', "tools.search_knowledge.args.query.type"),
]


@pytest.mark.parametrize(("old", "new", "key"), BAD)
def test_invalid_policy_names_file_and_key(folder: Path, old: str, new: str, key: str) -> None:
    """A bad policy stops loading with an error naming the file and the offending key."""
    path = folder / "lingzhi.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        load_policies(folder)
    assert "lingzhi.toml" in str(info.value)
    assert key in str(info.value)


def test_alias_clash_is_an_error(folder: Path) -> None:
    """Two members cannot share a name: a claim about 灵通 must name exactly one member."""
    path = folder / "lingyi.toml"
    path.write_text(
        path.read_text(encoding="utf-8").replace('"LingYi"', '"LingFlow"'), encoding="utf-8"
    )
    with pytest.raises(PolicyError, match="aliases"):
        load_policies(folder)


def test_disable_must_name_a_shared_check(folder: Path) -> None:
    """`disable` naming an unknown shared check is an error, not a silent no-op."""
    path = folder / "lingyi.toml"
    path.write_text(
        path.read_text(encoding="utf-8") + '\ndisable = ["inference.labeled"]\n', encoding="utf-8"
    )
    with pytest.raises(PolicyError, match=r"disable\[0\]"):
        load_policies(folder)


def test_a_member_is_added_by_adding_a_file(folder: Path) -> None:
    """A new member needs a policy file, not engine code."""
    (folder / "lingxi.toml").write_text('member = "lingxi"\nname = "灵犀"\n', encoding="utf-8")
    member = load_policies(folder).resolve("灵犀")
    assert member is not None and member.id == "lingxi"
    assert "communication.on_record" in [c.check for c in member.checks]


def test_store_reloads_on_change_and_keeps_last_good_on_error(folder: Path) -> None:
    """Edits apply without a restart; a broken edit keeps the last good policies."""
    store = PolicyStore(folder, check_interval_s=0)
    first = store.current().version
    (folder / "lingxi.toml").write_text('member = "lingxi"\nname = "灵犀"\n', encoding="utf-8")
    time.sleep(0.01)
    assert "lingxi" in store.current().members
    assert store.current().version != first
    (folder / "lingxi.toml").write_text('member = "lingxi"\nnme = "x"\n', encoding="utf-8")
    assert "lingxi" in store.current().members  # the broken file did not take effect


LABELLED = 'check = "inference.labelled"\nstage = "fact_verification"\non_fail = "fallback"\n'
FORECAST_EN, FORECAST_ZH = "It will ship next Monday.", "灵通下周一会上线新版本"


@pytest.mark.parametrize(
    ("prefix", "content", "relabelled"),
    [
        # one of the labels: the relabelled text passes; the other language keeps its default
        ('{ en = "Prediction: " }', FORECAST_EN, "Prediction: " + FORECAST_EN),
        ('{ en = "Prediction: " }', FORECAST_ZH, "【推演】" + FORECAST_ZH),
        ('{ zh = "【推断】" }', FORECAST_ZH, "【推断】" + FORECAST_ZH),
        ('{ en = "Guess: " }', FORECAST_EN, None),  # relabelled text would fail again
        ('{ fr = "Inférence : " }', FORECAST_EN, None),  # no such language
    ],
)
def test_inference_prefix_is_a_label_in_a_known_language(
    folder: Path, prefix: str, content: str, relabelled: str | None
) -> None:
    """A policy may choose the label a fallback adds, but only one the check recognises."""
    path = folder / "_common.toml"
    text = path.read_text(encoding="utf-8")
    assert LABELLED in text
    text = text.replace(LABELLED, f"{LABELLED}params = {{ prefix = {prefix} }}\n")
    path.write_text(text, encoding="utf-8")
    if relabelled is None:
        with pytest.raises(PolicyError) as info:
            load_policies(folder)
        assert "_common.toml" in str(info.value) and "checks[3].params.prefix" in str(info.value)
        return
    layer = ConstraintLayer(load_policies(folder), MemoryCouncil())
    fact = Assertion(member="lingresearch", type="fact", content=content)
    result = layer.verify(fact, Ledger())
    assert result.fallback is not None and result.fallback.content == relabelled
