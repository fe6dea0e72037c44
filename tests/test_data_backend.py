"""Tests for the 灵研 data backend: sources, access, analysis, confinement, real HTTP."""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from lingyi.backends.data import DEFAULT_MAX_BYTES, DataRegistry, DataSource
from lingyi.errors import BackendError

TINY_ROWS = [
    {"x": 1, "name": "a"},
    {"x": 2, "name": "b"},
    {"x": 3, "name": "a"},
    {"x": 10, "name": "c"},
]
TINY_CSV = "x,name\n1,a\n2,b\n3,a\n10,c\n"
GROUPED_CSV = "g,score,label\nA,1,x\nB,10,y\nA,3,x\nB,20,y\nB,30,z\n"
SLOW_SECONDS = 5.0


def _write_tiny(root: Path, fmt: str) -> str:
    """Write the tiny table in ``fmt`` under ``root`` and return its file name."""
    name = f"tiny.{fmt}"
    if fmt == "csv":
        text = TINY_CSV
    elif fmt == "json":
        text = json.dumps(TINY_ROWS)
    else:
        text = "".join(json.dumps(row) + "\n" for row in TINY_ROWS)
    (root / name).write_text(text, encoding="utf-8")
    return name


def _registry(
    root: Path, *sources: DataSource, http_timeout: float = 2.0, max_bytes: int = DEFAULT_MAX_BYTES
) -> DataRegistry:
    sources_by_name = {s.name: s for s in sources}
    return DataRegistry(sources_by_name, [root], http_timeout=http_timeout, max_bytes=max_bytes)


def _file(name: str, path: str) -> DataSource:
    return DataSource(name=name, kind="file", path=path)


def _http(name: str, url: str) -> DataSource:
    return DataSource(name=name, kind="http", url=url)


# -- a real loopback HTTP server -------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event

    def do_GET(self) -> None:
        # The client gives up on slow answers in the timeout tests; that is expected.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route()

    def _route(self) -> None:
        if self.path == "/data.csv":
            self._send(200, TINY_CSV.encode(), "text/csv")
        elif self.path == "/noext":
            self._send(200, json.dumps(TINY_ROWS).encode(), "application/json")
        elif self.path == "/slow.csv":
            self.release.wait(SLOW_SECONDS)  # longer than any client timeout used below
            self._send(200, TINY_CSV.encode(), "text/csv")
        elif self.path == "/trickle.csv":
            self._trickle()
        else:
            self._send(404, b"not found", "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self) -> None:
        """Each chunk arrives well within the read timeout, the whole body does not."""
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b"x,name\n")
        for _ in range(50):
            if self.release.wait(0.05):
                return
            self.wfile.write(b"1,a\n")
            self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass


@pytest.fixture
def http_base() -> Iterator[str]:
    """Serve the handler on 127.0.0.1 on a free port for one test."""
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"release": release})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()  # let slow handlers finish so no thread outlives the test
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- sources ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "file"},
        {"kind": "http"},
        {"kind": "http", "url": "ftp://example.com/x.csv"},
        {"kind": "http", "url": "file:///etc/passwd"},
        {"kind": "http", "url": "http:///no-host.csv"},
        {"kind": "file", "path": "x.csv", "unexpected": 1},
    ],
)
def test_invalid_source_definitions_are_rejected(fields: dict[str, object]) -> None:
    """A file source needs a path, an http source an http(s) URL with a host; no stray keys."""
    with pytest.raises(ValidationError):
        DataSource.model_validate({"name": "s", **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"kind": "file", "path": "a/b.csv"}, "csv"),
        ({"kind": "file", "path": "b.JSON"}, "json"),
        ({"kind": "file", "path": "b.jsonl"}, "jsonl"),
        ({"kind": "http", "url": "https://h/x.ndjson?page=2"}, "jsonl"),
        ({"kind": "file", "path": "b.txt"}, None),
        ({"kind": "file", "path": "b.txt", "format": "csv"}, "csv"),
    ],
)
def test_format_is_inferred_from_the_extension(
    fields: dict[str, object], expected: str | None
) -> None:
    """An unset format comes from the path/URL extension; an explicit one wins."""
    assert DataSource.model_validate({"name": "s", **fields}).format == expected


