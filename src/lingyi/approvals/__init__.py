"""Human approval bound to the call: the calls a policy marks wait for a person.

| module | owns |
|---|---|
| :mod:`._gate` | :class:`ApprovalGate`: does a call the guard would run wait for a person? |
| :mod:`._book` | appending approval events and deciding a request, under one lock |
| :mod:`._state` | the approvals the log's records describe (the only state there is) |
| :mod:`._elicit` | asking the person at the client through MCP elicitation |
| :mod:`.tool` | the ``approve_call`` MCP tool for an approver's token |

Where the state lives: in the verification log's chain, as ``approval`` records (requested,
approved, refused, expired, used). No second store: the server and ``lingyi approve`` (another
process) read and append the same records, under a lock file beside the log, and a review
reads the decisions where they are proven (``lingyi log verify``). Reads are bounded by the
expiry window, not by the log's length (:func:`._state.recent`).
"""

from lingyi.approvals._book import ApprovalError, Book, utc_clock
from lingyi.approvals._elicit import input_required, offer
from lingyi.approvals._gate import ApprovalGate, needed, uncertain_codes
from lingyi.approvals._state import Approval, Binding, args_digest, every

__all__ = [
    "Approval",
    "ApprovalError",
    "ApprovalGate",
    "Binding",
    "Book",
    "args_digest",
    "every",
    "input_required",
    "needed",
    "offer",
    "uncertain_codes",
    "utc_clock",
]
