"""A cache of what the TOML parser made of each policy and lexicon file, so a start skips it.

Reading 14 TOML files with :mod:`tomllib` (pure Python) is about 30 ms of every ``lingyi
verify``; reading the same data back as JSON is about 1 ms. Only the parser's output is
cached, never a validated policy set: every model validation and every rule of the loader
runs on the data each time, so a cached start decides exactly as an uncached one, ``lingyi
policy check`` reports the same problems, and a change in lingyi's own code needs no
invalidation (the key is the file's content and the Python version, whose ``tomllib`` made it).

Each entry is keyed by the SHA-256 of the bytes read from the file now: a changed file is a
miss, never stale data. A cache file that is missing, unreadable, not JSON, of another format
or another Python is ignored (the files are parsed, and the cache rewritten); a cache folder
that cannot be written means parsing every time, never a failure.

Security: the cache is plain JSON, never pickle or code. Whoever can write it could still
hand the loader policy data of their choosing for a digest they know, so it lives in the
user's cache folder (``$XDG_CACHE_HOME/lingyi/policies``, else ``~/.cache/lingyi/policies``),
created private (0700), and on POSIX a cache file is used only when the current user owns it
and neither it nor its folder is writable by group or others (:mod:`lingyi._cachefile`);
otherwise it is ignored. Anyone who can write a folder the user owns can already change the
user's own start-up files. ``[policies] cache = false`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from lingyi._cachefile import read_private, user_cache, write_private

FORMAT = 1
_KEY = f"policies {FORMAT}|{sys.version}"  # tomllib is the stdlib's: it may change with Python


def cache_path(folder: Path) -> Path:
    """The cache file of one policy folder, in the user's cache."""
    key = hashlib.sha256(str(folder.expanduser().resolve()).encode()).hexdigest()[:16]
    return user_cache("policies", f"{key}.json")


class TomlCache:
    """Parsed TOML by content digest: read once at a load, written back if anything new."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, Any] = read_private(path, _KEY) if path is not None else {}
        self._stored = set(self._entries)  # what the cache file holds now
        self._used: set[str] = set()  # what this load read: all a rewrite keeps

    def parse(self, raw: bytes) -> dict[str, Any]:
        """The TOML document in ``raw`` (UTF-8); raises what tomllib and decoding raise.
        A cached document is shared, not copied: the loader only reads what it is given."""
        digest = hashlib.sha256(raw).hexdigest()
        found = self._entries.get(digest)
        if isinstance(found, dict):
            self._used.add(digest)
            return found
        data = tomllib.loads(_text(raw))
        if self.path is not None and _round_trips(data):  # dates and NaN stay uncached
            self._entries[digest] = data
            self._used.add(digest)
        return data

    def save(self) -> None:
        """Write the entries this load used, if they differ from the file's (a file parsed,
        or one edited or removed since)."""
        if self.path is None or self._used == self._stored:
            return
        kept = {d: self._entries[d] for d in sorted(self._used)}
        self._entries, self._stored = kept, set(kept)
        write_private(self.path, _KEY, kept)


def _text(raw: bytes) -> str:
    """The file's text as ``Path.read_text`` gives it: UTF-8, universal newlines (a policy
    saved on Windows parses as it always did, its multi-line strings without ``\\r``)."""
    return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _round_trips(data: dict[str, Any]) -> bool:
    """Does JSON give back exactly this data? (TOML dates and NaN do not.)"""
    try:
        back: Any = json.loads(json.dumps(data))
    except ValueError:
        return False
    return bool(back == data)
