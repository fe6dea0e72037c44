"""Does a text try to instruct the model reading it? (prompt injection, tool poisoning)

Decided on the canonical text (:mod:`lingyi.text`) and on what it decodes to, since an
upstream that wants to instruct the model hides the words: base64 and URL-encoded runs,
``\\u`` escapes, HTML comments and leetspeak are decoded into variants, each canonicalised,
and the lexicon (``injection.toml``: en, zh, ja, fr) is matched on every variant. A strong
pattern flags on its own; weak ones add up; a match found only inside a quotation counts a quarter
(a page that explains injection quotes its example). The lexicon is data; this module only
decodes and scores.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import tomllib
import urllib.parse
from dataclasses import dataclass
from importlib import resources

from lingyi.text import canonical_text

THRESHOLD = 1.0
MAX_CHARS = 200_000  # a result is scanned up to here: the cost of one call stays bounded
MAX_RUNS = 64  # encoded runs decoded per text

_B64 = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{16,}={0,2}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|x([0-9A-Fa-f]{2})|U([0-9A-Fa-f]{8}))")
_COMMENT = re.compile(r"<!--(.*?)(?:-->|$)", re.S)
_LEET_WORD = re.compile(r"[a-z0-9@$!|+]*[a-z][a-z0-9@$!|+]*")
# A quotation: typographic quotes, or a string literal passed to a call (a test, an example).
_QUOTED = re.compile(
    r"「[^」]{0,200}」|『[^』]{0,200}』|“[^”]{0,200}”|«[^»]{0,200}»|\(\s*([\"'])[^\"'\n]{0,200}\1"
)
_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"}
_LEET_L = {**_LEET, "1": "l", "|": "l"}


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    weight: float
    group: str  # the lexicon's section: en, zh, ja, fr, hidden


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]+")


def _canonical_pattern(pattern: str) -> str:
    """The pattern's Chinese and Japanese words in canonical form (無視 is matched as 无视,
    as the text will be); the regex syntax around them is left as written."""
    return _CJK_RUN.sub(lambda m: canonical_text(m.group(0)), pattern)


@functools.cache
def lexicon() -> tuple[Pattern, ...]:
    raw = (resources.files(__package__) / "injection.toml").read_text(encoding="utf-8")
    weights = {"strong": 1.0, "weak": 0.5}
    return tuple(
        Pattern(re.compile(_canonical_pattern(p), re.S), weights[tier], group)  # casefolded
        for group, tiers in tomllib.loads(raw).items()
        for tier, patterns in tiers.items()
        for p in patterns
    )


def _printable(text: str) -> bool:
    shown = sum(c.isprintable() or c.isspace() for c in text)
    return len(text) >= 4 and shown >= 0.9 * len(text)


def _b64(run: str) -> str | None:
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text if _printable(text) else None


def _unescaped(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = int(next(g for g in m.groups() if g), 16)
        return chr(code) if code < 0x110000 else m.group(0)

    return _ESCAPE.sub(one, text)


def _leet(text: str, table: dict[str, str]) -> str | None:
    """``text`` with its leetspeak words read back (``1gn0r3`` → ``ignore``): a word counts when
    the table turns it into letters only (a SHA does not); None when fewer than two words
    needed two swaps or more (no reading worth a second scan)."""
    read = 0

    def word(m: re.Match[str]) -> str:
        nonlocal read
        w = m.group(0)
        if not any(c in table for c in w):
            return w
        back = "".join(table.get(c, c) for c in w)
        if not back.isalpha():
            return w
        read += sum(c in table for c in w) >= 2  # v0, ipv4, md5: one swap is not leetspeak
        return back

    out = _LEET_WORD.sub(word, text)
    return out if read >= 2 else None


def decoded(text: str) -> list[str]:
    """What ``text`` hides: its decoded base64 runs, URL-decoding, escapes, HTML comments."""
    found = [t for run in _B64.findall(text)[:MAX_RUNS] if (t := _b64(run))]
    if _PERCENT.search(text):
        once = urllib.parse.unquote_plus(text)
        found += [once, urllib.parse.unquote_plus(once)]
    if _ESCAPE.search(text):
        found.append(_unescaped(text))
    found += _COMMENT.findall(text)[:MAX_RUNS]
    return [t for t in dict.fromkeys(found) if t and t != text]


def variants(text: str) -> tuple[list[str], list[str]]:
    """The canonical text and its leetspeak readings; and the canonical decoded variants
    (one level of nesting: base64 inside a URL-encoded run is found)."""
    canon = canonical_text(text[:MAX_CHARS])
    plain = [canon, *(r for t in (_LEET, _LEET_L) if (r := _leet(canon, t)) is not None)]
    hidden: list[str] = []
    for inner in decoded(text[:MAX_CHARS]):
        hidden.append(canonical_text(inner))
        hidden += [canonical_text(t) for t in decoded(inner)]
    return list(dict.fromkeys(plain)), [h for h in dict.fromkeys(hidden) if h not in plain]


def findings(text: str) -> dict[str, float]:
    """Each lexicon pattern that matches a variant, with its weight; a quarter when it matches
    only inside a quotation (a page that explains injection quotes its example)."""
    plain, hidden = variants(text)
    every = plain + hidden
    unquoted = [_QUOTED.sub(" ", v) for v in every]
    quoted = [v for v, u in zip(every, unquoted, strict=True) if u != v]
    found: dict[str, float] = {}
    for p in lexicon():
        if any(p.regex.search(v) for v in unquoted):
            found[p.regex.pattern] = p.weight
        elif any(p.regex.search(v) for v in quoted):
            found[p.regex.pattern] = p.weight / 4
    return found


def score(text: str) -> float:
    return sum(findings(text).values())


def instructs(text: str) -> bool:
    """Whether ``text`` tries to give the model instructions."""
    return bool(text.strip()) and score(text) >= THRESHOLD
