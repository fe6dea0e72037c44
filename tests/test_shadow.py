"""Shadow mode: a policy (or one check) runs, is logged with the decision it would have made,
and changes nothing; ``lingyi stats`` reads what enforcing it would do.

The key property (issue 14): the same traffic run with a policy in shadow and with it
enforcing gives "would have" figures in the shadow run equal to the enforcing run's
decisions, while the shadow run's real decisions equal a run without that policy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lingyi.cli import main
from lingyi.errors import PolicyError
from lingyi.log import read_log
from lingyi.policy import load_policies
from lingyi.policy._store import weakenings
from tests.conftest import ROOT, SHIPPED_POLICIES

# zh and en: assertions with and without tool calls, council relays, answers, conclusions.
TRAFFIC = [
    ROOT / "examples" / "council-chinese.jsonl",
    ROOT / "examples" / "council-english.jsonl",
    ROOT / "examples" / "answers" / "answers-zh.jsonl",
    ROOT / "examples" / "answers" / "answers-en.jsonl",
    ROOT / "examples" / "incident-zh.jsonl",
    ROOT / "examples" / "incident-en.jsonl",
]
# The stricter policy being rolled out: short texts only, and no tool call to git_push.
ROLLOUT = """description = "stricter rules on the way in"
{mode}
[[checks]]
check = "pre.content"
stage = "pre_check"
on_fail = "reject"
params = {{ max_length = 60 }}
"""
DECISION_FIGURES = ("total", "approved", "rejected", "fallback", "blocked")
CODE_FIGURES = ("failed", "approved", "rejected", "fallback", "blocked")


def policy_folder(tmp_path: Path, name: str, extra: dict[str, str]) -> Path:
    """The shipped policies with ``extra`` files (name → text) written beside them."""
    folder = tmp_path / name
    shutil.copytree(SHIPPED_POLICIES, folder)
    for file, text in extra.items():
        (folder / file).write_text(text, encoding="utf-8")
    return folder


def config_for(
    tmp_path: Path, name: str, validators: Path, lang: str = "zh", allow: str = ""
) -> Path:
    """``allow``: the check a shadow weakens, named in [policies] allow_weakening (a start
    refuses an unnamed one, tests/test_security_weakening.py)."""
    path = tmp_path / f"{name}.toml"
    allowed = f'[policies]\nallow_weakening = ["{allow}"]\n' if allow else ""
    path.write_text(
        f'language = "{lang}"\n[paths]\nvalidators = "{validators.as_posix()}"\n'
        f'knowledge_base = "{(ROOT / "src" / "lingyi" / "defaults" / "kb").as_posix()}"\n'
        f'council = "{(tmp_path / f"{name}-council.jsonl").as_posix()}"\n' + allowed,
        encoding="utf-8",
    )
    return path


def run(config: Path, log: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    main(["--config", str(config), "--log", str(log), *args])
    return capsys.readouterr().out


def decisions(figures: dict[str, Any]) -> dict[str, Any]:
    """The decision figures of the stats JSON: totals, per member, type and tool."""
    pick = {k: figures["totals"][k] for k in DECISION_FIGURES}
    groups = {
        g: {n: {k: c[k] for k in DECISION_FIGURES} for n, c in figures[g].items()}
        for g in ("by_member", "by_type", "by_tool")
    }
    return {"totals": pick, **groups}


def code_figures(by_code: dict[str, Any]) -> dict[str, Any]:
    return {c: {k: v[k] for k in CODE_FIGURES} for c, v in by_code.items() if v["failed"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The traffic replayed without the rollout policy, with it enforcing, and in shadow."""
    tmp = tmp_path_factory.mktemp("shadow")
    folders = {
        "without": SHIPPED_POLICIES,
        "enforcing": policy_folder(tmp, "enforcing", {"_rollout.toml": ROLLOUT.format(mode="")}),
        "shadow": policy_folder(
            tmp, "shadow", {"_rollout.toml": ROLLOUT.format(mode='mode = "shadow"')}
        ),
    }
    cli = _Capture()
    found: dict[str, Any] = {}
    for name, folder in folders.items():
        config, log = config_for(tmp, name, folder), tmp / f"{name}.jsonl"
        found[name] = {"rows": cli.replay(config, log), "config": config, "log": log}
        found[name]["stats"] = cli.stats(config, log)
        found[name]["full"] = cli.stats(config, log, "--full")
        found[name]["lingzhi"] = cli.stats(config, log, "--member", "lingzhi")
        found[name]["human"] = cli.run(config, log, "stats", "--days", "7")
    return found


