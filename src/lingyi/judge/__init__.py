"""The judge: a second, model-based opinion where the deterministic checks cannot decide.

It runs only when every deterministic check passed, or for an uncertain check whose policy
says ``on_uncertain = "judge"``, and never after a deterministic failure (the layer keeps
that guarantee). Policy files say where it runs (``[[judge]]`` rules per member, tool and
kind, :mod:`lingyi.policy`); the config's ``[judge]`` section holds the deployment's settings.

| module | owns |
|---|---|
| :mod:`~lingyi.judge._plan` | which rule applies; the default rubrics |
| :mod:`~lingyi.judge._prompt` | the rubric as instructions, the material as delimited data, the verdict tool, the cache key |
| :mod:`~lingyi.judge._verdict` | reading the answer defensively (tool input, JSON, fenced block) |
| :mod:`~lingyi.judge._runner` | the judge's own event loop: async calls, bounded in flight |
| :mod:`~lingyi.judge._budget` | prices, cost estimates, session and day budgets |
| :mod:`~lingyi.judge._memory` | the verdict cache (TTL) and revisions per subject |
| :mod:`~lingyi.judge._judge` | :class:`Judge`: the steps in cost order, outcomes, results |

The model itself is never run by the tests: they drive the real ``anthropic`` client against a
Messages API server on loopback.
"""

from lingyi.judge._judge import Judge, subject_of
from lingyi.judge._plan import CODE, DEFAULT_RUBRICS, PREFLIGHT_CODE, Plan, plan_for
from lingyi.judge._prompt import TOOL_NAME, VERDICTS, tool_schema
from lingyi.judge._verdict import Malformed, Verdict, parse
from lingyi.log.records import JUDGE_OUTCOMES as OUTCOMES
from lingyi.log.records import JUDGE_TRACE as TRACE

__all__ = [
    "CODE",
    "DEFAULT_RUBRICS",
    "OUTCOMES",
    "PREFLIGHT_CODE",
    "TOOL_NAME",
    "TRACE",
    "VERDICTS",
    "Judge",
    "Malformed",
    "Plan",
    "Verdict",
    "parse",
    "plan_for",
    "subject_of",
    "tool_schema",
]
