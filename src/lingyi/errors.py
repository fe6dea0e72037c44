"""One exception hierarchy for everything LingYi Guard raises on bad input.

Verdicts are data (``VerificationResult``), never exceptions; these errors are for
configuration, policy files, transcripts and logs that cannot be read.
"""

from __future__ import annotations


class LingyiError(Exception):
    """Base of every error LingYi Guard raises on purpose."""


class ConfigError(LingyiError):
    """The deployment config is missing, unreadable or invalid (names the file and key)."""


class PolicyError(LingyiError):
    """A member policy file is invalid (names the file and the key)."""

    def __init__(self, path: str, key: str, message: str) -> None:
        self.path, self.key, self.message = path, key, message
        super().__init__(f"{path}: {key}: {message}")


class TranscriptError(LingyiError):
    """A transcript line cannot be read (names the line)."""

    def __init__(self, line: int, message: str) -> None:
        self.line, self.message = line, message
        super().__init__(f"line {line}: {message}")


class LogError(LingyiError):
    """The verification log cannot be written or read."""


class BackendError(LingyiError):
    """A real tool backend (knowledge base, git, data) refused or failed an operation."""
