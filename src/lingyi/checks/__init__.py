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

from importlib.metadata import entry_points

from lingyi.checks._registry import (
    REGISTRY,
    CheckContext,
    CheckParams,
    CheckSpec,
    Outcome,
    Regex,
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
    "Regex",
    "fail",
    "load_builtin_checks",
    "load_plugins",
    "ok",
    "register",
]


PLUGIN_GROUP = "lingyi.checks"
_loaded_plugins: set[str] = set()


def load_builtin_checks() -> None:
    """Import the modules whose ``@register`` calls fill the registry, then plugins."""
    # The conclusion kind's checks live with the kind (its package registers both).
    import lingyi.conclusions  # noqa: F401
    from lingyi.answers import checks as _answers  # noqa: F401  (the answer kind's checks)
    from lingyi.checks import (  # noqa: F401
        boundary,
        communication,
        documents,
        evidence,
        git,
        inference,
        pre,
        tool,
    )
    from lingyi.tasks import checks as _tasks  # noqa: F401  (intents: begin_task, end_task)

    load_plugins()


def load_plugins() -> None:
    """Import checks that other packages declare under the ``lingyi.checks`` entry point.

    A plugin package adds ``[project.entry-points."lingyi.checks"] mine = "my_pkg.checks"``;
    importing that module registers its checks, which policies can then name.
    """
    for entry in entry_points(group=PLUGIN_GROUP):
        if entry.value not in _loaded_plugins:
            _loaded_plugins.add(entry.value)
            entry.load()
