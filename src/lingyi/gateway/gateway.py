"""Every upstream of a config: connected at start-up, listed, served, called.

A tool of an upstream is served as ``<name>.<tool>`` when a policy owns that name and its owner
is one of the upstream's ``members`` (default deny: no policy, not served). The policy is
merged with the upstream's own input schema (:mod:`.merge`) in every policy set the guard
verifies with, so ``tool.args_schema`` and ``tool.path_allowed`` judge upstream calls exactly
like built-in ones. An upstream that cannot be reached at start-up is logged and serves
nothing; the guard serves the rest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp_types import CallToolResult, TextContent, Tool
from pydantic import BaseModel, Field

from lingyi import messages
from lingyi._logging import get_logger
from lingyi.config import Config, UpstreamEntry
from lingyi.gateway.audit import EMPTY, audit, instructs
from lingyi.gateway.connection import Connection, UpstreamError
from lingyi.gateway.evidence import extract
from lingyi.gateway.merge import merged_spec
from lingyi.gateway.paths import forwarded
from lingyi.models import Evidence
from lingyi.policy import MemberPolicy, PolicySet, ToolSpec, UnservedTool
from lingyi.policy._model import Unserved

log = get_logger()


class UpstreamResult(BaseModel):
    """What an upstream tool returned, after the result audit."""

    tool: str = Field(description="the served tool, <upstream>.<tool>")
    content: list[str] = Field(description="the result's text parts, secrets redacted")
    structured: dict[str, Any] | None = None
    audit: list[str] = Field(
        default_factory=list, description="codes of the result audit's findings"
    )
    notice: list[str] = Field(
        default_factory=list, description="what each finding means for the model reading it"
    )


@dataclass(frozen=True)
class ServedTool:
    """One upstream tool as the guard may serve it."""

    name: str  # <upstream>.<tool>
    upstream: UpstreamEntry
    tool: Tool


@dataclass(frozen=True)
class Listing:
    """What a re-listing of one upstream found different (served names, ``<upstream>.<tool>``)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def _described(value: Any) -> list[str]:
    """Every description and title in a tool's input schema (nested objects, items, defs)."""
    if isinstance(value, dict):
        own = [v for k, v in value.items() if k in ("description", "title") and isinstance(v, str)]
        return own + [t for v in value.values() for t in _described(v)]
    if isinstance(value, list):
        return [t for v in value for t in _described(v)]
    return []


def _poisoned(tool: Tool) -> bool:
    """Whether what the model would read of a tool tries to instruct it."""
    texts = [tool.title or "", tool.description or "", *_described(tool.input_schema)]
    return any(instructs(t) for t in texts)


def _digest(tool: Tool) -> str:
    shown = {"d": tool.description, "s": tool.input_schema}
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()


