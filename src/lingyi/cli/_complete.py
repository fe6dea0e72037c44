"""Shell completion of values that live in the policies in effect: members and tools.

Completion runs on every Tab press, so a broken config or policy folder completes nothing
rather than printing an error into the user's prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click import Context, Parameter
from click.shell_completion import CompletionItem

from lingyi.cli._app import App
from lingyi.errors import LingyiError

if TYPE_CHECKING:
    from lingyi.policy import PolicySet


def _policies(ctx: Context) -> PolicySet | None:
    # Here, not at the top: `lingyi verify --server` imports this module and none of the engine.
    from lingyi.policy import load_policies

    app = ctx.find_object(App) or App()
    try:
        config = app.config()
        return load_policies(
            config.validators_dir, require_shared=config.raw.policies.require_shared
        )
    except LingyiError:
        return None


def members(ctx: Context, _param: Parameter, incomplete: str) -> list[CompletionItem]:
    """Member ids, with their display names as help."""
    policies = _policies(ctx)
    found = policies.members.values() if policies else []
    return [CompletionItem(m.id, help=m.name) for m in found if m.id.startswith(incomplete)]


def tools(ctx: Context, _param: Parameter, incomplete: str) -> list[CompletionItem]:
    """Tool names of every member, with their owner as help."""
    policies = _policies(ctx)
    found = [(t, m.id) for m in (policies.members.values() if policies else []) for t in m.tools]
    return [CompletionItem(t, help=owner) for t, owner in sorted(found) if t.startswith(incomplete)]
