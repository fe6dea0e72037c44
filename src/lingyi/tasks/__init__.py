"""Tasks a member declares, and the tools finishing them takes (intents in the policy).

A member declares an intent when it starts (``begin_task``, an MCP tool and a replay event);
the guard then follows the tools that really ran in the session (the ledger's entries, never
the member's word). A tool an intent says must come after others (``before``: a release's
``git_push`` after ``generate_audit_report``) is rejected while they have not run
(``task.order``); ``end_task`` reports the required tools not yet called as incomplete
(``task.complete``), and the log keeps the verdict. Both are verified like any input
(:mod:`lingyi.kinds`) and logged with type ``task``.
"""

from lingyi.tasks._kind import BEGIN, END, TASK, active_task

__all__ = ["BEGIN", "END", "TASK", "active_task"]