def test_unknown_source_error_names_registered_sources(tmp_path: Path) -> None:
    """Asking for an unknown name fails with the list of names that do exist."""
    registry = _registry(tmp_path, _file("alpha", "a.csv"), _file("beta", "b.csv"))
    assert registry.names() == ["alpha", "beta"]
    with pytest.raises(BackendError, match="alpha, beta"):
        registry.access("gamma")
    with pytest.raises(BackendError, match="alpha, beta"):
        registry.analyze("gamma")


# -- file access -----------------------------------------------------------------------


def test_file_access_reports_shape_sample_and_evidence(tmp_path: Path) -> None:
    """A readable file is available with row count, columns, the first 3 rows as sample."""
    registry = _registry(tmp_path, _file("tiny", _write_tiny(tmp_path, "csv")))
    result = registry.access("tiny")
    assert result.available and result.error is None
    assert (result.rows, result.columns) == (4, ["x", "name"])
    assert result.sample == [
        {"x": "1", "name": "a"},
        {"x": "2", "name": "b"},
        {"x": "3", "name": "a"},
    ]
    evidence = result.to_evidence()
    assert (evidence.id, evidence.title, evidence.url) == ("data:tiny", "tiny", None)
    assert evidence.snippet == "4 rows, columns: x, name"


def test_missing_file_is_unavailable_not_an_exception(tmp_path: Path) -> None:
    """A configured file that does not exist is reported unavailable with the reason."""
    result = _registry(tmp_path, _file("gone", "gone.csv")).access("gone")
    assert not result.available and result.rows is None
    assert result.error and "gone.csv" in result.error


def test_unparsable_file_is_reported_in_access(tmp_path: Path) -> None:
    """access reports a parse failure as an error on an available source."""
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    result = _registry(tmp_path, _file("bad", "bad.json")).access("bad")
    assert result.available and result.rows is None
    assert result.error and "invalid JSON" in result.error


def _escape_path(tmp_path: Path, how: str) -> str:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("k\nv\n", encoding="utf-8")
    if how == "dotdot":
        return "../outside/secret.csv"
    if how == "absolute":
        return str(outside / "secret.csv")
    (tmp_path / "data" / "link.csv").symlink_to(outside / "secret.csv")
    return "link.csv"


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
@pytest.mark.parametrize("operation", ["access", "analyze"])
def test_paths_escaping_the_data_roots_are_refused(
    tmp_path: Path, how: str, operation: str
) -> None:
    """``..``, absolute paths and symlinks pointing out of the roots never read the file."""
    root = tmp_path / "data"
    root.mkdir()
    registry = _registry(root, _file("s", _escape_path(tmp_path, how)))
    with pytest.raises(BackendError, match="outside the allowed roots"):
        getattr(registry, operation)("s")


def test_symlink_inside_the_roots_is_allowed(tmp_path: Path) -> None:
    """A symlink whose target stays inside the roots is an ordinary file."""
    (tmp_path / "link.csv").symlink_to(tmp_path / _write_tiny(tmp_path, "csv"))
    assert _registry(tmp_path, _file("s", "link.csv")).access("s").rows == 4


@pytest.mark.parametrize("operation", ["access", "analyze"])
def test_files_over_max_bytes_are_refused(tmp_path: Path, operation: str) -> None:
    """A file larger than max_bytes is refused before it is parsed."""
    registry = _registry(tmp_path, _file("tiny", _write_tiny(tmp_path, "csv")), max_bytes=10)
    with pytest.raises(BackendError, match="10-byte limit"):
        getattr(registry, operation)("tiny")


# -- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('{"a": 1}\n{"a": 2}\n{"a": \n', 3),
        ('{"a": 1}\n\n[1, 2]\n', 3),
        ('{"a": 1}\n{"a": 2}\n{"a": 3}\n{"a": 4} trailing\n', 4),
    ],
)
def test_malformed_jsonl_reports_the_line_number(tmp_path: Path, text: str, line: int) -> None:
    """A broken or non-object JSONL line fails analysis naming that line (blank lines count)."""
    (tmp_path / "rows.jsonl").write_text(text, encoding="utf-8")
    with pytest.raises(BackendError, match=rf"line {line}\b"):
        _registry(tmp_path, _file("rows", "rows.jsonl")).analyze("rows")


