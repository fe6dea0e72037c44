"""The council record: the messages members really posted.

A claim about what another member said is checked against this record. The default
record is an append-only JSONL file shared by every process of a deployment; replay
uses an in-memory record filled only by the transcript. Appends are serialised by a lock
file beside the record (``<record>.lock``, :class:`lingyi._locks.FileMutex`), on every OS.

The record is indexed by member and by term (:class:`RecordIndex`): checking a relay looks
up the few messages of that member that share its terms, so its cost does not grow with
the record.
"""

from __future__ import annotations

import bisect
import heapq
import json
import os
import threading
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lingyi._ids import new_id, utc_now
from lingyi._locks import FileMutex, lock_path
from lingyi._logging import get_logger
from lingyi._regex import lazy_re
from lingyi.redact import redact_value
from lingyi.text import arabic_numerals, canonical_text

log = get_logger()


class CouncilMessage(BaseModel):
    # Built on first use (the council record read, a message posted), not at start.
    model_config = ConfigDict(defer_build=True, populate_by_name=True, extra="ignore")

    id: str = Field(default_factory=new_id)
    sender: str = Field(alias="from")
    content: str
    ts: str = Field(default_factory=utc_now)


class CouncilRecord(Protocol):
    def messages_from(self, member: str) -> list[CouncilMessage]: ...

    def append(self, message: CouncilMessage) -> None: ...

    def search(
        self, senders: Collection[str], terms: Sequence[Collection[str]], limit: int
    ) -> list[CouncilMessage]: ...


_LATIN = lazy_re(r"[a-z][a-z0-9_\-]*")
_NUMBER = lazy_re(r"\d+(?:[.,]\d+)*")
_CJK_RUN = lazy_re(r"[\u3400-\u9fff]+")
STEM = 6  # Latin words are indexed by their first letters: audit, audits, audited


def index_terms(text: str, *, canonical: bool = False) -> set[str]:
    """The terms a text is found by: Latin word stems, numbers, Chinese bigrams (canonical;
    ``canonical`` says the text already is)."""
    text = text if canonical else canonical_text(text)
    text = arabic_numerals(text) if _CJK_RUN.search(text) else text  # numerals are Chinese
    found = {w[:STEM] for w in _LATIN.findall(text)}
    found |= {n.replace(",", "") for n in _NUMBER.findall(text)}
    for run in _CJK_RUN.findall(text):
        found |= {run} if len(run) == 1 else {run[i : i + 2] for i in range(len(run) - 1)}
    return found


class RecordIndex:
    """Texts by owner, with an inverted index of their terms.

    :meth:`search` ranks an owner's texts by how many of the query's term groups they hit
    (a group is one thing the query says, in all the forms it may take). It walks the
    rarest groups first and stops adding candidates after ``budget`` postings, so a query of
    common words against a large record costs the same as against a small one.
    """

    def __init__(self, budget: int = 256) -> None:
        self._items: list[tuple[str, object]] = []  # (owner, item)
        self._postings: dict[tuple[str, str], list[int]] = {}
        self._counts: Counter[str] = Counter()
        self._newest: dict[str, list[int]] = {}  # an owner's last items, for a query of nothing
        self.budget = budget

    def add(self, owner: str, text: str, item: object, *, canonical: bool = False) -> None:
        number = len(self._items)
        self._items.append((owner, item))
        self._counts[owner] += 1
        newest = self._newest.setdefault(owner, [])
        newest.append(number)
        del newest[: -self.NEWEST]
        for term in index_terms(text, canonical=canonical):
            self._postings.setdefault((owner, term), []).append(number)

    def count(self, owner: str) -> int:
        return self._counts[owner]

    def __len__(self) -> int:
        return len(self._items)

    def search(
        self, owners: Collection[str], terms: Sequence[Collection[str]], limit: int
    ) -> list[object]:
        """The items of ``owners`` hitting most term groups, most recent first among equals;
        only those within ``SLACK`` groups of the best (the rest share too little to matter)."""
        owners = [o for o in set(owners) if self._counts[o]]
        if not terms:  # "he said it is on hold": nothing to look up, the newest items
            recent = sorted(n for o in set(owners) for n in self._newest.get(o, ()))
            return [self._items[n][1] for n in recent[-limit:][::-1]]
        groups = sorted((g for g in (self._lists(owners, t) for t in terms) if g), key=_size)
        scores: Counter[int] = Counter()
        spent, top = 0, None
        for lists in groups:
            if top is None and spent + _size(lists) <= self.budget:
                scores.update(set().union(*lists))  # a rare term: every item that holds it
                spent += _size(lists)
                continue
            if top is None:  # a common term: it only ranks the candidates found so far
                if not scores:  # nothing rare in the query: the newest items of this term
                    scores.update(set().union(*(p[-self.RERANK :] for p in lists)))
                top = _best(scores, self.RERANK)
                continue
            scores.update(n for n in top if any(_holds(p, n) for p in lists))
        best = _best(scores, limit)
        floor = scores[best[0]] - self.SLACK if best else 0
        return [self._items[n][1] for n in best if scores[n] >= floor]

    RERANK = 24
    NEWEST = 16
    SLACK = 2

    def _lists(self, owners: Collection[str], group: Collection[str]) -> list[list[int]]:
        return [p for o in owners for t in group if (p := self._postings.get((o, t)))]


