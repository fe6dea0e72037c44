"""The report's words in one language, from the message catalog (``[report]`` in
``lingyi/messages/{zh,en}.toml``), so a wording changes, or a language is added, in data.
"""

from __future__ import annotations

from datetime import date

from lingyi.config import Config
from lingyi.errors import LingyiError
from lingyi.messages import LANGUAGES, text


class ReportError(LingyiError):
    """The report cannot be made as asked (e.g. a language it does not have)."""


def report_language(lang: str | None, config: Config) -> str:
    """``lang`` if given (``--lang``), else the config's language; refused if unknown."""
    chosen = lang or config.language
    if chosen not in LANGUAGES:
        raise ReportError(f"no report language {chosen!r}: use one of {', '.join(LANGUAGES)}")
    return chosen


class Labels:
    """``labels["summary"]`` is the catalog's ``report.summary`` in this language."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def __getitem__(self, name: str) -> str:
        return text(self.lang, f"report.{name}")

    def fmt(self, name: str, **values: object) -> str:
        """``report.<name>`` with its placeholders filled."""
        return text(self.lang, f"report.{name}", **values)

    def day(self, iso: str) -> str:
        """A local date as a chart and table label: weekday and month-day."""
        day = date.fromisoformat(iso)
        weekday = self[f"weekday_{day.weekday()}"]
        return text(self.lang, "report.day_label", weekday=weekday, date=f"{day:%m-%d}")
