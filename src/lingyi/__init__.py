"""LingYi Guard: verify before you assert.

The public surface is small: build a :class:`ConstraintLayer` from a config, call
``verify(assertion, ledger)``, read the :class:`VerificationResult`.
"""

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
