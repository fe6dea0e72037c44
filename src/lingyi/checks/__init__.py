"""The check library: small pure functions registered by name.

A check takes a :class:`CheckContext` and its validated parameters and returns an
:class:`Outcome`. Which checks a member runs, in which stage, with which parameters and
``on_fail``, is data in ``validators/*.toml``; the code here knows nothing of members.

Adding a check::

    class Params(CheckParams):
        words: list[str] = []

    @register("text.forbidden", Params)
    def forbidden(ctx: CheckContext, params: Params) -> Outcome:
        ...
"""

from __future__ import annotations

from lingyi.checks._registry import (
    REGISTRY,
    CheckContext,
    CheckParams,
    CheckSpec,
    Outcome,
    fail,
    ok,
    register,
)

__all__ = [
    "REGISTRY",
    "CheckContext",
    "CheckParams",
    "CheckSpec",
    "Outcome",
    "fail",
    "load_builtin_checks",
    "ok",
    "register",
]


def load_builtin_checks() -> None:
    """Import the modules whose ``@register`` calls fill the registry."""
    from lingyi.checks import (  # noqa: F401
        boundary,
        communication,
        evidence,
        git,
        inference,
        pre,
        tool,
    )
