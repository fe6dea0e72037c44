"""Member policies: ``validators/*.toml`` loaded into typed, validated data.

One file per member says which tools the member owns (with an argument schema for
each) and which checks run in which stage, with which parameters and ``on_fail``.
Files whose name starts with ``_`` hold checks shared by every member; a member can
``disable`` a shared check by name. Errors name the file and the key. ``[[judge]]`` tables
say where the judge runs and with which rubric (:mod:`._judge`).

Each tool's arguments have one schema, generated from the policy (:mod:`.schema`): it is
published as the MCP ``inputSchema`` and it is what the guard validates raw arguments with.
"""

from lingyi.policy._judge import (
    JUDGE_KINDS,
    JudgeKind,
    JudgeRule,
    SignalSpec,
    Threshold,
    criteria_of,
    first_rule,
)
from lingyi.policy._lexicon import Lexicon, LexiconRef, load_lexicon
from lingyi.policy._load import load_policies
from lingyi.policy._model import (
    ArgSpec,
    ArgType,
    CheckEntry,
    MemberPolicy,
    PolicySet,
    ToolSpec,
    UnservedTool,
)
from lingyi.policy._store import PolicyStore
from lingyi.policy.schema import ArgProblem, Registries, arg_problems, input_schema, tool_schema

__all__ = [
    "JUDGE_KINDS",
    "ArgProblem",
    "ArgSpec",
    "ArgType",
    "CheckEntry",
    "JudgeKind",
    "JudgeRule",
    "Lexicon",
    "LexiconRef",
    "MemberPolicy",
    "PolicySet",
    "PolicyStore",
    "Registries",
    "SignalSpec",
    "Threshold",
    "ToolSpec",
    "UnservedTool",
    "arg_problems",
    "criteria_of",
    "first_rule",
    "input_schema",
    "load_lexicon",
    "load_policies",
    "tool_schema",
]
