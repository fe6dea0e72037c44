"""A Tempo-compatible trace backend: does a trace exist, and which traces did a service have.

Only the two endpoints every Tempo-compatible API serves are used:

- ``GET {base}/api/traces/{id}``: 200 with at least one span = the trace exists; 404, or a
  trace with no spans, = it does not; anything else (a timeout, a refused connection, a 5xx,
  a body that is not JSON) is an outage, raised as :class:`TraceBackendError`, so that the
  check that asked applies its policy's ``on_error`` and records the result as degraded.
- ``GET {base}/api/search?tags=service.name=S&start=&end=&limit=``: the traces of a service in
  a time range (``query_traces``).

Ids are compared in one form (:func:`trace_key`): lower case, a UUID's dashes dropped, left-padded
with zeros to 32 hex digits (Tempo drops leading zeros in search results). Lookups run on a
bounded pool shared by every verification (``concurrency``), each waited for no longer than the
timeout, so a slow backend costs one verification at most its timeout and never holds up
another's checks. Confirmed ids are cached (bounded, newest kept); missing ones are not, since
a trace may arrive late in the backend.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from lingyi.backends._trace_ids import trace_key
from lingyi.errors import BackendError
from lingyi.models import Evidence

if TYPE_CHECKING:  # httpx loads with the first backend made: the server's query_traces
    import httpx  # result type needs this module, not an HTTP client


class TraceBackendError(BackendError):
    """The backend could not answer (timeout, connection, 5xx, a body that is not JSON)."""


def span_count(body: Any) -> int:
    """Spans in a trace as Tempo returns it (v1 ``batches``, v2 ``trace.resourceSpans``; the
    scope lists under either name, ``scopeSpans`` or ``instrumentationLibrarySpans``)."""
    if isinstance(body, dict) and isinstance(body.get("trace"), dict):
        body = body["trace"]
    if not isinstance(body, dict):
        return 0
    batches = body.get("batches") or body.get("resourceSpans") or []
    return sum(_scope_spans(b) for b in batches if isinstance(b, dict))


def _scope_spans(batch: dict[str, Any]) -> int:
    scopes = batch.get("scopeSpans") or batch.get("instrumentationLibrarySpans") or []
    return sum(len(s.get("spans") or []) for s in scopes if isinstance(s, dict))


class TraceHit(BaseModel):
    """One trace a search found."""

    trace_id: str
    root_service: str = ""
    root_name: str = ""
    start: str = ""  # unix nanoseconds as Tempo gives them
    duration_ms: float | None = None

    def to_evidence(self) -> Evidence:
        title = f"trace {self.root_service} {self.root_name}".strip()
        snippet = f"duration {self.duration_ms} ms" if self.duration_ms is not None else ""
        return Evidence(id=self.trace_id, title=title, snippet=snippet)


class TraceSearch(BaseModel):
    """What ``query_traces`` returns: the traces found, ids in their one form."""

    service: str
    traces: list[TraceHit]


class TraceBackend:
    """Lookups and searches against one Tempo-compatible API (thread-safe)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 1.0,
        concurrency: int = 4,
        cache_size: int = 10000,
        trace_path: str = "/api/traces/{id}",
        spans_required: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._trace_path = trace_path
        self._spans_required = spans_required  # False: the older backend, where 2xx = exists
        import httpx

        self._client = httpx.Client(timeout=timeout_s, headers={"Accept": "application/json"})
        self._http_error: type[Exception] = httpx.HTTPError
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="traces")
        self._confirmed: OrderedDict[str, None] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def exists(self, ids: Iterable[str]) -> dict[str, bool]:
        """trace key → whether the trace exists, each id looked up once (cache first).

        Raises :class:`TraceBackendError` when any lookup could not be answered in time.
        """
        keys = list(dict.fromkeys(k for k in map(trace_key, ids) if k))
        found = {k: True for k in keys if self._cached(k)}
        todo = [k for k in keys if k not in found]
        futures = {k: self._pool.submit(self._lookup, k) for k in todo}
        # One deadline for the batch: the request's own timeout, plus as long again for a
        # wait in the queue behind other verifications' lookups; never longer.
        deadline = time.monotonic() + self.timeout_s * 2
        for key, future in futures.items():
            try:
                found[key] = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout as exc:
                for waiting in futures.values():
                    waiting.cancel()
                raise TraceBackendError(f"trace lookup of {key} timed out") from exc
        self._remember(k for k, v in found.items() if v)
        return found

    def exists_one(self, trace_id: str) -> bool:
        key = trace_key(trace_id)
        return key is not None and self.exists([key])[key]

    def _lookup(self, key: str) -> bool:
        url = self.base_url + self._trace_path.format(id=key)
        try:
            response = self._client.get(url)
        except self._http_error as exc:
            raise TraceBackendError(f"trace backend {self.base_url}: {exc!r}") from exc
        if response.status_code == 404:
            return False
        if response.status_code >= 300:
            raise TraceBackendError(f"trace backend {self.base_url}: HTTP {response.status_code}")
        return self._has_spans(response) if self._spans_required else True

    @classmethod
    def legacy(cls, url: str, timeout_s: float) -> TraceBackend:
        """The older ``[evidence] trace_backend_url``: GET {url}/{id}, any 2xx = exists."""
        return cls(url, timeout_s=timeout_s, trace_path="/{id}", spans_required=False)

    def _has_spans(self, response: httpx.Response) -> bool:
        if not response.content.strip():
            return False  # an empty 200: nothing found (some proxies answer so)
        try:
            return span_count(response.json()) > 0
        except ValueError as exc:
            raise TraceBackendError(f"trace backend {self.base_url}: not JSON") from exc

    def _cached(self, key: str) -> bool:
        with self._lock:
            if key in self._confirmed:
                self._confirmed.move_to_end(key)
                return True
            return False

    def _remember(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._confirmed[key] = None
                self._confirmed.move_to_end(key)
            while len(self._confirmed) > self._cache_size:
                self._confirmed.popitem(last=False)

    def search(self, service: str, start: int | None, end: int | None, limit: int) -> TraceSearch:
        """The traces of ``service`` between ``start`` and ``end`` (unix seconds)."""
        params: dict[str, str | int] = {"tags": f"service.name={service}", "limit": limit}
        params |= {k: v for k, v in (("start", start), ("end", end)) if v is not None}
        try:
            response = self._client.get(f"{self.base_url}/api/search", params=params)
            response.raise_for_status()
            body = response.json()
        except (self._http_error, ValueError) as exc:
            raise TraceBackendError(f"trace search at {self.base_url}: {exc}") from exc
        hits = [h for h in map(_hit, _traces(body)) if h is not None][:limit]
        self._remember(h.trace_id for h in hits)
        return TraceSearch(service=service, traces=hits)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


def _traces(body: Any) -> list[dict[str, Any]]:
    traces = body.get("traces") if isinstance(body, dict) else None
    return [t for t in traces or [] if isinstance(t, dict)]


_SEARCH_ID = re.compile(r"[0-9a-f]{1,32}")


def _hit(raw: dict[str, Any]) -> TraceHit | None:
    given = str(raw.get("traceID", "")).strip().lower()
    key = given.rjust(32, "0") if _SEARCH_ID.fullmatch(given) else trace_key(given)
    if key is None:
        return None  # not an id we could ever compare: not evidence
    duration = raw.get("durationMs")
    return TraceHit(
        trace_id=key,
        root_service=str(raw.get("rootServiceName", "")),
        root_name=str(raw.get("rootTraceName", "")),
        start=str(raw.get("startTimeUnixNano", "")),
        duration_ms=float(duration) if isinstance(duration, int | float) else None,
    )