class _Capture:
    """The CLI's standard output in a module-scoped fixture (capsys is per test)."""

    def run(self, config: Path, log: Path, *args: str) -> str:
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["--config", str(config), "--log", str(log), *args])
        return out.getvalue()

    def replay(self, config: Path, log: Path) -> list[dict[str, Any]]:
        out = self.run(config, log, "replay", *map(str, TRAFFIC))
        return [json.loads(line) for line in out.splitlines()]

    def stats(self, config: Path, log: Path, *flags: str) -> Any:
        return json.loads(self.run(config, log, "stats", "--days", "7", "--json", *flags))


def test_the_rollout_changes_decisions_when_enforced(runs: dict[str, Any]) -> None:
    """The test means something: enforcing the rollout policy rejects what passed without it."""
    without, enforcing = runs["without"]["stats"], runs["enforcing"]["stats"]
    assert enforcing["totals"]["total"] == without["totals"]["total"] > 40
    assert enforcing["totals"]["rejected"] > without["totals"]["rejected"]
    assert enforcing["totals"]["approved"] < without["totals"]["approved"]


def test_shadow_would_have_figures_equal_the_enforcing_decisions(runs: dict[str, Any]) -> None:
    """In stats --json (rollup, --full and --member alike), the shadow run's "would have"
    decisions and per-check figures are the enforcing run's real ones."""
    enforcing = runs["enforcing"]["stats"]
    for key in ("stats", "full"):
        shadow = runs["shadow"][key]["shadow"]
        assert {k: shadow["would_have"][k] for k in DECISION_FIGURES} == {
            k: enforcing["totals"][k] for k in DECISION_FIGURES
        }
        assert shadow["by_code"] == code_figures(enforcing["by_code"])
        assert shadow["verifications"] == enforcing["totals"]["total"]  # one shared file: all
    assert runs["shadow"]["stats"]["shadow"] == runs["shadow"]["full"]["shadow"]
    member, enforced = runs["shadow"]["lingzhi"]["shadow"], runs["enforcing"]["lingzhi"]
    assert member["would_have"] == enforced["totals"]  # --member: the member's own figures
    assert member["by_code"] == code_figures(enforced["by_code"])


def test_shadow_real_decisions_equal_a_run_without_the_policy(runs: dict[str, Any]) -> None:
    """The call proceeds on the enforced decision: the shadow run decides, per member, type
    and tool, exactly as a run without the rollout policy."""
    assert decisions(runs["shadow"]["stats"]) == decisions(runs["without"]["stats"])
    changed = runs["shadow"]["stats"]["shadow"]["changed"]
    assert changed and all(k.endswith("→rejected") for k in changed)
    # Already rejected by another check, a shadow failure changes nothing: codes count both.
    assert runs["shadow"]["stats"]["shadow"]["codes"]["pre.content"] >= sum(changed.values())


def test_replay_shows_the_shadow_decision_line_by_line(runs: dict[str, Any]) -> None:
    """Each replay line keeps the decision of the run without the policy and carries, under
    ``shadow``, the decision of the enforcing run (zh and en, answers and conclusions too)."""
    shadow, without, enforcing = (runs[k]["rows"] for k in ("shadow", "without", "enforcing"))
    assert len(shadow) == len(without) == len(enforcing)
    for row, plain, enforced in zip(shadow, without, enforcing, strict=True):
        assert row["id"] == plain["id"] == enforced["id"]
        assert row["decision"] == plain["decision"], row["id"]
        assert row["shadow"]["decision"] == enforced["decision"], row["id"]
        assert "shadow" not in plain and "shadow" not in enforced
        if row["shadow"]["decision"] != row["decision"]:
            assert row["shadow"]["codes"] == ["pre.content"] and row["shadow"]["reason"]


