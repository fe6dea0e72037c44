"""A knowledge-base file: its front matter, its body, and what is wrong with it.

Each ``*.md`` file carries a small front matter block (``key: value`` lines between ``---``
lines: ``id``, ``title``, ``domain``, ``tags: [a, b]``) followed by the body. A file that
cannot be indexed becomes a ``KBProblem`` with the file and the line, never an exception.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from lingyi.paths import PathOutsideRoots, resolve_inside

MAX_FILE_BYTES = 1_000_000  # a knowledge article is short; anything bigger is a mistake

_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")
_ID_RE = re.compile(r"^kb:[A-Za-z0-9][A-Za-z0-9_.-]*$")
_REQUIRED = ("id", "title", "domain")


class KBDoc(BaseModel):
    """One indexed article; ``path`` is relative to the knowledge-base folder."""

    id: str
    title: str
    domain: str
    tags: list[str]
    body: str
    path: str


class KBProblem(BaseModel):
    """A file that could not be indexed; ``line`` 0 means the file as a whole."""

    file: str
    line: int
    message: str


@dataclass(frozen=True)
class Parsed:
    doc: KBDoc
    id_line: int  # kept so a duplicate id can be reported where it is written


def load_file(root: Path, rel: str, domains: Sequence[str] | None) -> Parsed | KBProblem:
    """Read and parse ``root/rel``: a symlink must stay inside ``root``, the file is UTF-8.

    The folders between ``root`` and the file are real folders (the scan and the watcher
    only pass such paths), so only the file itself can be a link to resolve.
    """
    path = os.path.join(root, rel)
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            real = resolve_inside(path, [root])
            st = os.stat(real)
    except PathOutsideRoots:
        return KBProblem(file=rel, line=0, message="symlink resolves outside the folder")
    except OSError:
        return KBProblem(file=rel, line=0, message="not a regular file")
    if not stat.S_ISREG(st.st_mode):
        return KBProblem(file=rel, line=0, message="not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        return KBProblem(file=rel, line=0, message=f"larger than {MAX_FILE_BYTES} bytes")
    try:
        # Bytes, then one decode: a text-mode file costs more than the parse, and its
        # newline translation changes nothing here (lines are split on \r\n, \r and \n).
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return KBProblem(file=rel, line=0, message=f"cannot read: {exc}")
    return parse_document(text, rel, domains)


def parse_document(text: str, path: str, domains: Sequence[str] | None) -> Parsed | KBProblem:
    """Parse one Markdown file with front matter, or say what is wrong and on which line."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return KBProblem(file=path, line=1, message="missing front matter: first line must be ---")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        return KBProblem(file=path, line=1, message="front matter is not closed by a --- line")
    fields = _parse_fields(lines[1:end], path)
    if isinstance(fields, KBProblem):
        return fields
    body = "\n".join(lines[end + 1 :]).strip()
    return _build_doc(fields, body, path, domains)


def _parse_fields(lines: list[str], path: str) -> dict[str, tuple[str, int]] | KBProblem:
    """``key: value`` lines into ``{key: (raw value, line number)}``."""
    fields: dict[str, tuple[str, int]] = {}
    for lineno, line in enumerate(lines, start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _KEY_RE.match(line.strip())
        if m is None:
            return KBProblem(file=path, line=lineno, message=f"expected 'key: value': {line!r}")
        key = m.group(1).lower()
        if key in fields:
            return KBProblem(file=path, line=lineno, message=f"duplicate key {key!r}")
        fields[key] = (m.group(2).strip(), lineno)
    return fields


def _build_doc(
    fields: dict[str, tuple[str, int]], body: str, path: str, domains: Sequence[str] | None
) -> Parsed | KBProblem:
    for key in _REQUIRED:
        if not _unquote(fields.get(key, ("", 0))[0]):
            return KBProblem(file=path, line=1, message=f"front matter has no {key!r}")
    doc_id, id_line = _unquote(fields["id"][0]), fields["id"][1]
    if not _ID_RE.match(doc_id):
        msg = f"id {doc_id!r} must look like kb:<name> (letters, digits, - _ .)"
        return KBProblem(file=path, line=id_line, message=msg)
    domain, domain_line = _unquote(fields["domain"][0]), fields["domain"][1]
    if domains is not None and domain not in domains:
        msg = f"unknown domain {domain!r}; expected one of {' '.join(domains)}"
        return KBProblem(file=path, line=domain_line, message=msg)
    tags = _parse_tags(*fields.get("tags", ("[]", 1)), path)
    if isinstance(tags, KBProblem):
        return tags
    title = _unquote(fields["title"][0])
    doc = KBDoc(id=doc_id, title=title, domain=domain, tags=tags, body=body, path=path)
    return Parsed(doc=doc, id_line=id_line)


def _parse_tags(raw: str, lineno: int, path: str) -> list[str] | KBProblem:
    if not (raw.startswith("[") and raw.endswith("]")):
        return KBProblem(file=path, line=lineno, message="tags must be a list like [a, b]")
    items = (_unquote(item) for item in raw[1:-1].split(","))
    return [item for item in items if item]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value
