"""``lingyi log verify``: every guarantee the log can give, and which of them were checked.

Three guarantees, each checked only when what it needs is there, and each said to be checked
or not, so that nobody reads "chain OK" as more than it is:

* the **hash chain** (always): no record edited, deleted or reordered, as far as someone
  without the key could not have recomputed the chain;
* the **keyed chain** (a key is configured): every keyed record's MAC verifies, keys change
  only through a recorded rotation, and the log was not rewritten as a plain chain;
* the **checkpoints** (a checkpoint file is configured): every record a checkpoint names has
  the hash it had when written, and no checkpoint is beyond the end of the log (a cut-off
  tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lingyi.log.chain import ChainReport, ChainVerifier
from lingyi.log.checkpoints import CheckpointChecker, CheckpointReport
from lingyi.log.keys import KeyRing
from lingyi.log.reader import read_log


@dataclass(frozen=True)
class Guarantee:
    """One guarantee: ``status`` is ``ok``, ``failed`` or ``not checked``; ``detail`` says why."""

    name: str
    status: str
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class LogVerification:
    """The chain report, the checkpoint report (when checked), and the guarantees."""

    path: Path
    chain: ChainReport
    keys: KeyRing | None
    checkpoints: CheckpointReport | None
    checkpoints_skipped: str | None = None  # why checkpoints were not checked, when not

    @property
    def ok(self) -> bool:
        return self.chain.ok and (self.checkpoints is None or self.checkpoints.ok)

    def guarantees(self) -> list[Guarantee]:
        return [self._plain(), self._keyed(), self._anchored()]

    def _plain(self) -> Guarantee:
        chain = self.chain
        if broken := chain.edited + chain.relinked + chain.stripped:
            return Guarantee("hash chain", "failed", f"{broken} break(s)")
        return Guarantee("hash chain", "ok", "no record edited, deleted, reordered or stripped")

    def _keyed(self) -> Guarantee:
        chain, name = self.chain, "keyed chain"
        if self.keys is None:
            if chain.keyed_unchecked:
                why = f"{chain.keyed_unchecked} keyed record(s), and no key to check them with"
                return Guarantee(name, "not checked", why + " (set [log] key_env or key_file)")
            why = "the log has no key: a rewrite that recomputes every hash would pass"
            return Guarantee(name, "not checked", why + " (set [log] key_env or key_file)")
        if chain.rekeyed or (chain.edited and chain.keyed):
            return Guarantee(name, "failed", f"{chain.rekeyed + chain.edited} record(s) fail it")
        before = f"; {chain.plain} plain record(s) before the first key" if chain.plain else ""
        detail = f"{chain.keyed} MAC(s) verified, {chain.rotations} key rotation(s){before}"
        return Guarantee(name, "ok", detail)

    def _anchored(self) -> Guarantee:
        report, name = self.checkpoints, "checkpoints"
        if report is None:
            return Guarantee(name, "not checked", self.checkpoints_skipped or "")
        where = f"{report.path}: "
        if not report.ok:
            first = report.problems[0] if report.problems else ""
            return Guarantee(name, "failed", where + first)
        after = report.log_seq - (report.last_seq or 0)
        signed = f"{report.signed} signed" if self.keys else f"{report.unsigned} unsigned"
        detail = f"{signed} checkpoint(s) match; the last covers record {report.last_seq}"
        if after:
            detail += f" ({after} record(s) after it not yet covered)"
        return Guarantee(name, "ok", where + detail)

    def as_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "ok": self.ok,
            **self.chain.as_json(),
            "ok_chain": self.chain.ok,
            "guarantees": [g.as_json() for g in self.guarantees()],
            "checkpoints": self.checkpoints.as_json() if self.checkpoints else None,
        }


NOT_CONFIGURED = (
    "no checkpoint file is configured: a cut-off tail would pass (set [log] checkpoints)"
)


def verify_log(
    path: Path,
    keys: KeyRing | None = None,
    checkpoints: Path | None = None,
    *,
    skipped: str = NOT_CONFIGURED,
) -> LogVerification:
    """Check the chain (and MACs, with ``keys``) and the ``checkpoints`` in one pass.

    ``skipped`` says why checkpoints are not checked when ``checkpoints`` is None.
    """
    chain = ChainVerifier(keys=keys)
    checker = CheckpointChecker(checkpoints, keys) if checkpoints is not None else None
    for line in read_log(path):
        chain.feed(line)
        record, stored = line.record, chain.prev
        if checker and record and stored is not None and stored == record.get("hash"):
            checker.record(chain.seq, stored, line.lineno)
    chain.finish()
    report = checker.finish() if checker is not None else None
    if report is not None and not report.present and chain.report.records:
        report.bad += 1
        report.note("the checkpoint file does not exist (deleted, or never written)")
    return LogVerification(path, chain.report, keys, report, None if checker else skipped)