def test_the_log_marks_shadow_checks_and_stats_show_would_have(runs: dict[str, Any]) -> None:
    """Records carry ``shadow`` (decision, codes, reason) and the check entry its enforcing
    on_fail; the human stats have a shadow section only when something ran in shadow."""
    records = [line.record for line in read_log(runs["shadow"]["log"]) if line.record]
    marked = [c for r in records for c in r["checks"] if "shadow" in c]
    assert marked and {(c["on_fail"], c["shadow"]) for c in marked} == {("warn", "reject")}
    assert all(set(r["shadow"]) == {"decision", "codes", "reason"} for r in records)
    assert "Would have: approved" in runs["shadow"]["human"]
    assert "pre.content" in runs["shadow"]["human"].split("Shadow mode")[1]
    assert "Shadow mode" not in runs["enforcing"]["human"]
    plain = runs["enforcing"]["stats"]["shadow"]
    assert plain["verifications"] == 0 and plain["changed"] == {} and plain["codes"] == {}


# --- one check in shadow -------------------------------------------------------------------


def shadow_entry(folder: Path, file: str, check: str) -> None:
    """Put the entry of ``check`` in ``file`` in shadow (a line after its ``check =``)."""
    path = folder / file
    text = path.read_text(encoding="utf-8")
    marker = f'check = "{check}"\n'
    assert marker in text
    path.write_text(text.replace(marker, marker + 'mode = "shadow"\n', 1), encoding="utf-8")


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_one_check_in_shadow_lets_its_failures_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lang: str
) -> None:
    """inference.labelled in shadow: unlabelled forecasts are approved (the call proceeds),
    logged as "would have" fallback, exactly where the shipped policy gives fallback."""
    folder = policy_folder(tmp_path, "one", {})
    shadow_entry(folder, "_common.toml", "inference.labelled")
    traffic = TRAFFIC[0] if lang == "zh" else TRAFFIC[1]
    rows = {}
    for name, policies in (("shipped", SHIPPED_POLICIES), ("one", folder)):
        config = config_for(tmp_path, name, policies, lang, allow="inference.labelled")
        out = run(config, tmp_path / f"{name}.jsonl", capsys, "replay", str(traffic))
        rows[name] = [json.loads(line) for line in out.splitlines()]
    moved = 0
    for plain, row in zip(rows["shipped"], rows["one"], strict=True):
        assert row["shadow"]["decision"] == plain["decision"], row["id"]
        if plain["decision"] == "fallback" and row["decision"] != "fallback":
            moved += 1
            assert row["shadow"]["codes"] == ["inference.labelled"]
            assert row["decision"] == "approved" and row["fallback"] is None
    assert moved >= 1


# --- tool calls through the server: built-in tools take the same path as upstream ones ------


def test_a_tool_call_in_shadow_runs_and_logs_what_would_have_been(tmp_path: Path) -> None:
    """A check in shadow that fails a search (a zero-width space hidden in the query): the
    tool still runs, and the record says it would have been rejected."""
    from tests.test_server import deploy, with_client

    folder = policy_folder(tmp_path, "tools", {})
    text = (folder / "lingzhi.toml").read_text(encoding="utf-8")
    rollout = '\n[[checks]]\ncheck = "pre.obfuscation"\nstage = "pre_check"\nmode = "shadow"\n'
    rollout += 'tools = ["search_knowledge"]\nparams = { fields = ["query"] }\n'
    (folder / "lingzhi.toml").write_text(text + rollout, encoding="utf-8")
    dep = deploy(tmp_path / "deploy")
    shipped = str(SHIPPED_POLICIES)
    dep.config_path.write_text(
        dep.config_path.read_text(encoding="utf-8").replace(shipped, folder.as_posix()),
        encoding="utf-8",
    )
    seen: dict[str, Any] = {}

    async def body(client: Any) -> None:
        seen["result"] = await client.call_tool("search_knowledge", {"query": "qi\u200bgong"})

    with_client(dep, body)
    assert not seen["result"].is_error
    assert seen["result"].structured_content["verdict"]["decision"] == "approved"
    record = [line.record for line in read_log(dep.log) if line.record][-1]
    assert record["tool_call"]["name"] == "search_knowledge"
    assert record["decision"] == "approved"
    assert record["shadow"]["decision"] == "rejected"
    assert record["shadow"]["codes"] == ["pre.obfuscation"]


