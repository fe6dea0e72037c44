"""The data backend for 灵研 (LingResearch): the real work behind ``access_data_source`` and
``analyze_data``.

A ``DataRegistry`` holds named data sources (local CSV/JSON/JSONL files kept inside the data
roots, or HTTP endpoints) and does two things with them: ``access`` checks that a source is
reachable and shows its shape, ``analyze`` computes descriptive statistics. Both return
pydantic models that turn into ``Evidence``, so a later claim such as "variant B is more
accurate than A" can be checked against an analysis that was really run.

There is no guard logic here: the constraint layer decides whether a call may run, this
module only runs it. Only the standard library computes the statistics.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lingyi._logging import get_logger
from lingyi.errors import BackendError
from lingyi.models import Evidence
from lingyi.paths import PathOutsideRoots, resolve_inside

if TYPE_CHECKING:  # the HTTP client loads when an http source is first fetched
    import httpx

log = get_logger()

Format = Literal["csv", "json", "jsonl"]
Kind = Literal["file", "http"]
Row = dict[str, Any]

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "defaults" / "data"
SAMPLE_ROWS = 3
_MISSING_GROUP = "(missing)"
_SUMMARY_GROUPS = 6  # keep the summary one readable line even for many groups
_EXTENSIONS: dict[str, Format] = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
_CONTENT_TYPES: dict[str, Format] = {
    "text/csv": "csv",
    "application/json": "json",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
}
_DEFAULT_DESCRIPTIONS = {
    "experiment_logs": "A/B experiment runs: variant, accuracy, latency_ms, date",
    "dataset_v3_labels": "dataset v3 annotation labels with annotator and confidence",
    "council_activity": "weekly council messages and rejections per member",
}


def _format_from_suffix(location: str) -> Format | None:
    return _EXTENSIONS.get(PurePosixPath(location).suffix.lower())


class DataSource(BaseModel):
    """A named data set: a file inside the data roots or an HTTP(S) endpoint."""

    # A typo in a deployment config should fail loudly, not be silently dropped.
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Kind
    path: str | None = None
    url: str | None = None
    format: Format | None = None
    description: str = ""

    @model_validator(mode="after")
    def _check_location(self) -> Self:
        if self.kind == "file" and not self.path:
            raise ValueError("a file data source needs 'path'")
        if self.kind == "http":
            _check_url(self.url)
        if self.format is None:
            location = self.path if self.kind == "file" else urlsplit(self.url or "").path
            self.format = _format_from_suffix(location or "")
        return self


def _check_url(url: str | None) -> None:
    if not url:
        raise ValueError("an http data source needs 'url'")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"url must be an http(s) URL with a host, got {url!r}")


class ColumnStats(BaseModel):
    """Descriptive statistics of one column; numeric and categorical fields are exclusive."""

    kind: Literal["numeric", "categorical"]
    count: int
    missing: int = 0
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    p25: float | None = None
    median: float | None = None
    p75: float | None = None
    max: float | None = None
    unique: int | None = None
    top: str | None = None
    top_count: int | None = None


class AccessResult(BaseModel):
    """Whether a source can be read, and its shape when it can."""

    name: str
    kind: Kind
    available: bool
    rows: int | None = None
    columns: list[str] = Field(default_factory=list)
    sample: list[Row] = Field(default_factory=list)
    error: str | None = None
    url: str | None = None

    def to_evidence(self) -> Evidence:
        return Evidence(
            id=f"data:{self.name}", title=self.name, snippet=self._snippet(), url=self.url
        )

    def _snippet(self) -> str:
        if self.rows is not None:
            return f"{self.rows} rows, columns: {', '.join(self.columns)}"
        state = "available" if self.available else "unavailable"
        return f"{state}: {self.error}" if self.error else state


class Analysis(BaseModel):
    """The result of ``DataRegistry.analyze``: per-column and optional per-group stats."""

    id: str
    source: str
    rows: int
    columns: dict[str, ColumnStats]
    group_by: str | None = None
    groups: dict[str, dict[str, ColumnStats]] | None = None
    summary: str
    url: str | None = None

    def to_evidence(self) -> Evidence:
        return Evidence(
            id=self.id, title=f"analysis of {self.source}", snippet=self.summary, url=self.url
        )


@dataclass(frozen=True)
class _Table:
    columns: list[str]
    rows: list[Row] = field(default_factory=list)


@dataclass(frozen=True)
class _Fetched:
    ok: bool
    text: str | None = None
    content_type: str = ""
    error: str | None = None


class _BodyRefused(Exception):
    """An HTTP body was cut off; ``reachable`` says whether the source still counts."""

    def __init__(self, message: str, *, reachable: bool) -> None:
        super().__init__(message)
        self.reachable = reachable


class DataRegistry:
    """Named data sources, confined to the data roots, with access and analysis."""

    def __init__(
        self,
        sources: Mapping[str, DataSource],
        roots: Sequence[Path],
        *,
        http_timeout: float = 2.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._sources = dict(sources)
        self._roots = [Path(root) for root in roots]
        self._http_timeout = http_timeout
        self._max_bytes = max_bytes

    @classmethod
    def default(cls, *, http_timeout: float = 2.0, max_bytes: int = DEFAULT_MAX_BYTES) -> Self:
        """The registry of the sample data sets shipped with the package."""
        return cls(
            default_sources(), [DEFAULT_DATA_DIR], http_timeout=http_timeout, max_bytes=max_bytes
        )

    def names(self) -> list[str]:
        return sorted(self._sources)

    def get(self, name: str) -> DataSource:
        try:
            return self._sources[name]
        except KeyError:
            known = ", ".join(self.names()) or "(none)"
            raise BackendError(f"unknown data source {name!r}; registered: {known}") from None

    def access(self, name: str) -> AccessResult:
        """Check one source. Unreachable or unparsable data is reported, not raised."""
        source = self.get(name)
        if source.kind == "http":
            return self._access_http(name, source)
        return self._access_file(name, source)

    def analyze(
        self,
        name: str,
        *,
        columns: Sequence[str] | None = None,
        group_by: str | None = None,
    ) -> Analysis:
        """Descriptive stats of ``columns`` (all when None or empty), optionally per group."""
        source = self.get(name)
        table = self._load(name, source)
        chosen = _choose_columns(table.columns, columns, group_by)
        stats = {col: _column_stats(table.rows, col) for col in chosen}
        groups = None if group_by is None else _group_stats(table.rows, group_by, stats)
        analysis = Analysis(
            id=f"an-{uuid.uuid4().hex[:8]}",
            source=name,
            rows=len(table.rows),
            columns=stats,
            group_by=group_by,
            groups=groups,
            summary=_summary(name, len(table.rows), stats, groups, group_by),
            url=source.url,
        )
        log.info("data.analyzed", source=name, analysis=analysis.id, rows=analysis.rows)
        return analysis

    # -- files -------------------------------------------------------------------------

    def _resolve(self, source: DataSource) -> Path:
        try:
            return resolve_inside(source.path or "", self._roots)
        except PathOutsideRoots as exc:
            raise BackendError(f"data source {source.name!r} refused: {exc}") from None

    def _read_bytes(self, path: Path) -> bytes:
        """The file's bytes; OSError when it cannot be read, BackendError when too big."""
        # stat first to refuse quickly; the bounded read still holds if the file grows.
        if path.stat().st_size > self._max_bytes:
            raise BackendError(f"{path.name} is larger than the {self._max_bytes}-byte limit")
        with path.open("rb") as handle:
            data = handle.read(self._max_bytes + 1)
        if len(data) > self._max_bytes:
            raise BackendError(f"{path.name} is larger than the {self._max_bytes}-byte limit")
        return data

    def _access_file(self, name: str, source: DataSource) -> AccessResult:
        path = self._resolve(source)
        try:
            data = self._read_bytes(path)
        except OSError as exc:
            error = f"{source.path}: {exc.strerror or exc}"
            return AccessResult(name=name, kind="file", available=False, error=error)
        try:
            table = _parse(_decode(data, path.name), _require_format(source, None), path.name)
        except BackendError as exc:
            return AccessResult(name=name, kind="file", available=True, error=str(exc))
        return _access_ok(name, source, table)

    def _load_file(self, name: str, source: DataSource) -> _Table:
        path = self._resolve(source)
        try:
            data = self._read_bytes(path)
        except OSError as exc:
            raise BackendError(f"data source {name!r}: {source.path}: {exc.strerror}") from None
        return _parse(_decode(data, path.name), _require_format(source, None), path.name)

    # -- http --------------------------------------------------------------------------

    def _fetch(self, url: str) -> _Fetched:
        # httpx timeouts are per phase; the deadline also bounds a server that trickles bytes.
        import httpx

        deadline = time.monotonic() + self._http_timeout
        try:
            with (
                httpx.Client(timeout=self._http_timeout) as client,
                client.stream("GET", url) as response,
            ):
                if not response.is_success:
                    return _Fetched(ok=False, error=f"GET {url}: HTTP {response.status_code}")
                body = self._read_body(response, deadline)
                text = body.decode(response.charset_encoding or "utf-8", errors="replace")
                return _Fetched(True, text, response.headers.get("content-type", ""))
        except _BodyRefused as exc:
            return _Fetched(ok=exc.reachable, error=f"GET {url}: {exc}")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return _Fetched(ok=False, error=f"GET {url}: {type(exc).__name__}: {exc}")

    def _read_body(self, response: httpx.Response, deadline: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise _BodyRefused(f"body over the {self._max_bytes}-byte limit", reachable=True)
            if time.monotonic() > deadline:
                raise _BodyRefused(f"timed out after {self._http_timeout}s", reachable=False)
            chunks.append(chunk)
        return b"".join(chunks)

    def _access_http(self, name: str, source: DataSource) -> AccessResult:
        url = source.url or ""
        fetched = self._fetch(url)
        if not fetched.ok or fetched.text is None:
            log.warning("data.http_unavailable", source=name, error=fetched.error)
            return AccessResult(
                name=name, kind="http", available=fetched.ok, error=fetched.error, url=url
            )
        try:
            fmt = _require_format(source, fetched.content_type)
            table = _parse(fetched.text, fmt, url)
        except BackendError as exc:
            return AccessResult(name=name, kind="http", available=True, error=str(exc), url=url)
        return _access_ok(name, source, table)

    def _load(self, name: str, source: DataSource) -> _Table:
        if source.kind == "file":
            return self._load_file(name, source)
        fetched = self._fetch(source.url or "")
        if not fetched.ok or fetched.text is None:
            raise BackendError(f"data source {name!r} unavailable: {fetched.error}")
        fmt = _require_format(source, fetched.content_type)
        return _parse(fetched.text, fmt, source.url or "")


def default_sources() -> dict[str, DataSource]:
    """One file source per sample data set shipped in ``lingyi/defaults/data``."""
    sources: dict[str, DataSource] = {}
    for path in sorted(DEFAULT_DATA_DIR.iterdir()):
        if path.is_file() and path.suffix.lower() in _EXTENSIONS:
            description = _DEFAULT_DESCRIPTIONS.get(path.stem, "")
            sources[path.stem] = DataSource(
                name=path.stem, kind="file", path=path.name, description=description
            )
    return sources


def _access_ok(name: str, source: DataSource, table: _Table) -> AccessResult:
    return AccessResult(
        name=name,
        kind=source.kind,
        available=True,
        rows=len(table.rows),
        columns=table.columns,
        sample=table.rows[:SAMPLE_ROWS],
        url=source.url,
    )


# -- parsing ---------------------------------------------------------------------------


def _require_format(source: DataSource, content_type: str | None) -> Format:
    if source.format is not None:
        return source.format
    media = (content_type or "").split(";")[0].strip().lower()
    if media in _CONTENT_TYPES:
        return _CONTENT_TYPES[media]
    raise BackendError(f"cannot tell the format of {source.name!r}; set format: csv/json/jsonl")


def _decode(data: bytes, origin: str) -> str:
    try:
        return data.decode("utf-8-sig")  # -sig: spreadsheets often write a BOM
    except UnicodeDecodeError as exc:
        raise BackendError(f"{origin} is not UTF-8: {exc}") from None


def _parse(text: str, fmt: Format, origin: str) -> _Table:
    if fmt == "csv":
        return _parse_csv(text, origin)
    if fmt == "json":
        return _parse_json(text, origin)
    return _parse_jsonl(text, origin)


def _parse_csv(text: str, origin: str) -> _Table:
    reader = csv.DictReader(io.StringIO(text))
    rows: list[Row] = []
    try:
        for row in reader:
            # DictReader files surplus fields under the key None; that is a broken row.
            if None in row:
                raise BackendError(f"{origin}: line {reader.line_num}: more fields than header")
            rows.append(dict(row))
    except csv.Error as exc:
        raise BackendError(f"{origin}: line {reader.line_num}: {exc}") from None
    return _Table(list(reader.fieldnames or []), rows)


def _parse_json(text: str, origin: str) -> _Table:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BackendError(f"{origin}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, list):
        raise BackendError(f"{origin}: expected a JSON array of objects")
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise BackendError(f"{origin}: item {index} is not an object")
    return _Table(_union_keys(data), data)


def _parse_jsonl(text: str, origin: str) -> _Table:
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BackendError(f"{origin}: line {number}: invalid JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise BackendError(f"{origin}: line {number}: not a JSON object")
        rows.append(item)
    return _Table(_union_keys(rows), rows)


def _union_keys(rows: Iterable[Row]) -> list[str]:
    # JSON rows may differ in keys; keep first-seen order so output follows the data.
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


# -- statistics ------------------------------------------------------------------------


def _choose_columns(
    available: list[str], columns: Sequence[str] | None, group_by: str | None
) -> list[str]:
    wanted = list(dict.fromkeys(columns or available))
    unknown = [c for c in [*wanted, *([group_by] if group_by else [])] if c not in available]
    if unknown:
        shown = ", ".join(available) or "(none)"
        raise BackendError(f"unknown column(s) {', '.join(unknown)}; available: {shown}")
    return wanted


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _values(rows: Iterable[Row], column: str) -> list[Any]:
    return [row.get(column) for row in rows]


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):  # JSON true/false are labels, not 1/0
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _numbers(values: Iterable[Any]) -> list[float] | None:
    """All present values as floats, or None when any is not a finite number."""
    numbers: list[float] = []
    for value in values:
        number = _as_number(value)
        if number is None:
            return None
        numbers.append(number)
    return numbers


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _column_stats(rows: Sequence[Row], column: str) -> ColumnStats:
    values = _values(rows, column)
    present = [v for v in values if not _is_missing(v)]
    numbers = _numbers(present) if present else None
    missing = len(values) - len(present)
    if numbers is not None:
        return _numeric_stats(numbers, missing)
    return _categorical_stats([_label(v) for v in present], missing)


def _numeric_stats(numbers: list[float], missing: int = 0) -> ColumnStats:
    if not numbers:
        return ColumnStats(kind="numeric", count=0, missing=missing)
    ordered = sorted(numbers)
    # "inclusive" interpolates between data points like numpy/pandas' default percentiles.
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else []
    p25, _, p75 = quartiles or [ordered[0]] * 3
    return ColumnStats(
        kind="numeric",
        count=len(ordered),
        missing=missing,
        mean=statistics.fmean(ordered),
        std=statistics.stdev(ordered) if len(ordered) > 1 else None,
        min=ordered[0],
        p25=p25,
        median=statistics.median(ordered),
        p75=p75,
        max=ordered[-1],
    )


def _categorical_stats(labels: list[str], missing: int) -> ColumnStats:
    counts = Counter(labels)
    # most_common keeps first-seen order among ties, so the top value is deterministic.
    top, top_count = counts.most_common(1)[0] if counts else (None, None)
    return ColumnStats(
        kind="categorical",
        count=len(labels),
        missing=missing,
        unique=len(counts),
        top=top,
        top_count=top_count,
    )


def _group_stats(
    rows: Sequence[Row], group_by: str, stats: Mapping[str, ColumnStats]
) -> dict[str, dict[str, ColumnStats]]:
    numeric = [c for c, s in stats.items() if s.kind == "numeric" and c != group_by]
    buckets: dict[str, list[Row]] = {}
    for row in rows:
        value = row.get(group_by)
        key = _MISSING_GROUP if _is_missing(value) else _label(value)
        buckets.setdefault(key, []).append(row)
    return {key: _group_columns(buckets[key], numeric) for key in sorted(buckets)}


def _group_columns(rows: Sequence[Row], numeric: Sequence[str]) -> dict[str, ColumnStats]:
    result: dict[str, ColumnStats] = {}
    for column in numeric:
        present = [v for v in _values(rows, column) if not _is_missing(v)]
        # The column is numeric over the whole table, so every present value parses.
        result[column] = _numeric_stats(_numbers(present) or [], len(rows) - len(present))
    return result


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def _summary(
    name: str,
    rows: int,
    stats: Mapping[str, ColumnStats],
    groups: Mapping[str, Mapping[str, ColumnStats]] | None,
    group_by: str | None,
) -> str:
    head = f"{name}: {rows} rows"
    first = next((c for c, s in stats.items() if s.kind == "numeric" and c != group_by), None)
    if groups is not None and first is not None:
        parts = [f"{group_by} {g} {first} mean {_fmt(s[first].mean)}" for g, s in groups.items()]
        more = len(parts) - _SUMMARY_GROUPS
        text = "; ".join(parts[:_SUMMARY_GROUPS]) + (f"; … (+{more} groups)" if more > 0 else "")
        line = f"{head}; {text}"
    elif first is not None:
        s = stats[first]
        line = f"{head}; {first} mean {_fmt(s.mean)} (min {_fmt(s.min)}, max {_fmt(s.max)})"
    elif stats:
        column, s = next(iter(stats.items()))
        line = f"{head}; {column} top {s.top} ({s.top_count} of {s.count})"
    else:
        line = head
    return " ".join(line.split())  # labels may hold newlines; the summary is one line
