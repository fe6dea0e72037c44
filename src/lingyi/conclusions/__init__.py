"""Structured conclusions: an incident analysis synthesised from several specialists' findings.

The ``conclusion`` kind (:mod:`lingyi.kinds`) and its checks, registered through the
``lingyi.kinds`` and ``lingyi.checks`` entry points
(``conclusion.schema``, ``conclusion.fabricated_evidence``, ``conclusion.corroboration``,
``conclusion.verify_first``, ``conclusion.traces``, ``conclusion.rules``), which policies enable
with ``types = ["conclusion"]``.
"""

from lingyi.conclusions import checks, rules
from lingyi.conclusions._kind import ROUTES, ConclusionKind, content_of, feedback

KIND = ConclusionKind()  # registered through the lingyi.kinds entry point (pyproject.toml)

__all__ = ["KIND", "ROUTES", "ConclusionKind", "checks", "content_of", "feedback", "rules"]
