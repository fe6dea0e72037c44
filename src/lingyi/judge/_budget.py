"""What judge calls cost, and the budgets that stop them.

A call is admitted only if its worst case fits both budgets (the session's and the UTC day's):
the prompt's size in bytes (a token is at least one byte) plus the tool-use overhead, at the
input price, and ``max_tokens`` at the output price. That amount is reserved while the call
runs and settled to the real usage after, so calls in flight together cannot overshoot a
budget. The day budget is per process (a restart starts the day again).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lingyi.config import ModelPrice

TOOL_USE_OVERHEAD_TOKENS = 700  # the system prompt the API adds for a forced tool
SESSIONS_KEPT = 10_000


def price_of(prices: dict[str, ModelPrice], model: str) -> tuple[ModelPrice, bool]:
    """The model's price and whether it was assumed: its own name, else the longest listed
    prefix of it (a dated version), else the dearest listed (an estimate must not be low)."""
    if model in prices:
        return prices[model], False
    prefixes = [name for name in prices if model.startswith(name)]
    if prefixes:
        return prices[max(prefixes, key=len)], False
    if not prices:
        return ModelPrice(input=0.0, output=0.0), True
    return max(prices.values(), key=lambda p: (p.output, p.input)), True


def cost_usd(price: ModelPrice, input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000


def worst_case_usd(price: ModelPrice, params: dict[str, Any]) -> float:
    """The most a call with these ``messages.create`` arguments can cost."""
    sent = params["system"] + json.dumps(params["messages"]) + json.dumps(params["tools"])
    prompt = len(sent.encode()) + TOOL_USE_OVERHEAD_TOKENS
    return cost_usd(price, prompt, int(params["max_tokens"]))


def utc_day() -> str:
    return datetime.now(UTC).date().isoformat()


@dataclass
class Reservation:
    session: str
    day: str
    usd: float


class Budget:
    """Spend per session and per UTC day, with reservations for calls in flight."""

    def __init__(
        self, per_session_usd: float, per_day_usd: float, day: Callable[[], str] = utc_day
    ) -> None:
        self.per_session, self.per_day, self._day = per_session_usd, per_day_usd, day
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, float] = OrderedDict()
        self._days: dict[str, float] = {}

    def reserve(self, session: str, usd: float) -> Reservation | str:
        """A reservation of ``usd``, or which budget refuses it (``budget_session``/``_day``)."""
        with self._lock:
            day = self._day()
            spent_session = self._sessions.get(session, 0.0)
            spent_day = self._days.get(day, 0.0)
            if self.per_session and spent_session + usd > self.per_session:
                return "budget_session"
            if self.per_day and spent_day + usd > self.per_day:
                return "budget_day"
            self._add(session, day, usd)
            return Reservation(session, day, usd)

    def settle(self, reservation: Reservation, usd: float) -> None:
        """Replace the reserved amount by what the call really cost."""
        with self._lock:
            self._add(reservation.session, reservation.day, usd - reservation.usd)

    def spent(self, session: str) -> tuple[float, float]:
        """(this session's spend, today's spend), reservations included."""
        with self._lock:
            return self._sessions.get(session, 0.0), self._days.get(self._day(), 0.0)

    def _add(self, session: str, day: str, usd: float) -> None:
        self._sessions[session] = max(self._sessions.get(session, 0.0) + usd, 0.0)
        self._sessions.move_to_end(session)
        while len(self._sessions) > SESSIONS_KEPT:  # bounded: the oldest session is forgotten
            self._sessions.popitem(last=False)
        self._days[day] = max(self._days.get(day, 0.0) + usd, 0.0)
        for old in sorted(self._days)[:-2]:  # today, and yesterday for calls across midnight
            del self._days[old]