class Gateway:
    """The upstreams of one server and the portal (event loop thread) their clients run on."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        portal = self._portal_cm.__enter__()
        self.connections = {
            e.name: Connection(e, portal, functools.partial(self._changed, e.name))
            for e in config.raw.upstreams
        }
        self.tools: dict[str, ServedTool] = {}
        self.unavailable: list[str] = []  # upstreams that could not be listed at start-up
        self.withheld: set[str] = set()  # changed since start-up: not served until a restart
        self.removed: dict[str, ServedTool] = {}  # no longer listed: not served, kept to compare
        self.generation = 0  # counts the re-listings that changed something
        self.loaded: PolicySet | None = None  # the policy set as loaded, last extended
        self.on_update: Callable[[Listing], None] | None = None  # the listing changed: re-merge
        self._lock = threading.Lock()
        for name in self.connections:
            self._list(name)

    # --- listing ------------------------------------------------------------------------------

    def _list(self, name: str) -> None:
        connection = self.connections[name]
        try:
            listed = connection.list_tools()
        except UpstreamError as exc:  # the guard serves the rest
            log.error("upstream.unavailable", upstream=name, error=str(exc))
            self.unavailable.append(name)
            return
        for tool in listed:
            served = f"{name}.{tool.name}"
            self.tools[served] = ServedTool(served, connection.entry, tool)
            self._refuse_poisoned(served, tool)
        log.info("upstream.listed", upstream=name, tools=len(listed))

    def _changed(self, name: str) -> None:
        """tools/list_changed, on the portal's loop: re-list in a thread of its own (a call
        through the portal from the loop itself would wait for itself)."""
        threading.Thread(target=self.relist, args=(name,), daemon=True).start()

    def relist(self, name: str) -> None:
        """Re-read an upstream's tools: added ones are taken in (served when a policy owns
        them), removed ones dropped, and a changed definition is flagged in the log and,
        with ``on_change = "withhold"``, not served until the guard restarts (reviewed)."""
        connection = self.connections[name]
        try:
            listed = {f"{name}.{t.name}": t for t in connection.list_tools()}
        except UpstreamError as exc:
            log.error("upstream.relist_failed", upstream=name, error=str(exc))
            return
        with self._lock:
            found = self._compare(connection.entry, listed)
            if found:
                self.generation += 1
        if found and self.on_update is not None:
            self.on_update(found)

    def _compare(self, entry: UpstreamEntry, listed: dict[str, Tool]) -> Listing:
        added, changed = [], []
        for served, tool in listed.items():
            known = self.tools.get(served) or self.removed.pop(served, None)
            if known is None or (served not in self.tools and _digest(known.tool) == _digest(tool)):
                self.tools[served] = ServedTool(served, entry, tool)  # new, or back as it was
                added.append(served)
                self._refuse_poisoned(served, tool)
                continue
            self.tools[served] = known  # back, changed: judged against what was reviewed
            if _digest(known.tool) != _digest(tool):
                changed.append(served)
                self._changed_definition(entry, served, tool)
        removed = [n for n, t in self.tools.items() if t.upstream is entry and n not in listed]
        for served in removed:
            log.warning("upstream.tool_removed", tool=served, served=False)
            self.removed[served] = self.tools.pop(served)  # kept: a return is compared with it
        return Listing(tuple(added), tuple(removed), tuple(changed))

    def _changed_definition(self, entry: UpstreamEntry, served: str, tool: Tool) -> None:
        withheld = entry.on_change == "withhold" or _poisoned(tool)
        log.warning("upstream.tool_changed", tool=served, withheld=withheld)
        if withheld:
            self.withheld.add(served)
        else:
            self.tools[served] = ServedTool(served, entry, tool)
        self._refuse_poisoned(served, tool)

    def _refuse_poisoned(self, served: str, tool: Tool) -> None:
        """A description that instructs the model (tool poisoning) is never shown to it: the
        tool is withheld, as a changed definition is, until the upstream is fixed and the
        guard restarted."""
        if _poisoned(tool):
            log.warning("upstream.tool_poisoned", tool=served, withheld=True)
            self.withheld.add(served)

    def listing(self) -> dict[str, ServedTool]:
        """The listed tools now (a copy: a re-listing may be changing them meanwhile)."""
        with self._lock:
            return dict(self.tools)

    @property
    def digest(self) -> str:
        """Of every listed definition: part of the policy version the guard verifies with."""
        parts = sorted(f"{n}:{_digest(t.tool)}" for n, t in self.listing().items())
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]

    # --- policies -----------------------------------------------------------------------------

    def owner(self, policies: PolicySet, name: str) -> MemberPolicy | None:
        """The member an upstream tool is served for, or None when it is not served."""
        owner = policies.tool_owner(name)
        return owner if owner is not None and self._serves(policies, name, owner) else None

    def extend(self, policies: PolicySet) -> PolicySet:
        """The policy set with each served upstream tool's spec merged with its schema.

        An upstream tool that is not served (its owner is not one of the upstream's members,
        the upstream does not list it, or it is withheld) is left out, so ``tool.owned``
        rejects a call to it, logged, before anything reaches the upstream.
        """
        self.loaded = policies
        members = {
            mid: member.model_copy(update={"tools": self._merged(policies, member)})
            for mid, member in policies.members.items()
        }
        unserved = {
            name: UnservedTool(owner=member.id, reason=self._why_not(policies, name, member))
            for member in policies.members.values()
            for name in member.tools
            if self.is_upstream(name) and name not in members[member.id].tools
        }
        version = f"{policies.version}+gw{self.digest}"
        update = {"members": members, "version": version, "unserved": unserved}
        return policies.model_copy(update=update)

    def _merged(self, policies: PolicySet, member: MemberPolicy) -> dict[str, ToolSpec]:
        merged: dict[str, ToolSpec] = {}
        for name, spec in member.tools.items():
            if not self.is_upstream(name):
                merged[name] = spec
            elif self._serves(policies, name, member):
                merged[name] = merged_spec(spec, self.tools[name].tool)
        return merged

    def _why_not(self, policies: PolicySet, name: str, owner: MemberPolicy) -> Unserved:
        if name in self.withheld:
            return "withheld"
        if name not in self.tools:
            return "removed" if name in self.removed else "not_listed"
        return "not_member"

    def is_upstream(self, name: str) -> bool:
        """Whether ``name`` is an upstream tool's served name (listed now or not)."""
        return name.split(".", 1)[0] in self.connections and "." in name

    def _serves(self, policies: PolicySet, name: str, owner: MemberPolicy) -> bool:
        served = self.tools.get(name)
        if served is None or name in self.withheld:
            return False
        return owner.id in {m.id for n in served.upstream.members if (m := policies.resolve(n))}

    def unowned(self, policies: PolicySet) -> list[str]:
        """Upstream tools no policy mentions (not served: default deny)."""
        return sorted(n for n in self.tools if policies.tool_owner(n) is None)

    # --- calls --------------------------------------------------------------------------------

    def call(
        self, policies: PolicySet, name: str, member: str, arguments: dict[str, Any]
    ) -> tuple[UpstreamResult, list[Evidence]]:
        """Forward one approved call; the audited result and the evidence it holds."""
        served = self.tools.get(name)
        owner = self.owner(policies, name)
        if served is None or owner is None or owner.id != member:
            raise UpstreamError(f"{name} is not served for {member}")
        # A stdio upstream is our child: it can reach the folders we hold (/proc/<pid>/fd).
        hold = served.upstream.command is not None
        with forwarded(owner.tools[name], arguments, self.config, hold=hold) as sent:
            result = self.connections[served.upstream.name].call(served.tool.name, sent)
        return self._received(served, result)

    def _received(
        self, served: ServedTool, result: CallToolResult
    ) -> tuple[UpstreamResult, list[Evidence]]:
        texts = [_text_of(part) for part in result.content]
        if result.is_error:  # a failed result: no evidence, so no later claim can rest on it
            raise UpstreamError(f"{served.name} failed upstream: {' '.join(texts)[:500]}")
        shown, structured, codes = audit(texts, result.structured_content)
        if codes:  # names and codes only: the content may hold what was redacted
            log.warning("upstream.audit", tool=served.name, codes=codes)
        evidence = (
            []
            if EMPTY in codes
            else extract(served.upstream.evidence, served.name, "\n".join(texts), structured)
        )
        lang = self.config.language
        payload = UpstreamResult(
            tool=served.name,
            content=shown,
            structured=structured,
            audit=codes,
            notice=[messages.text(lang, code) for code in codes],
        )
        return payload, evidence

    def close(self) -> None:
        for connection in self.connections.values():
            try:
                connection.close()
            except Exception as exc:  # closing a dead upstream must not stop the others
                log.warning("upstream.close_failed", upstream=connection.entry.name, error=str(exc))
        self._portal_cm.__exit__(None, None, None)


def _text_of(part: Any) -> str:
    if isinstance(part, TextContent):
        return part.text
    return f"[{getattr(part, 'type', 'content')}]"  # images, resources: named, not inlined
