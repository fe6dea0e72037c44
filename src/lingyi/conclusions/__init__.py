"""Structured conclusions: an incident analysis synthesised from several specialists' findings.

Importing this package registers the ``conclusion`` kind (:mod:`lingyi.kinds`) and its checks
(``conclusion.schema``, ``conclusion.fabricated_evidence``, ``conclusion.corroboration``,
``conclusion.verify_first``, ``conclusion.traces``, ``conclusion.rules``), which policies enable
with ``types = ["conclusion"]``.
"""

from lingyi.conclusions import checks, rules
from lingyi.conclusions._kind import ROUTES, ConclusionKind, content_of, feedback
from lingyi.kinds import register_kind

KIND = register_kind(ConclusionKind())

__all__ = ["KIND", "ROUTES", "ConclusionKind", "checks", "content_of", "feedback", "rules"]