def _size(lists: list[list[int]]) -> int:
    return sum(len(p) for p in lists)


def _best(scores: Counter[int], limit: int) -> list[int]:
    """The highest scores, the newest item (the highest number) first among equals."""
    return [n for _, n in heapq.nlargest(limit, zip(scores.values(), scores.keys(), strict=True))]


def _holds(postings: list[int], number: int) -> bool:
    at = bisect.bisect_left(postings, number)
    return at < len(postings) and postings[at] == number


class MemoryCouncil:
    """A council record held in memory (replay, tests), indexed by sender and term."""

    def __init__(self, messages: list[CouncilMessage] | None = None) -> None:
        self._by_member: dict[str, list[CouncilMessage]] = {}
        self._index = RecordIndex()
        for message in messages or []:
            self.append(message)

    def messages_from(self, member: str) -> list[CouncilMessage]:
        return list(self._by_member.get(member, []))

    def append(self, message: CouncilMessage) -> None:
        self._by_member.setdefault(message.sender, []).append(message)
        self._index.add(canonical_text(message.sender), message.content, message)

    def search(
        self, senders: Collection[str], terms: Sequence[Collection[str]], limit: int
    ) -> list[CouncilMessage]:
        """Messages of ``senders`` (any of a member's names) sharing most of ``terms``."""
        owners = {canonical_text(s) for s in senders}
        found = self._index.search(owners, terms, limit)
        return [m for m in found if isinstance(m, CouncilMessage)]

    def count_from(self, senders: Collection[str]) -> int:
        return sum(self._index.count(canonical_text(s)) for s in set(senders))

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_member.values())


class FileCouncil:
    """A council record in a JSONL file; picks up lines other processes appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._memory = MemoryCouncil()
        self._offset = 0
        self._lock = threading.Lock()
        self._writers = FileMutex(lock_path(path))

    def messages_from(self, member: str) -> list[CouncilMessage]:
        with self._lock:
            self._catch_up()
        return self._memory.messages_from(member)

    def search(
        self, senders: Collection[str], terms: Sequence[Collection[str]], limit: int
    ) -> list[CouncilMessage]:
        """Messages of ``senders`` sharing most of ``terms``, lines other processes wrote too."""
        with self._lock:
            self._catch_up()
            return self._memory.search(senders, terms, limit)

    def count_from(self, senders: Collection[str]) -> int:
        with self._lock:
            self._catch_up()
            return self._memory.count_from(senders)

    def append(self, message: CouncilMessage) -> None:
        # The record is read by every member and reviewer: no secret is written to it.
        row = redact_value(message.model_dump(by_alias=True))
        line = json.dumps(row, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # newline="\n": the record is the same bytes on Windows (no "\r\n" translation).
        with self._writers, self.path.open("a", encoding="utf-8", newline="\n") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        with self._lock:
            self._catch_up()

    def _catch_up(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]  # leave a half-written line for later
        for raw in complete.splitlines():
            self._load_line(raw)
        self._offset += len(complete)

    def _load_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            self._memory.append(CouncilMessage.model_validate_json(raw))
        except ValidationError as exc:
            log.warning(
                "skipping unreadable council record line", path=str(self.path), error=str(exc)
            )