def test_an_upstream_tool_call_in_shadow_reaches_the_upstream(tmp_path: Path) -> None:
    """Gateway tools take the same path: a shadow check failing fake.echo lets the call reach
    the upstream (its echo comes back) and logs that it would have been rejected."""
    from tests.gateway_kit import FAKE_POLICIES, fake_upstream, git_deployment
    from tests.test_server import with_client

    rollout = '\n[[checks]]\ncheck = "pre.obfuscation"\nstage = "pre_check"\nmode = "shadow"\n'
    rollout += 'tools = ["fake.echo"]\nparams = { fields = ["text"] }\n'
    dep = git_deployment(tmp_path / "deploy", fake_upstream(timeout_s=10), FAKE_POLICIES + rollout)
    seen: dict[str, Any] = {}

    async def body(client: Any) -> None:
        for text in ("hel\u200blo world", "你好，世界"):
            seen[text] = await client.call_tool("fake.echo", {"text": text})

    with_client(dep, body)
    assert all(not r.is_error for r in seen.values())
    assert "world" in str(seen["hel\u200blo world"].structured_content)
    records = [line.record for line in read_log(dep.log) if line.record]
    echoes = [r for r in records if (r.get("tool_call") or {}).get("name") == "fake.echo"]
    assert [r["decision"] for r in echoes] == ["approved", "approved"]
    assert [r["shadow"]["decision"] for r in echoes] == ["rejected", "approved"]
    assert (
        echoes[0]["shadow"]["codes"] == ["pre.obfuscation"] and echoes[1]["shadow"]["codes"] == []
    )


LONG = {  # over the rollout's 60 characters, nothing else wrong with them
    "zh": "今天下午的例会上大家一起回顾了本周的工作安排，讨论了下周的分工，会议记录已经整理好并发给了每一位参会的成员，"
    "请大家有空的时候看一看。",
    "en": "We went through this week's plan at the afternoon meeting and shared out next week's work.",
}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_verify_shows_the_shadow_decision(
    runs: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path, lang: str
) -> None:
    """lingyi verify --json carries the shadow object; the text marks the shadow check and
    says what enforcing would have decided."""
    config, log = runs["shadow"]["config"], tmp_path / "verify.jsonl"
    args = ["verify", "--member", "lingyi", "--type", "communication", "--content", LONG[lang]]
    line = json.loads(run(config, log, capsys, *args, "--json"))
    assert line["shadow"]["codes"] == ["pre.content"] and line["shadow"]["decision"] == "rejected"
    assert line["decision"] == "approved"
    text = run(config, log, capsys, *args)
    assert "[shadow: reject]" in text and "shadow: would have been rejected (pre.content)" in text


# --- the policy files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "text", "key"),
    [
        ("_rollout.toml", ROLLOUT.format(mode='mode = "dry"'), "mode"),
        ("_rollout.toml", ROLLOUT.format(mode="") + 'mode = "Shadow"\n', "checks[0].mode"),
        ("lingyi.toml", None, "mode"),
    ],
)
def test_an_unknown_mode_is_a_load_error_naming_file_and_key(
    tmp_path: Path, file: str, text: str | None, key: str
) -> None:
    """``mode`` is "enforce" or "shadow", on a file or an entry; anything else names the
    file, the key and the valid values."""
    folder = policy_folder(tmp_path, "bad", {})
    if text is None:
        text = 'mode = "影子"\n' + (folder / file).read_text(encoding="utf-8")
    (folder / file).write_text(text, encoding="utf-8")
    with pytest.raises(PolicyError) as caught:
        load_policies(folder)
    assert Path(caught.value.path).name == file and caught.value.key == key
    assert "enforce" in caught.value.message and "shadow" in caught.value.message


