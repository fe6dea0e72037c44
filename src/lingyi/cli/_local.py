"""``lingyi verify`` in this process: the config's policies, the layer, the log."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import ValidationError

from lingyi.cli._app import App, input_error
from lingyi.config import Config
from lingyi.council import MemoryCouncil
from lingyi.errors import LingyiError
from lingyi.guard import Guard, kb_lookups, open_kb
from lingyi.kinds import input_assertion
from lingyi.ledger import Ledger
from lingyi.models import Assertion, VerificationResult


def verify(
    app: App, config: Config, entered: dict[str, Any], where: str | None, context: str | None
) -> dict[str, Any]:
    """Verify and log ``entered``; the verification as the ``verify`` tool returns it."""
    assertion = _assertion(entered, where)
    kb = functools.cache(lambda: open_kb(config, guard.layer.policies))
    guard = Guard.from_config(
        config,
        source="cli",
        council=MemoryCouncil() if context else None,
        lookups=kb_lookups(kb, url_base=config.raw.evidence.kb_url_base),  # active, cited documents
    )
    try:
        result = guard.check(assertion, _ledger(app, guard, context))
    finally:
        guard.close()
    return as_dict(result)


def as_dict(result: VerificationResult) -> dict[str, Any]:
    """What the server's ``verify`` tool returns (lingyi.server.wire.Verification): the
    result without each check's detail."""
    return result.model_dump(mode="json", exclude={"checks": {"__all__": {"detail", "found"}}})


def _assertion(entered: dict[str, Any], where: str | None) -> Assertion:
    """The assertion of the input; an error names where the input came from (flags: the
    model's own wording, as a command of flags always gave it)."""
    try:
        return input_assertion(entered)
    except ValidationError as exc:
        if where is None:
            raise
        raise input_error(where, exc, Assertion) from exc
    except ValueError as exc:
        raise LingyiError(f"{where or 'input'}: {exc}") from exc


def _ledger(app: App, guard: Guard, context: str | None) -> Ledger:
    """Empty, or filled by the transcript's events (and its council messages)."""
    if not context:
        return Ledger()
    # Only with --context: one verify of flags or stdin does without the replay modules.
    from lingyi.cli.replay import transcript_lines
    from lingyi.replay import Replayer

    replayer = Replayer(guard)
    for error in replayer.preload(transcript_lines(context)):
        app.err(f"{context}:{error}")
    return replayer.ledger
