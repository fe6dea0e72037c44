"""Upstream results checked before they reach the model (filled in by the result audit)."""

from __future__ import annotations


def audit_text(texts: list[str]) -> tuple[list[str], list[str]]:
    """The texts as shown to the model, and the codes of what the audit found."""
    return texts, []