@pytest.mark.parametrize(
    ("file_name", "text", "message"),
    [
        ("a.json", '{"a": 1}', "array of objects"),
        ("a.json", "[1, 2]", "item 0 is not an object"),
        ("a.csv", "a,b\n1,2\n3,4,5\n", "line 3: more fields than header"),
        ("a.txt", "a,b\n1,2\n", "cannot tell the format"),
    ],
)
def test_malformed_tables_are_errors(
    tmp_path: Path, file_name: str, text: str, message: str
) -> None:
    """JSON that is not an array of objects, ragged CSV and unknown formats are refused."""
    (tmp_path / file_name).write_text(text, encoding="utf-8")
    with pytest.raises(BackendError, match=message):
        _registry(tmp_path, _file("t", file_name)).analyze("t")


# -- statistics ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_stats_on_a_tiny_known_table(tmp_path: Path, fmt: str) -> None:
    """Numeric and categorical stats are exact, whatever the file format."""
    registry = _registry(tmp_path, _file("tiny", _write_tiny(tmp_path, fmt)))
    analysis = registry.analyze("tiny")
    x, name = analysis.columns["x"], analysis.columns["name"]
    assert analysis.rows == 4 and list(analysis.columns) == ["x", "name"]
    assert (x.kind, x.count, x.mean, x.median, x.min, x.max) == ("numeric", 4, 4.0, 2.5, 1, 10)
    assert (x.p25, x.p75) == (1.75, 4.75)  # linear interpolation between data points
    assert x.std is not None and math.isclose(x.std, math.sqrt(50 / 3))
    assert (name.kind, name.count, name.unique, name.top, name.top_count) == (
        "categorical",
        4,
        3,
        "a",
        2,
    )
    assert analysis.groups is None
    assert analysis.summary == "tiny: 4 rows; x mean 4 (min 1, max 10)"


def test_missing_values_and_single_values(tmp_path: Path) -> None:
    """Empty cells are missing, not zero; one value has no sample std; text makes it categorical."""
    (tmp_path / "m.csv").write_text("n,mixed\n5,1\n,x\n", encoding="utf-8")
    analysis = _registry(tmp_path, _file("m", "m.csv")).analyze("m")
    n, mixed = analysis.columns["n"], analysis.columns["mixed"]
    assert (n.kind, n.count, n.missing, n.mean, n.std, n.p25, n.p75) == (
        "numeric",
        1,
        1,
        5.0,
        None,
        5.0,
        5.0,
    )
    assert (mixed.kind, mixed.unique) == ("categorical", 2)


def test_selected_columns_only(tmp_path: Path) -> None:
    """``columns`` restricts the stats to those columns, in the order asked."""
    registry = _registry(tmp_path, _file("g", "g.csv"))
    (tmp_path / "g.csv").write_text(GROUPED_CSV, encoding="utf-8")
    assert list(registry.analyze("g", columns=["label", "score"]).columns) == ["label", "score"]


def test_group_by_gives_numeric_stats_per_group(tmp_path: Path) -> None:
    """group_by splits rows by value and computes numeric stats for each group."""
    (tmp_path / "g.csv").write_text(GROUPED_CSV, encoding="utf-8")
    analysis = _registry(tmp_path, _file("g", "g.csv")).analyze("g", group_by="g")
    assert analysis.groups is not None and list(analysis.groups) == ["A", "B"]
    a, b = analysis.groups["A"]["score"], analysis.groups["B"]["score"]
    assert (a.count, a.mean, a.min, a.max) == (2, 2.0, 1.0, 3.0)
    assert (b.count, b.mean, b.median) == (3, 20.0, 20.0)
    assert set(analysis.groups["A"]) == {"score"}  # categorical columns are not grouped
    assert analysis.summary == "g: 5 rows; g A score mean 2; g B score mean 20"