def test_entries_inherit_their_files_mode_and_may_override_it(tmp_path: Path) -> None:
    """A file in shadow puts its own entries in shadow, not the shared ones; an entry's own
    ``mode = "enforce"`` keeps it enforcing; the other members are untouched."""
    folder = policy_folder(tmp_path, "modes", {})
    path = folder / "lingzhi.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text('mode = "shadow"\n' + text, encoding="utf-8")
    shadowed = load_policies(folder)
    own = shadowed.members["lingzhi"].checks
    shared = {e.check for e in load_policies(SHIPPED_POLICIES).members["lingyi"].checks}
    assert all(e.shadow for e in own if e.check not in shared)
    assert not any(e.shadow for e in shadowed.members["lingyi"].checks)
    shadow_entry(folder, "lingzhi.toml", "domain.scope")  # explicit shadow: same
    text = path.read_text(encoding="utf-8").replace(
        'check = "domain.scope"\nmode = "shadow"\n', 'check = "domain.scope"\nmode = "enforce"\n'
    )
    path.write_text(text, encoding="utf-8")
    scope = [
        e for e in load_policies(folder).members["lingzhi"].checks if e.check == "domain.scope"
    ]
    assert scope and not any(e.shadow for e in scope)


# 灵知's file in shadow: its medical boundary (its own entry replacing the shared one) still
# blocks medical advice, zh and en, and its look-alikes still pass; 灵知's own checks of
# other names (domain.scope on a search outside the nine domains) only say what they would do.
FACT = ("--type", "fact", "--content")
SEARCH = ("--tool", "search_knowledge", "--args")
SHADOWED_LINGZHI = [
    ((*FACT, "失眠吃什么药效果最好？"), "rejected", None),
    ((*FACT, "What should I take for my insomnia, and how much?"), "rejected", None),
    ((*SEARCH, '{"query": "头痛吃什么药"}'), "rejected", "rejected"),  # both
    ((*FACT, "治大国若烹小鲜出自《道德经》第六十章。"), "approved", None),
    ((*FACT, "The Laozi compares governing a state to cooking a small fish."), "approved", None),
    ((*SEARCH, '{"query": "比特币明天会涨吗"}'), "approved", "rejected"),
    ((*SEARCH, '{"query": "best stock to buy tomorrow"}'), "approved", "rejected"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "decision", "would"), SHADOWED_LINGZHI)
def test_a_member_file_in_shadow_keeps_its_replacement_of_a_shared_check_enforcing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    decision: str,
    would: str | None,
) -> None:
    """A member file put in shadow does not put its replacement of a shared check in shadow
    (灵知 disables the shared medical boundary and runs its own): medical advice is still
    rejected, the classics still pass; its other own checks are in shadow and only say what
    they would have decided. Only an entry's own ``mode = "shadow"`` shadows the boundary."""
    folder = policy_folder(tmp_path, "lingzhi-shadow", {})
    path = folder / "lingzhi.toml"
    path.write_text('mode = "shadow"\n' + path.read_text(encoding="utf-8"), encoding="utf-8")
    entries = load_policies(folder).members["lingzhi"].checks
    assert [e.shadow for e in entries if e.check == "boundary.medical"] == [False]
    config = config_for(tmp_path, "lingzhi-shadow", folder, allow="domain.scope")
    verify = ["verify", "--member", "lingzhi", *args, "--json"]
    line = json.loads(run(config, tmp_path / "log.jsonl", capsys, *verify))
    assert line["decision"] == decision, line["reason"]
    assert (line.get("shadow") or {}).get("decision") == would


def test_a_reload_that_puts_a_shared_check_in_shadow_is_a_weakening(tmp_path: Path) -> None:
    """While the server runs, moving a shared check to shadow softens it like on_fail = warn:
    the reload is refused, naming the file (a restart applies it on purpose)."""
    folder = policy_folder(tmp_path, "reload", {})
    shadow_entry(folder, "_common.toml", "communication.on_record")
    found = weakenings(load_policies(SHIPPED_POLICIES), load_policies(folder))
    assert found and all("soften the shared check 'communication.on_record'" in e.message
                         for e in found)  # fmt: skip
    assert all(Path(e.path).name == "_common.toml" for e in found)
