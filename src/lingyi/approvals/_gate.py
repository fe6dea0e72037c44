"""The gate between the guard's verdict and the tool: does this call wait for a person?

:meth:`ApprovalGate.hold` runs for every call the guard would run (approved, or its
fallback), built-in and upstream alike. A call whose tool needs approval (its policy's
``approval``, ``[approvals] destructive``, or an uncertain check or judge) proceeds only
under an approval bound to the same member, token, tool, argument digest and policy version,
not expired, used once. Without one, the person is asked through MCP elicitation when the
client can be asked; otherwise the call is answered ``pending`` with an approval id, and
nothing runs. Every step is an ``approval`` record in the log's chain.

Asking the client that made the call is self-approval: the model's own client may answer.
So when ``[approvals] approvers`` names tokens, the caller is never asked and an answer it
sends anyway approves nothing (``approval.self_approval``, logged); an approver decides
with ``lingyi approve ID`` or ``approve_call`` from its own session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lingyi import messages
from lingyi._logging import get_logger
from lingyi.approvals._book import Book, Clock, Request, shown_args, utc_clock
from lingyi.approvals._elicit import Answer, Asker, asker
from lingyi.approvals._state import Approval, Binding, args_digest
from lingyi.config import ApprovalsSection, Config
from lingyi.log.writer import VerificationLog
from lingyi.models import Stage, ToolCall, VerificationResult
from lingyi.policy import MemberPolicy, ToolSpec
from lingyi.verdict import ApprovalBrief, Guarded, Reply, Verdict, refusal, verdict_of

if TYPE_CHECKING:
    from lingyi.pipeline import Caller

PENDING = "approval.pending"
SELF_APPROVAL = "approval.self_approval"  # the caller answered its own request: not approved
log = get_logger()


def uncertain_codes(result: VerificationResult) -> list[str]:
    """Checks that could not decide, and a judge that gave no verdict (degraded)."""
    return [c.code for c in result.checks if c.uncertain or (c.stage is Stage.JUDGE and c.degraded)]


def needed(
    spec: ToolSpec | None, result: VerificationResult, settings: ApprovalsSection
) -> str | None:
    """Why this call needs a person (required, destructive, uncertain), or None."""
    if spec is None:
        return None
    if spec.approval == "required":
        return "required"
    if settings.destructive and spec.destructive:
        return "destructive"
    if spec.approval == "uncertain" and uncertain_codes(result):
        return "uncertain"
    return None


@dataclass(frozen=True)
class Held:
    """One call at the gate: who, what, why, and the guard's verdict on it."""

    caller: Caller
    owner: MemberPolicy
    call: ToolCall
    result: VerificationResult
    why: str
    binding: Binding
    lang: str  # the owner's language (its policy), else the config's

    def request(self, via: str) -> Request:
        return Request(self.caller.session, self.call.arguments, self.why, via, self.result.id)


