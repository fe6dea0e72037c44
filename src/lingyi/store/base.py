"""The store's interface and the types every implementation shares (see the package)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lingyi.log.chain import ChainReport
from lingyi.log.checkpoints import CheckpointReport
from lingyi.store.counts import WindowCounts

Row = tuple[int, dict[str, Any]]  # (line in the log, the record as written)


def default_path(log: Path) -> Path:
    """Where the index of ``log`` lives unless ``[store] path`` says otherwise."""
    return log.with_name(log.name + ".index.sqlite")


@dataclass
class Summary:
    """What the index knows of the whole log: the chain's report (``lingyi log verify``'s
    verdict on the same lines) and what was wrong with the records themselves."""

    chain: ChainReport
    invalid: int = 0
    unknown_schema: int = 0
    schema_versions: dict[str, int] = field(default_factory=dict)
    other_kinds: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)  # the first problems
    checkpoints: CheckpointReport | None = None  # None: no checkpoint file configured

    @property
    def verified(self) -> bool:
        """``lingyi log verify``'s verdict: the chain, and the checkpoints when configured."""
        return self.chain.ok and (self.checkpoints is None or self.checkpoints.ok)


class Store(Protocol):
    """The index of one log. ``ingest`` brings it up to date; the queries read only rows
    of records the chain verifier authenticated, in log order. Times are the log's
    timestamp keys (:func:`lingyi.log.records.ts_key`); windows are half-open."""

    summary: Summary  # as of the last ingest

    def ingest(self) -> Summary:
        """Read the lines appended since the last call, once each; the log's summary."""
        ...

    def rebuild(self) -> Summary:
        """Forget every row and ingest the whole log again."""
        ...

    def verifications(
        self, start: str, end: str, member: str | None = None, *, flagged: bool = False
    ) -> Iterator[Row]:
        """Verifications whose ``ts`` is in [start, end) (of ``member``), checks included
        (``flagged``: only those with a judge trace, a shadow decision or uncertain checks)."""
        ...

    def counts(
        self, start: str, end: str, member: str | None, day_keys: Sequence[str]
    ) -> WindowCounts:
        """The grouped counts of the verifications in [start, end) (of ``member``), by the
        local days that start at ``day_keys``."""
        ...

    def rejections(
        self, start: str, end: str, member: str | None, code: str | None, first: int = 0
    ) -> Iterator[Row]:
        """The window's rejections a blocking failed check of ``code`` explains (None: that
        none explains), in log order, from line ``first`` on."""
        ...

    def records(
        self, kinds: Collection[str] | None = None, *, newest_first: bool = False
    ) -> Iterator[Row]:
        """Every record (of ``kinds``), oldest first or newest first."""
        ...

    def find(self, record_id: str) -> dict[str, Any] | None:
        """The last record with this id."""
        ...

    def appeals(self, ref: str | None = None) -> Iterator[Row]:
        """Appeals and resolutions (those naming ``ref`` as their id, verification or appeal)."""
        ...

    def approvals(self, since: str | None = None) -> Iterator[Row]:
        """Approval events at or after ``since`` (every one without it), re-authenticated."""
        ...

    def outcomes(self, start: str, end: str, member: str | None = None) -> Iterator[Row]:
        """Call outcomes whose ``ts`` is in [start, end) (of ``member``)."""
        ...

    def close(self) -> None: ...
