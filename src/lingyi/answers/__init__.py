"""Answers with sources: a member's whole Markdown answer, verified before it is shown.

A RAG answer (inline citations, images, Mermaid diagrams) comes in as the ``answer`` kind
(:mod:`lingyi.kinds`): ``{id, session, member, question, answer, intent, attempt}``. The one
constraint layer verifies it (content checks on its text, the ``answer.*`` checks of
:mod:`lingyi.answers.checks` on its Markdown and citations, the judge as its critic when one
is configured); :class:`~lingyi.answers._kind.AnswerKind` then opens or closes the source
gate, counts the attempt and degrades the last failed one. Served as the MCP tool
``verify_answer``, the replay event ``answer`` and ``lingyi verify --answer FILE|-``.
"""

from lingyi.answers._kind import ANSWER, AnswerKind

__all__ = ["ANSWER", "AnswerKind"]