class ApprovalGate:
    """The approvals of one server: the policy's settings and the book of the log."""

    def __init__(self, config: Config, log: VerificationLog, clock: Clock = utc_clock) -> None:
        self.settings = config.raw.approvals
        self.language = config.language
        self.book = Book(log, self.settings.ttl_s, clock)

    def close(self) -> None:
        self.book.close()

    def hold(
        self, caller: Caller, owner: MemberPolicy, call: ToolCall, result: VerificationResult
    ) -> Reply | None:
        """None: the call may run now. A reply: it waits for a person, or one refused it."""
        why = needed(owner.tools.get(call.name), result, self.settings)
        if why is None:
            return None
        principal = caller.principal.name if caller.principal else None
        binding = Binding(
            owner.id, principal, call.name, self._digest(call.arguments), result.policy_version
        )
        held = Held(caller, owner, call, result, why, binding, owner.language or self.language)
        ask = asker() if self.settings.elicit else None
        with self.book.mutex:
            approvals = self.book.recent()
            if (usable := self._usable(approvals, binding)) is not None:
                self.book.event(usable, "used", verification_id=result.id)
                return None
            if self.settings.approvers:  # a person other than the caller decides
                return self._pending(held, approvals, self._self_answer(held, ask))
            if ask is None:
                return self._pending(held, approvals)
            # The retry of a call that asked (2026-07-28): the answer is checked and used in
            # this one hold of the lock, so two retries carrying it cannot both run.
            if (resumed := self._resumed(held, approvals, ask)) is not None:
                return self._answered(held, *resumed)
            approval = Approval(self.book.request(binding, held.request("elicitation")))
        label = self._text(held.lang, "approval.elicit.approve")
        timeout = self.settings.elicit_timeout_s
        answer = ask.ask(self._question(held), label, timeout, approval.id)
        if answer.action == "input_required":  # the question goes out with the result
            return self._waiting(held, approval, [PENDING])
        with self.book.mutex:  # asked without the lock: what the log says now decides
            now = self.book.recent().get(approval.id, approval)
            return self._answered(held, now, answer)

    def _digest(self, args: dict[str, Any]) -> str:
        """Keyed with the log's current key when it has one (see :func:`args_digest`)."""
        keys = self.book.log.options.keys
        return args_digest(args, keys.current if keys is not None else None)

    def _resumed(
        self, held: Held, approvals: dict[str, Approval], ask: Asker
    ) -> tuple[Approval, Answer] | None:
        """The answer a retried call carries, for a live elicitation request of this very
        call; anything else the client echoes (another id, other arguments) is ignored."""
        found = ask.answered()
        approval = approvals.get(found[0]) if found is not None else None
        if found is None or approval is None or approval.via != "elicitation":
            return None
        if approval.status != "pending" or approval.binding != held.binding:
            return None
        return (approval, found[1]) if approval.live_at(self.book.now()) else None

    def _self_answer(self, held: Held, ask: Asker | None) -> str | None:
        """With approvers named, the caller is never asked; an answer it sends anyway (a
        retry carrying one) approves nothing: logged, and the reply says who decides."""
        found = ask.answered() if ask is not None else None
        if found is None:
            return None
        log.warning(
            "approval.self_approval",
            approval_id=found[0],
            principal=held.binding.principal,
            session=held.caller.session,
        )
        return self._text(held.lang, "approval.self_approval.fail", tool=held.call.name)

    def _usable(self, approvals: dict[str, Approval], binding: Binding) -> Approval | None:
        now = self.book.now()
        return next(
            (
                a
                for a in approvals.values()
                if a.status == "approved" and a.binding == binding and a.live_at(now)
            ),
            None,
        )

    # -- elicitation --------------------------------------------------------------------

    def _question(self, held: Held) -> str:
        args = json.dumps(shown_args(held.call.arguments), ensure_ascii=False)
        principal = held.binding.principal or self._text(held.lang, "approval.elicit.no_principal")
        return self._text(
            held.lang,
            "approval.elicit.ask",
            member=held.owner.name,
            principal=principal,
            tool=held.call.name,
            why=self._why(held),
            args=args,
        )

    def _answered(self, held: Held, approval: Approval, answer: Answer) -> Reply | None:
        """Record the person's answer; the caller holds the book's lock, so the approval's
        status read here is the one the events follow (check and use in one hold)."""
        if approval.status != "pending":  # decided meanwhile (`lingyi approve`, expiry)
            return self._decided(held, approval)
        by = f"elicitation:{held.binding.principal or held.caller.session}"
        if answer.approved:
            self.book.event(approval, "approved", by=by)
            self.book.event(approval, "used", verification_id=held.result.id)
            return None
        reason = self._refusal_reason(held, answer)
        self.book.event(approval, "refused", by=by, reason=reason)
        return self._refused(held, approval, by, reason)

    def _decided(self, held: Held, approval: Approval) -> Reply:
        """An answer for a request that is no longer pending: nothing runs on it."""
        code = "approval.decided"
        text = self._text(held.lang, f"{code}.fail", id=approval.id, status=approval.status)
        hint = self._text(held.lang, f"{code}.hint")
        return self._reply(held, approval, "rejected", [code], f"[{code}] {text}", hint)

    def _refusal_reason(self, held: Held, answer: Answer) -> str:
        if answer.action == "decline":
            return self._text(held.lang, "approval.refused.declined")
        if answer.action == "failed":
            return self._text(held.lang, "approval.refused.failed", error=answer.error)
        return self._text(held.lang, "approval.refused.cancelled") + (
            f" ({answer.error})" if answer.error else ""
        )

    # -- pending ------------------------------------------------------------------------

    def _pending(
        self, held: Held, approvals: dict[str, Approval], self_answer: str | None = None
    ) -> Reply:
        """The same call's live request again, a standing refusal, or a new request
        (``self_answer``: why the caller's own answer to it approved nothing)."""
        now = self.book.now()
        same = [a for a in approvals.values() if a.binding == held.binding]
        notes: list[str] = [self_answer] if self_answer else []
        mine = [SELF_APPROVAL] if self_answer else []
        for old in same:
            if old.expired_at(now):
                self.book.event(old, "expired", by="lingyi")
                notes.append(
                    self._text(held.lang, "approval.expired.fail", old=old.id, expires=old.expires)
                )
        waiting = [a for a in same if a.via == "pending" and a.status == "pending"]
        if waiting:
            return self._waiting(held, waiting[-1], [PENDING, *mine], notes[: len(mine)])
        refused = [
            a for a in same if a.via == "pending" and a.status == "refused" and now < a.expires
        ]
        if refused:
            last = refused[-1].events[-1] if refused[-1].events else {}
            return self._refused(
                held, refused[-1], str(last.get("by")), str(last.get("reason") or "")
            )
        expired = len(notes) > len(mine)
        codes = [PENDING, *mine, *(["approval.expired"] if expired else [])]
        changed = self._changed(held, approvals, now)
        if changed is not None:
            code, old = changed
            codes.append(code)
            notes.append(self._text(held.lang, f"{code}.fail", old=old.id, tool=held.call.name))
        request = self.book.request(held.binding, held.request("pending"))
        return self._waiting(held, Approval(request), codes, notes)

    def _changed(
        self, held: Held, approvals: dict[str, Approval], now: str
    ) -> tuple[str, Approval] | None:
        """A live request or approval of the same caller and tool with other arguments or
        another policy version: why it does not apply to this call."""
        for old in reversed(list(approvals.values())):
            binding = old.binding
            if binding.caller() != held.binding.caller() or not old.live_at(now):
                continue
            if binding.args_digest != held.binding.args_digest:
                return "approval.args_changed", old
            if binding.policy_version != held.binding.policy_version:
                return "approval.policy_changed", old
        return None

    def _waiting(
        self, held: Held, approval: Approval, codes: list[str], notes: list[str] | None = None
    ) -> Reply:
        text = self._text(
            held.lang,
            "approval.pending.fail",
            tool=held.call.name,
            why=self._why(held),
            id=approval.id,
            expires=approval.expires,
        )
        reason = "; ".join([f"[{PENDING}] {text}", *(notes or [])])
        hint = self._text(held.lang, self._pending_hint(), id=approval.id)
        return self._reply(held, approval, "pending", codes, reason, hint)

    def _pending_hint(self) -> str:
        if self.settings.approvers:
            return "approval.pending.approvers_hint"
        return "approval.pending.hint"

    def _refused(self, held: Held, approval: Approval, by: str, reason: str) -> Reply:
        text = self._text(
            held.lang, "approval.refused.fail", tool=held.call.name, by=by, reason=reason
        )
        hint = self._text(held.lang, "approval.refused.hint")
        code = "approval.refused"
        return self._reply(held, approval, "rejected", [code], f"[{code}] {text}", hint)

    def _reply(
        self,
        held: Held,
        approval: Approval,
        decision: str,
        codes: list[str],
        reason: str,
        hint: str,
    ) -> Reply:
        brief = ApprovalBrief(
            id=approval.id,
            status=approval.status,
            tool=held.call.name,
            expires=approval.expires,
            why=held.why,
            command=f"lingyi approve {approval.id}",
        )
        update: dict[str, Any] = {
            "decision": decision,
            "codes": codes,
            "reason": reason,
            "recommendation": hint,
            "approval": brief,
        }
        verdict: Verdict = verdict_of(held.result, held.owner.id).model_copy(update=update)
        return refusal(Guarded(verdict=verdict))

    def _why(self, held: Held) -> str:
        codes = ", ".join(uncertain_codes(held.result))
        return self._text(held.lang, f"approval.why.{held.why}", codes=codes)

    def _text(self, lang: str, key: str, **values: Any) -> str:
        return messages.text(lang, key, **values)
