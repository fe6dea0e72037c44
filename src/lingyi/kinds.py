"""Kinds of input beyond single assertions: structured conclusions and answers.

A kind turns its input (a replay event, an MCP tool's arguments, a CLI file) into an
:class:`~lingyi.models.Assertion` whose ``type`` is the kind's name and whose ``payload`` holds
the structured part, so the one constraint layer verifies it: content checks (medical advice,
relays, URLs, predictions) run on its text like on any assertion, and the kind's own checks
(``types = ["conclusion"]`` in a policy) read the payload. After the decision the kind adds its
outputs (a conclusion's retry ``route``, an answer's ``sources``), which the log keeps and
replay prints beside the contract's fields.

A package declares its kinds under the ``lingyi.kinds`` entry point, as lingyi does for its own
(pyproject.toml); :func:`kind_of` finds one by name. The check library imports none of them.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from lingyi.models import Assertion

if TYPE_CHECKING:
    from lingyi.ledger import SessionLedger
    from lingyi.models import VerificationResult


class Kind(Protocol):
    """What a kind of input must provide."""

    name: str

    def assertion(self, given: dict[str, Any]) -> Assertion:
        """The assertion to verify, from the input as given (raises ValueError when invalid)."""
        ...

    def finish(
        self, assertion: Assertion, result: VerificationResult, session: SessionLedger
    ) -> dict[str, Any]:
        """Outputs of this kind once the layer decided (and any state it keeps per session)."""
        ...


KIND_GROUP = "lingyi.kinds"  # [project.entry-points."lingyi.kinds"] name = "package:OBJECT"
_KINDS: dict[str, Kind] = {}
_loaded = False


def register_kind(kind: Kind) -> Kind:
    if kind.name in _KINDS and _KINDS[kind.name] is not kind:
        raise ValueError(f"kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind
    return kind


def kind_of(name: str) -> Kind | None:
    """The kind registered under ``name`` (the installed kinds load on first use)."""
    _load()
    return _KINDS.get(name)


def input_assertion(given: dict[str, Any]) -> Assertion:
    """One input as ``lingyi verify --stdin`` and the server's ``verify`` tool take it: an
    assertion, or (by its ``type``) a conclusion, an answer or another kind in the shape of its
    replay event. Raises ValueError (a pydantic ValidationError among them) naming the field."""
    kind = kind_of(str(given.get("type")))
    return kind.assertion(given) if kind is not None else Assertion.model_validate(given)


def kind_names() -> list[str]:
    _load()
    return sorted(_KINDS)


def _load() -> None:
    """Register the kinds that installed packages declare under :data:`KIND_GROUP` (the
    built-in ones too: lingyi's own pyproject.toml declares them).

    Once per process: every verification asks for its kind, and reading the installed
    packages' entry points each time would cost more than the verification.
    """
    global _loaded
    if _loaded:
        return
    for entry in entry_points(group=KIND_GROUP):
        register_kind(entry.load())
    _loaded = True
