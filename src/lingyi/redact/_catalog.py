"""The catalogue of secret and personal-data formats and secret argument keys (``formats.toml``).

Formats are data: each entry names its kind, the cheap hints that must be present for it to
run, and its regex. A bad entry (unknown field, a regex that does not compile, a check that
does not exist, two entries with one id) is refused when the catalogue is loaded, with the
file, the entry and the field, never at the first record that would have needed it.

The packaged catalogue is the exception for regexes: its 75 patterns are compiled on first use
(a format runs only when its hints occur, so a one-shot ``lingyi verify`` compiles none or a
few instead of all, about 25 ms), and a test compiles every one of them instead.
"""

from __future__ import annotations

import base64
import binascii
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lingyi.errors import ConfigError

_KIND = re.compile(r"^[a-z0-9_]{1,32}$")
# What separates the words of a key (client_secret, x-api-key, api.key): dropped to compare.
KEY_SEPARATORS = str.maketrans("", "", "-_. ")
# The separators a key's words may be written with in a record (clientsecret: camelCase).
_SEPARATORS = ("_", "-", ".", "", " ")


def _base64_credentials(value: str) -> bool:
    """Basic credentials are base64 of ``user:password``; prose after "basic" is not."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        text = decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in text and text.isprintable()


def _digits(value: str) -> str:
    """A number as written (spaces, dashes, dots, brackets), digits and a final X only."""
    return re.sub(r"[^0-9Xx+]", "", value).upper()


def _cn_resident_id(value: str) -> bool:
    from stdnum.cn import ric  # imported on first use: most records hold no 18-digit number

    return bool(ric.is_valid(_digits(value)))


def _us_ssn(value: str) -> bool:
    from stdnum.us import ssn

    return bool(ssn.is_valid(_digits(value)))


# A card brand's leading digits and the lengths it issues (ISO/IEC 7812 ranges of the brands
# that cover most cards: Visa, Mastercard, Amex, Discover, JCB, UnionPay, Diners).
_CARD_BRANDS = re.compile(
    r"4[0-9]{12}(?:[0-9]{3}){0,2}|(?:5[1-5][0-9]{2}|222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]"
    r"|2720)[0-9]{12}|3[47][0-9]{13}|(?:6011|65[0-9]{2}|64[4-9][0-9])[0-9]{12,15}"
    r"|35(?:2[89]|[3-8][0-9])[0-9]{12,15}|62[0-9]{14,17}|3(?:0[0-5]|[68][0-9])[0-9]{11,16}"
)


def _iban(value: str) -> bool:
    from stdnum import iban

    return bool(iban.is_valid(value))


def _card(value: str) -> bool:
    from stdnum import luhn

    digits = _digits(value)
    return bool(_CARD_BRANDS.fullmatch(digits)) and bool(luhn.is_valid(digits))


def _phone(region: str | None) -> Callable[[str], bool]:
    def valid(value: str) -> bool:
        import phonenumbers

        digits = _digits(value)
        if digits.startswith("00"):  # the international prefix of most of the world
            digits = "+" + digits[2:]
        try:
            number = phonenumbers.parse(digits, region)
        except phonenumbers.NumberParseException:
            return False
        return bool(phonenumbers.is_valid_number(number))

    return valid


# The named tests a format's `check` may ask for (code, because they decode or validate the
# value; the validating is python-stdnum's and phonenumbers', not ours).
CHECKS: dict[str, Callable[[str], bool]] = {
    "base64_credentials": _base64_credentials,
    "cn_resident_id": _cn_resident_id,
    "us_ssn": _us_ssn,
    "card": _card,
    "iban": _iban,
    "phone_cn": _phone("CN"),
    "phone_us": _phone("US"),
    "phone_intl": _phone(None),
}


class _FormatEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str | None = None
    title: str
    source: str
    hints: list[str] = Field(min_length=1)
    pattern: str
    stopwords: list[str] = []
    check: str | None = None
    trim: str = ""
    confirm: bool = False
    personal: bool = False

    @field_validator("id", "kind")
    @classmethod
    def _kind_like(cls, value: str | None) -> str | None:
        if value is not None and not _KIND.match(value):
            raise ValueError("must be 1-32 characters of a-z, 0-9 and _")
        return value

    @field_validator("hints")
    @classmethod
    def _lower_hints(cls, value: list[str]) -> list[str]:
        if any(not h or h != h.lower() for h in value):
            raise ValueError(
                "hints must be non-empty and lower case (they are matched on lower-cased text)"
            )
        return value

    @field_validator("check")
    @classmethod
    def _known_check(cls, value: str | None) -> str | None:
        if value is not None and value not in CHECKS:
            raise ValueError(f"unknown check {value!r}; valid checks: {', '.join(CHECKS)}")
        return value


class _KeysEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    names: list[str] = []
    suffixes: list[str] = []

    @field_validator("names", "suffixes")
    @classmethod
    def _words(cls, value: list[str]) -> list[str]:
        if bad := [w for w in value if not _KIND.match(w)]:
            raise ValueError(f"{bad[0]!r}: write key words in a-z, 0-9, with _ between words")
        return value


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    formats: list[_FormatEntry] = Field(min_length=1)
    keys: _KeysEntry = _KeysEntry()


@dataclass(frozen=True)
class SecretFormat:
    """One secret format: its marker kind, the hints that gate it, its compiled pattern."""

    id: str
    kind: str
    title: str
    source: str
    hints: tuple[str, ...]
    pattern: str
    stopwords: frozenset[str]
    check: Callable[[str], bool] | None
    trim: str = ""
    confirm: bool = False
    personal: bool = False  # personal data ([redact] personal, keep), not a secret

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """The compiled pattern, on first use (a user's catalogue was compiled at load)."""
        return re.compile(self.pattern)

    def accepts(self, value: str) -> bool:
        """Is this matched value a secret (not a stopword, and passing the format's check)?"""
        if value.lower().rstrip(".,;:!?") in self.stopwords:
            return False
        return self.check is None or self.check(value)


@dataclass(frozen=True)
class KeyRules:
    """Argument keys whose values are secrets, compared without case or separators."""

    words: tuple[str, ...]  # as written in the catalogue, "_" between words
    names: frozenset[str]
    suffixes: tuple[str, ...]

    @classmethod
    def of(cls, names: list[str], suffixes: list[str]) -> KeyRules:
        names_, suffixes_ = ([w.translate(KEY_SEPARATORS) for w in ws] for ws in (names, suffixes))
        return cls(tuple(names + suffixes), frozenset(names_), tuple(suffixes_))

    def is_secret(self, key: str) -> bool:
        bare = key.lower().translate(KEY_SEPARATORS)
        return bare in self.names or bare.endswith(self.suffixes)

    def hints(self) -> set[str]:
        """How such a key ends in a record's JSON text (``client_secret"``), every spelling."""
        return {f'{w.replace("_", sep)}"' for w in self.words for sep in _SEPARATORS}


@dataclass(frozen=True)
class Catalog:
    path: str
    formats: tuple[SecretFormat, ...]
    keys: KeyRules


def _compiled(path: str, index: int, entry: _FormatEntry, eager: bool) -> SecretFormat:
    found = _format(entry)
    try:
        if eager:
            found.regex  # noqa: B018 - compiled now so that a bad pattern names its entry
    except re.error as exc:
        raise ConfigError(f"{path}: formats[{index}] ({entry.id}).pattern: {exc}") from exc
    return found


def _format(entry: _FormatEntry) -> SecretFormat:
    return SecretFormat(
        id=entry.id,
        kind=entry.kind or entry.id,
        title=entry.title,
        source=entry.source,
        hints=tuple(entry.hints),
        pattern=entry.pattern,
        stopwords=frozenset(w.lower() for w in entry.stopwords),
        check=CHECKS[entry.check] if entry.check else None,
        trim=entry.trim,
        confirm=entry.confirm,
        personal=entry.personal,
    )


def _validated(path: str, data: dict[str, Any]) -> _CatalogFile:
    try:
        raw = _CatalogFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise ConfigError(f"{path}: {loc.lstrip('.') or '-'}: {err['msg']}") from exc
    seen: dict[str, int] = {}
    for index, entry in enumerate(raw.formats):
        if entry.id in seen:
            first = seen[entry.id]
            raise ConfigError(
                f"{path}: formats[{index}].id: {entry.id!r} is already formats[{first}].id"
            )
        seen[entry.id] = index
    return raw


def parse_catalog(text: str, path: str, *, eager: bool = True) -> Catalog:
    """The catalogue in ``text`` (TOML); errors name ``path``, the entry and the field.
    ``eager=False`` (the packaged catalogue only) compiles each regex on its first use."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    raw = _validated(path, data)
    formats = tuple(_compiled(path, i, e, eager) for i, e in enumerate(raw.formats))
    return Catalog(path, formats, KeyRules.of(raw.keys.names, raw.keys.suffixes))


def load_catalog(path: Path | None = None) -> Catalog:
    """The catalogue at ``path``, or the one packaged with lingyi (``formats.toml``)."""
    if path is None:
        source = resources.files(__package__) / "formats.toml"
        return parse_catalog(source.read_text(encoding="utf-8"), str(source), eager=False)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the secret formats: {exc}") from exc
    return parse_catalog(text, str(path))
