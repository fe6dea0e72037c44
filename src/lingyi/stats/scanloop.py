"""The hot loop of ``lingyi stats --full``: one byte range of the log through a windowed pass.

Nearly every line of a big log is a verification outside the periods asked for, which the
pass verifies on its raw bytes without parsing it (:meth:`lingyi.log.ChainVerifier.skim`).
Here that path runs inline, in one function whose names are bound locally, with the link
kept as bytes: on a 1.4 KB line the C calls the checks need (the tail, three scans, the
hash) cost about 7 µs, and the Python around them (a generator, five method calls, the
report's counters, the link encoded again for every line) cost about 3 µs more.

Every other line, and every line the inline path does not accept whole, goes to
:meth:`~lingyi.stats.aggregate.WindowsPass.feed_raw` after the chain has been told of the
lines skimmed so far (:meth:`~lingyi.log.ChainVerifier.skimmed_plain`), so the result is the
one that feeding every line to ``feed_raw`` gives (a test pins it, on damaged logs too).
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable, Iterable

from lingyi.log.chain import _HASH_TAIL, _KEY_ID, _KIND, _PREV, _TAIL_RE, _VERIFICATION
from lingyi.stats.aggregate import _CURRENT, WindowsPass

_HASH_AT = len(_HASH_TAIL)  # the hash's group starts this far after the hashed bytes end

# The tail (_TAIL_RE) of a line with the writer's own timestamp format and the current schema,
# in one match instead of a match and five tests. Its groups are _TAIL_RE's (ts, v, hash), and
# a line it matches, _TAIL_RE matches at the same place with the same groups (a ``"`` cannot
# sit inside the timestamp, so the tail starts at the one ``,"ts":"`` that reaches the end);
# a line it does not match gets _TAIL_RE itself.
_WRITTEN_TAIL = re.compile(
    rb',"ts":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"(?:,"type":"[a-z_]{1,40}")?,"v":('
    + re.escape(_CURRENT)
    + rb'),"hash":"([0-9a-f]{64})"\}\r?\n?\Z'
)


def feed_range(
    found: WindowsPass,
    lines: Iterable[bytes],
    start: int,
    end: int | None,
    report: Callable[[int], None] | None = None,
    every: int = 4 << 20,
) -> int:
    """Feed ``lines`` (a file's, from byte ``start``) up to the first line that starts at or
    after ``end`` (None: to the end); returns the physical lines read. ``report(bytes done)``
    is called about every ``every`` bytes.

    The inline path is :meth:`ChainVerifier.skim`'s plain path, check for check: a line
    with the writer's tail and schema, its timestamp in the writer's format and outside
    every window, one ``"prev":`` holding the link, no ``"kind":`` but one of a verification,
    no ``"key_id":``, and the sha256 of its bytes before ``,"hash":`` (closed with ``}``)
    equal to the hash it carries. It is kept in one function on purpose: each call or
    attribute lookup it saves is paid a million times.
    """
    chain, written, sha256 = found.chain, _WRITTEN_TAIL.search, hashlib.sha256
    first, last = found.first, found.last
    stop = sys.maxsize if end is None else end
    offset, lineno, pending, due = start, 0, 0, start + every
    prev = chain.plain_prev()
    link = None if prev is None else b'"' + prev + b'"'
    for raw in lines:
        if offset >= stop:
            break
        lineno += 1
        size = len(raw)
        offset += size
        if offset >= due and report is not None:
            report(offset - start)
            due = offset + every
        tail = written(raw, size - 240)
        if (
            link is not None
            and tail is not None
            and not first <= tail[1] < last
            and (at := raw.find(_PREV)) >= 0
            and raw.startswith(link, at + 7)
            and raw.find(_PREV, at + 7) < 0
            and (
                (kind := raw.find(_KIND)) < 0
                or (raw.startswith(_VERIFICATION, kind + 8) and raw.find(_KIND, kind + 8) < 0)
            )
            and raw.find(_KEY_ID) < 0
        ):
            digest = sha256(raw[: tail.start(3) - _HASH_AT])
            digest.update(b"}")
            stored = digest.hexdigest().encode()
            if stored == tail[3]:
                pending += 1
                prev, link = stored, b'"' + stored + b'"'
                continue
        if pending and prev is not None:
            chain.skimmed_plain(pending, prev)
            found.skimmed += pending
            pending = 0
        if raw[0] == 0x7B or raw.strip():  # "{": a record's line, not copied to be stripped
            found.feed_tail(lineno, raw, tail or _TAIL_RE.search(raw, size - 240))
            prev = chain.plain_prev()
            link = None if prev is None else b'"' + prev + b'"'
    if pending and prev is not None:
        chain.skimmed_plain(pending, prev)
        found.skimmed += pending
    return lineno
