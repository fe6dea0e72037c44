"""LingYi Guard: verify before you assert.

The public surface is small: build a :class:`ConstraintLayer` from a config, call
``verify(assertion, ledger)``, read the :class:`VerificationResult`.

The names below resolve on first use (PEP 562): ``import lingyi`` loads neither pydantic nor
the models, so a command that needs neither (the warm client of ``lingyi verify``,
:mod:`lingyi._warm`) starts at the cost of the interpreter.
"""

from __future__ import annotations

from lingyi._lazy import attribute

# Not typing.TYPE_CHECKING: importing typing alone costs more than this package's whole
# warm path. mypy treats a name TYPE_CHECKING as true all the same.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from lingyi.errors import (
        BackendError,
        ConfigError,
        LingyiError,
        LogError,
        PolicyError,
        TranscriptError,
    )
    from lingyi.models import (
        Assertion,
        AssertionType,
        CheckResult,
        Decision,
        Evidence,
        Fallback,
        OnFail,
        Stage,
        ToolCall,
        VerificationResult,
    )

_ERRORS = ("BackendError", "ConfigError", "LingyiError", "LogError", "PolicyError",
           "TranscriptError")  # fmt: skip
_MODELS = ("Assertion", "AssertionType", "CheckResult", "Decision", "Evidence", "Fallback",
           "OnFail", "Stage", "ToolCall", "VerificationResult")  # fmt: skip
_HOME = {**dict.fromkeys(_ERRORS, "lingyi.errors"), **dict.fromkeys(_MODELS, "lingyi.models")}

__all__ = [
    "Assertion",
    "AssertionType",
    "BackendError",
    "CheckResult",
    "ConfigError",
    "Decision",
    "Evidence",
    "Fallback",
    "LingyiError",
    "LogError",
    "OnFail",
    "PolicyError",
    "Stage",
    "ToolCall",
    "TranscriptError",
    "VerificationResult",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    return attribute(__name__, _HOME, globals(), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
