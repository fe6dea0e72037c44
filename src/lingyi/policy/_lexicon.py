"""Lexicons: the vocabularies checks match on, as data files beside the policies.

A check parameter typed :data:`LexiconRef` names a TOML file relative to the validators
folder (``lexicons/domains.toml``). The file is loaded and validated with the policies, counts
in the policy version and is watched for changes like a policy file, so adding a term is a
data edit. Its format::

    description = "what the vocabulary is for"
    [groups]
    "儒" = ["儒家", "Confucian*"]          # a group: a list of terms
    [groups.lookalikes]                   # or a table of lists, merged into one group
    en = ["zen mode", "kung fu panda"]

Terms are matched in canonical form (see :mod:`lingyi.text`), so a term may be written in
any script or width.
"""

from __future__ import annotations

import tomllib
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from lingyi.errors import PolicyError
from lingyi.text import TermMatcher, canonical_text


class _LexiconMarker:
    """Marks a check parameter whose value is the path of a lexicon file."""


LEXICON = _LexiconMarker()
LexiconRef = Annotated[str, LEXICON]


class _LexiconFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    groups: dict[str, list[str] | dict[str, list[str]]]


class Lexicon(BaseModel):
    """A validated vocabulary: named groups of terms, with one automaton over all of them."""

    path: str
    description: str = ""
    groups: dict[str, tuple[str, ...]]

    @cached_property
    def matcher(self) -> TermMatcher:
        """The automaton over every term, built on first use; a plain attribute afterwards
        (checks read it on every call, and a private attribute is a slow lookup)."""
        return TermMatcher(self.groups)

    def terms(self, group: str) -> tuple[str, ...]:
        """A group's terms in canonical form (empty when the file has no such group)."""
        return tuple(canonical_text(t) for t in self.groups.get(group, ()))


def _flat(groups: dict[str, list[str] | dict[str, list[str]]]) -> dict[str, tuple[str, ...]]:
    return {
        name: tuple(v for part in value.values() for v in part)
        if isinstance(value, dict)
        else tuple(value)
        for name, value in groups.items()
    }


def lexicon_path(folder: Path, ref: str, owner: str, key: str) -> Path:
    """The file a reference names, kept inside the validators folder."""
    parts = PurePosixPath(ref).parts
    if not ref or PurePosixPath(ref).is_absolute() or ".." in parts or "\\" in ref:
        raise PolicyError(owner, key, f"lexicon {ref!r} must be a relative path inside {folder}")
    return folder.joinpath(*parts)


def parse_toml(raw: bytes) -> dict[str, Any]:
    """The TOML document in ``raw`` as ``Path.read_text`` would give it: UTF-8, universal
    newlines (a policy saved on Windows parses with its multi-line strings free of ``\\r``)."""
    return tomllib.loads(raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n"))


def load_lexicon(path: Path) -> Lexicon:
    """Read and validate one lexicon file (errors name the file and the key)."""
    try:
        data: dict[str, Any] = parse_toml(path.read_bytes())
    except FileNotFoundError as exc:
        raise PolicyError(str(path), "-", "lexicon file not found") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(str(path), "-", f"cannot read lexicon: {exc}") from exc
    try:
        raw = _LexiconFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "-"
        raise PolicyError(
            str(path),
            key,
            "expected a list of terms or a table of lists" if "groups" in key else err["msg"],
        ) from exc
    return Lexicon(path=str(path), description=raw.description, groups=_flat(raw.groups))


def lexicon_fields(params: BaseModel) -> list[tuple[str, str]]:
    """(field name, reference) of every lexicon parameter of a check's parameters."""
    return [
        (name, str(getattr(params, name)))
        for name, info in type(params).model_fields.items()
        if LEXICON in info.metadata and getattr(params, name)
    ]
