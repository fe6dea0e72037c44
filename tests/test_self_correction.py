"""Tool calls that correct themselves: every argument rejection says what would be valid.

The structured verdict (``argument_problems``) carries the field, the value given, the valid
values or format and, where one is near, the closest valid value: a data source one edit
away, a number brought into range, today for a past date, an existing repository or branch.
Each hint is pinned on both sides: a near miss gets its suggestion, a far one gets none
(never a guess). Through the real MCP server with a real repository, and the schema directly.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from lingyi.policy import Registries, ToolSpec, arg_problems, input_schema
from lingyi.policy.closest import closest
from tests.test_server import Deployment, deploy, verdict, with_client


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return deploy(tmp_path / "deploy")


def call(dep: Deployment, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    seen: list[Any] = []

    async def body(client: Client) -> None:
        seen.append(await client.call_tool(tool, args))

    with_client(dep, body)
    assert seen[0].is_error
    return verdict(seen[0])


CASES = [
    # (tool, arguments, field, closest or None: no valid value is near)
    ("access_data_source", {"source": "expriment_logs"}, "source", "experiment_logs"),
    ("access_data_source", {"source": "Experiment_Logs"}, "source", "experiment_logs"),
    ("access_data_source", {"source": "weather_2026"}, "source", None),
    ("search_knowledge", {"query": "气功", "limit": 500}, "limit", 20),
    ("search_knowledge", {"query": "气功", "limit": 0}, "limit", 1),
    ("search_knowledge", {"query": "气功", "domains": ["道", "琴"]}, "domains", None),
    ("git_branch", {"repo_path": "council-ap", "name": "x"}, "repo_path", "council-app"),
    ("git_branch", {"repo_path": "elsewhere/thing", "name": "x"}, "repo_path", None),
    ("git_push", {"repo_path": "council-app", "remote": "origin", "branch": "mian"}, "branch", "main"),
    ("git_push", {"repo_path": "council-app", "remote": "origin", "branch": "feature/none"}, "branch", None),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "field", "near"), CASES)
def test_a_rejected_argument_says_what_would_be_valid(
    dep: Deployment, tool: str, args: dict[str, Any], field: str, near: Any
) -> None:
    """The verdict names the field and value given, the valid values or bounds, and the
    closest valid value only when one is near; the recommendation says it too."""
    found = call(dep, tool, args)
    problems = [p for p in found["argument_problems"] if p["field"] == field]
    assert problems, found
    problem = problems[0]
    assert (
        "value" in problem and any(k in problem for k in ("allowed", "minimum", "maximum"))
    ) or problem["kind"] == "path"
    assert problem.get("closest") == near
    if near is not None:
        assert str(near) in (found["recommendation"] or "")


def test_the_guards_own_tools_carry_problems_too(dep: Deployment) -> None:
    """An argument of verify_assertion outside its enum: the closest type is suggested."""
    found = call(dep, "verify_assertion", {"member": "lingyi", "type": "facts", "content": "x"})
    assert found["argument_problems"][0] == {
        "field": "type",
        "kind": "enum",
        "value": "facts",
        "allowed": ["fact", "action", "communication"],
        "closest": "fact",
    }


# --- dates: not_past, max_days_ahead ----------------------------------------------------------

TODAY = date(2026, 12, 1)
MEETING = ToolSpec.model_validate(
    {"args": {"day": {"type": "date", "required": True, "not_past": True, "max_days_ahead": 30}}}
)
DATES = [
    ("2026-11-30", "date_past", "2026-12-01"),  # yesterday
    ("2025-12-01", "date_past", "2026-12-01"),
    ("2027-01-01", "date_ahead", "2026-12-31"),  # 31 days ahead
    ("2026-02-30", "date", None),  # no such day
    ("01/12/2026", "pattern", None),  # not the format
    ("2026-12-01", None, None),  # today
    ("2026-12-31", None, None),  # the last day allowed
]


@pytest.mark.parametrize(("value", "kind", "near"), DATES)
def test_dates_must_be_real_not_past_and_not_too_far_ahead(
    value: str, kind: str | None, near: str | None
) -> None:
    """A date argument: a real day, today or later, at most max_days_ahead ahead; the closest
    valid day is offered for one out of range."""
    validator = Draft202012Validator(input_schema(MEETING, Registries()))
    problems = arg_problems(validator, {"day": value}, MEETING, today=TODAY)
    assert [p.kind for p in problems] == ([kind] if kind else [])
    assert (problems[0].closest if problems else None) == near


@pytest.mark.parametrize(
    ("value", "candidates", "near"),
    [
        ("dataset_v3_label", ["dataset_v3_labels", "experiment_logs"], "dataset_v3_labels"),
        ("mian", ["main", "master"], "main"),  # a swap is one edit
        ("mast", ["main", "master"], None),  # two edits for a short name: not a guess
        ("ab", ["ac", "ad"], None),  # two equally close: not a guess
        ("灵研", ["灵研", "灵通"], None),  # already valid
        (5, ["5"], None),  # not a text
    ],
)
def test_closest_guesses_only_a_near_and_unique_value(
    value: Any, candidates: list[str], near: str | None
) -> None:
    """One or two edits away (by length), and the only one that close; else nothing."""
    assert closest(value, candidates) == near
