"""URLs in free text, and the one normal form in which two URLs are compared.

A URL that a tool returned counts as returned whatever the case of its scheme and host, a
``www.`` in front, a default port, a trailing slash or a fragment; its path and query still
have to be the same. Extraction runs on the canonical text's ``cased`` form (NFKC has already
turned full-width ``：／`` into ``:/``), so ``HTTPS://`` and full-width punctuation are found.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_URL = re.compile(r"https?://[^\s<>\"'`，。、；！？）】」』《》\]\[]+", re.IGNORECASE)
_TRAILING = ".,;:!?)}'\"*_~"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def extract_urls(text: str) -> list[str]:
    """URLs in ``text`` as written (trailing punctuation and unbalanced brackets dropped)."""
    return [u for m in _URL.finditer(text) if (u := _trim(m.group(0)))]


def _trim(url: str) -> str:
    url = _unbalanced_close(url)
    while url and url[-1] in _TRAILING:
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break  # a balanced (…) belongs to the URL (wiki-style paths)
        url = url[:-1]
    return url


def _unbalanced_close(url: str) -> str:
    """Cut at the first ``)`` that closes nothing: the end of a Markdown link's target
    (``[t](https://x/a)和…``), not part of the URL; a balanced ``(…)`` stays (wiki paths)."""
    depth = 0
    for i, char in enumerate(url):
        depth += char == "("
        if char == ")":
            if depth == 0:
                return url[:i]
            depth -= 1
    return url


def normalize_url(url: str) -> str:
    """The form two URLs are compared in: case of scheme and host, www., port, slash, fragment."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower().removeprefix("www.")
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))