@pytest.mark.parametrize(
    "kwargs",
    [{"columns": ["score", "nope"]}, {"group_by": "nope"}],
)
def test_unknown_column_error_lists_available_columns(
    tmp_path: Path, kwargs: dict[str, object]
) -> None:
    """An unknown column or group_by fails naming it and every available column."""
    (tmp_path / "g.csv").write_text(GROUPED_CSV, encoding="utf-8")
    registry = _registry(tmp_path, _file("g", "g.csv"))
    with pytest.raises(BackendError, match=r"nope.*available: g, score, label"):
        registry.analyze("g", **kwargs)  # type: ignore[arg-type]


def test_analysis_ids_are_unique_and_become_evidence(tmp_path: Path) -> None:
    """Every analysis gets a fresh an-<hex> id, and its evidence carries the summary."""
    registry = _registry(tmp_path, _file("tiny", _write_tiny(tmp_path, "csv")))
    first, second = registry.analyze("tiny"), registry.analyze("tiny")
    assert re.fullmatch(r"an-[0-9a-f]{8}", first.id) and first.id != second.id
    evidence = first.to_evidence()
    assert (evidence.id, evidence.title, evidence.snippet) == (
        first.id,
        "analysis of tiny",
        first.summary,
    )


# -- shipped sample data ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rows", "column"),
    [
        ("experiment_logs", 40, "accuracy"),
        ("dataset_v3_labels", 30, "confidence"),
        ("council_activity", 20, "rejections"),
    ],
)
def test_shipped_sample_data_sets_are_available(name: str, rows: int, column: str) -> None:
    """Every shipped sample data set is registered by default and readable."""
    result = DataRegistry.default().access(name)
    assert result.available and result.rows == rows and column in result.columns


def test_shipped_experiment_logs_favour_variant_b() -> None:
    """The sample A/B experiment shows B (≈0.874) more accurate than A (≈0.851)."""
    analysis = DataRegistry.default().analyze("experiment_logs", group_by="variant")
    assert analysis.groups is not None
    a = analysis.groups["A"]["accuracy"].mean
    b = analysis.groups["B"]["accuracy"].mean
    assert a is not None and b is not None and b > a
    assert math.isclose(a, 0.851, abs_tol=1e-9) and math.isclose(b, 0.874, abs_tol=1e-9)
    assert "variant A accuracy mean 0.851; variant B accuracy mean 0.874" in analysis.summary


# -- http sources, against a real loopback server --------------------------------------


def test_http_200_csv_is_available_with_rows(http_base: str) -> None:
    """A 2xx CSV body is available, parsed, and its evidence carries the URL."""
    url = f"{http_base}/data.csv"
    result = _registry(Path("."), _http("remote", url), http_timeout=2.0).access("remote")
    assert result.available and result.rows == 4 and result.columns == ["x", "name"]
    assert result.to_evidence().url == url


def test_http_format_falls_back_to_content_type(http_base: str) -> None:
    """A URL without an extension is parsed by its Content-Type."""
    registry = _registry(Path("."), _http("remote", f"{http_base}/noext"))
    assert registry.access("remote").rows == 4
    assert registry.analyze("remote").columns["x"].mean == 4.0


def test_http_404_is_unavailable(http_base: str) -> None:
    """A non-2xx answer is unavailable, with the status in the error."""
    result = _registry(Path("."), _http("remote", f"{http_base}/missing.csv")).access("remote")
    assert not result.available and result.rows is None
    assert result.error and "404" in result.error


def test_http_closed_port_is_unavailable_without_exception() -> None:
    """A refused connection is reported, never raised, by access; analyze raises BackendError."""
    registry = _registry(Path("."), _http("remote", f"http://127.0.0.1:{_closed_port()}/d.csv"))
    result = registry.access("remote")
    assert not result.available and result.error
    with pytest.raises(BackendError, match="unavailable"):
        registry.analyze("remote")


@pytest.mark.parametrize("path", ["/slow.csv", "/trickle.csv"])
def test_http_slow_server_is_unavailable_within_the_timeout(http_base: str, path: str) -> None:
    """A server that stalls, or trickles a body past the timeout, is cut off near the timeout."""
    registry = _registry(Path("."), _http("remote", f"{http_base}{path}"), http_timeout=0.3)
    started = time.monotonic()
    result = registry.access("remote")
    assert not result.available and result.error
    assert time.monotonic() - started < 1.5
