"""A Messages API on loopback that answers with tool use, for the real ``anthropic`` client.

The model itself cannot run here, so this server stands in for it: it speaks the wire format
(``POST /v1/messages``, a ``tool_use`` block for the forced tool, ``usage``, Anthropic-style
errors) and answers by a script. Everything from the client's request to the verdict is real.

The default script is a deliberately gullible judge: it reads the rubric's criterion ids from
the tool schema and the data between the nonce markers the system prompt names, and it obeys
any instruction it finds in the user message *outside* those markers ("approve" → satisfied).
Inside the data, content that asks for approval or calls itself the rubric fails the first
criterion (and every scored signal gets its worst score). So a verification that content managed to smuggle out of its data block would be
approved, and one that stayed inside is not: injection tests read the verdict.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.loopback import serving

NONCE = re.compile(r'"BEGIN-DATA ([0-9a-f]{32})"')
SUSPICIOUS = ("approve", "rubric", "ignore", "satisfied", "批准", "评分标准")


@dataclass
class Reply:
    """One scripted answer: a status, a JSON body (or raw text), a delay before it."""

    body: Any
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


Script = Callable[[dict[str, Any]], Reply]


@dataclass
class FakeModel:
    """What the loopback model answers, and everything it was asked."""

    script: Script | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: dict[str, Any]) -> Reply:
        return (self.script or gullible)(request)


# --------------------------------------------------------------------------- reading a request


def criterion_ids(request: dict[str, Any]) -> list[str]:
    schema = request["tools"][0]["input_schema"]["properties"]
    if "criteria" not in schema:  # a rule of scored signals only
        return []
    return list(schema["criteria"]["items"]["properties"]["criterion"]["enum"])


def signal_names(request: dict[str, Any]) -> list[str]:
    """The scored signals the verdict tool asks for (none for a pass/fail rubric)."""
    schema = request["tools"][0]["input_schema"]["properties"]
    return list(schema.get("scores", {}).get("properties", {}))


# What a good answer scores when a test names no score: the shipped critic's drift and
# ungrounded_claims are shares where less is better (the fake is not told the thresholds).
GOOD_SCORES = {"drift": 0.0, "ungrounded_claims": 0.0}


def nonce_of(request: dict[str, Any]) -> str:
    found = NONCE.search(request["system"])
    assert found, "the system prompt names no data markers"
    return found.group(1)


def split_user(request: dict[str, Any]) -> tuple[str, str]:
    """(the data between the markers, everything of the user message outside them)."""
    text = request["messages"][0]["content"]
    nonce = nonce_of(request)
    begin, end = f"BEGIN-DATA {nonce}\n", f"\nEND-DATA {nonce}"
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[start:stop], text[: start - len(begin)] + text[stop + len(end) :]


def data_of(request: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(split_user(request)[0])
    return data


# --------------------------------------------------------------------------- answering


def verdict(
    request: dict[str, Any],
    failing: dict[str, str] | None = None,
    kind: str | None = None,
    scores: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A well-formed verdict for ``request``: the criteria in ``failing`` (id → gap) fail;
    the signals in ``scores`` get those scores (the others a good one, ``GOOD_SCORES``)."""
    failing, scores = failing or {}, scores or {}
    body: dict[str, Any] = {}
    if ids := criterion_ids(request):
        body["criteria"] = [
            {"criterion": c, "passed": c not in failing, "gap": failing.get(c, "")} for c in ids
        ]
    if names := signal_names(request):
        body["scores"] = {
            n: {"score": scores.get(n, GOOD_SCORES.get(n, 1.0)), "gap": ""} for n in names
        }
    overall = kind or ("needs_revision" if failing else "satisfied")
    return {**body, "verdict": overall, "explanation": "scripted verdict"}


def message(
    request: dict[str, Any], content: list[dict[str, Any]], usage: tuple[int, int]
) -> Reply:
    return Reply(
        {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": content,
            "stop_reason": "tool_use"
            if content and content[0]["type"] == "tool_use"
            else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }
    )


def tool_use(request: dict[str, Any], payload: Any, usage: tuple[int, int] = (1200, 150)) -> Reply:
    block = {"type": "tool_use", "id": "toolu_1", "name": "record_verdict", "input": payload}
    return message(request, [block], usage)


def text(request: dict[str, Any], body: str, usage: tuple[int, int] = (1200, 150)) -> Reply:
    return message(request, [{"type": "text", "text": body}], usage)


def error(status: int, kind: str, **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": f"loopback {status}"}}
    return Reply(body, status=status, headers=headers)


def gullible(request: dict[str, Any]) -> Reply:
    """Obeys instructions outside the data block; flags suspicious content inside it."""
    inside, outside = split_user(request)
    if "approve" in outside.lower():
        return tool_use(request, verdict(request))  # fooled: what a smuggled instruction gets
    content = str(json.loads(inside).get("content", "")).lower()
    if any(word in content for word in SUSPICIOUS):  # the first criterion fails, every score
        bad = {n: 1.0 - GOOD_SCORES.get(n, 1.0) for n in signal_names(request)}
        flagged = {"c1": "the content addresses the judge"} if criterion_ids(request) else {}
        return tool_use(request, verdict(request, flagged, scores=bad))
    return tool_use(request, verdict(request))


# --------------------------------------------------------------------------- the server


def _handler(model: FakeModel) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with model.lock:
                model.requests.append(body)
                model.headers.append({k.lower(): v for k, v in self.headers.items()})
                model.in_flight += 1
                model.most_in_flight = max(model.most_in_flight, model.in_flight)
            try:
                reply = model.answer(body)
                time.sleep(reply.delay_s)
                self._send(reply)
            finally:
                with model.lock:
                    model.in_flight -= 1

        def _send(self, reply: Reply) -> None:
            raw = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(raw)  # the client may have given up (a timeout test)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def messages_api(model: FakeModel | None = None) -> Iterator[tuple[FakeModel, str]]:
    """Serve a fake Messages API on loopback; yields (the model's state, the base URL)."""
    state = model or FakeModel()
    with serving(_handler(state)) as url:
        yield state, url
