"""Member policies: ``validators/*.toml`` loaded into typed, validated data.

One file per member says which tools the member owns (with an argument schema for
each) and which checks run in which stage, with which parameters and ``on_fail``.
Files whose name starts with ``_`` hold checks shared by every member; a member can
``disable`` a shared check by name. Errors name the file and the key.
"""

from __future__ import annotations

import hashlib
import threading
import time
import tomllib
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from lingyi.checks import REGISTRY, CheckParams, load_builtin_checks
from lingyi.errors import PolicyError
from lingyi.models import AssertionType, OnFail, Stage

log = structlog.get_logger()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ArgType = Literal[
    "string", "enum", "integer", "number", "boolean", "version", "path", "data_source", "list"
]


class ArgSpec(_Strict):
    type: ArgType = "string"
    required: bool = False
    description: str = ""
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    values: list[str] | None = None
    min: float | None = None
    max: float | None = None
    roots: Literal["repos", "data"] | None = None
    must_exist: bool = True
    git_repo: bool = False


class ToolSpec(_Strict):
    description: str = ""
    read_only: bool = False
    destructive: bool = False
    args: dict[str, ArgSpec] = Field(default_factory=dict)


class CheckEntry(_Strict):
    check: str
    stage: Stage
    on_fail: OnFail = OnFail.REJECT
    on_error: Literal["pass", "fail"] = "fail"
    types: list[AssertionType] | None = None
    tools: list[str] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    _parsed: CheckParams = PrivateAttr()

    @property
    def parsed(self) -> CheckParams:
        return self._parsed

    def applies(self, type_: AssertionType, tool: str | None) -> bool:
        if self.types is not None and type_ not in self.types:
            return False
        return self.tools is None or tool in self.tools


class _MemberFile(_Strict):
    member: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    description: str = ""
    language: Literal["zh", "en"] | None = None
    tools: dict[str, ToolSpec] = Field(default_factory=dict)
    checks: list[CheckEntry] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)


class _CommonFile(_Strict):
    description: str = ""
    checks: list[CheckEntry] = Field(default_factory=list)


class MemberPolicy(BaseModel):
    id: str
    name: str
    aliases: list[str]
    description: str
    language: str | None
    tools: dict[str, ToolSpec]
    checks: list[CheckEntry]
    source: str

    @property
    def names(self) -> list[str]:
        """Every way text may refer to this member (id, display name, aliases)."""
        return list(dict.fromkeys([self.id, self.name, *self.aliases]))


class PolicySet(BaseModel):
    members: dict[str, MemberPolicy]
    aliases: dict[str, str]
    version: str

    def resolve(self, name: str) -> MemberPolicy | None:
        """The member for an id, display name or alias (case-insensitive), or None."""
        key = self.aliases.get(name.strip().lower())
        return self.members.get(key) if key else None

    def tool_owner(self, tool: str) -> MemberPolicy | None:
        return next((m for m in self.members.values() if tool in m.tools), None)


def load_policies(folder: Path) -> PolicySet:
    """Load and validate every policy file in ``folder``; raise PolicyError on the first bad key."""
    load_builtin_checks()
    if not folder.is_dir():
        raise PolicyError(str(folder), "-", "policy folder not found")
    files = sorted(folder.glob("*.toml"))
    common = [c for f in files if f.name.startswith("_") for c in _load_common(f).checks]
    members = [_load_member(f, common) for f in files if not f.name.startswith("_")]
    if not members:
        raise PolicyError(str(folder), "-", "no member policy files (*.toml) found")
    return PolicySet(
        members={m.id: m for m in members},
        aliases=_alias_map(members),
        version=_version(files),
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(str(path), "-", f"not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(str(path), "-", f"cannot read: {exc}") from exc


def _validate(model: type[BaseModel], data: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise PolicyError(str(path), _key(err["loc"]), err["msg"]) from exc


def _key(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "-"


def _load_common(path: Path) -> _CommonFile:
    common: _CommonFile = _validate(_CommonFile, _read_toml(path), path)
    _parse_checks(common.checks, path)
    return common


def _load_member(path: Path, common: list[CheckEntry]) -> MemberPolicy:
    raw: _MemberFile = _validate(_MemberFile, _read_toml(path), path)
    _parse_checks(raw.checks, path)
    _check_tool_filters(raw, path)
    for i, name in enumerate(raw.disable):
        if name not in {c.check for c in common}:
            raise PolicyError(str(path), f"disable[{i}]", f"no shared check named {name!r}")
    shared = [c for c in common if c.check not in raw.disable]
    return MemberPolicy(
        id=raw.member.lower(),
        name=raw.name,
        aliases=raw.aliases,
        description=raw.description,
        language=raw.language,
        tools=raw.tools,
        checks=shared + raw.checks,
        source=str(path),
    )


def _parse_checks(entries: list[CheckEntry], path: Path) -> None:
    for i, entry in enumerate(entries):
        spec = REGISTRY.get(entry.check)
        if spec is None:
            known = ", ".join(sorted(REGISTRY))
            raise PolicyError(
                str(path), f"checks[{i}].check", f"unknown check {entry.check!r}; known: {known}"
            )
        try:
            entry._parsed = spec.params.model_validate(entry.params)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise PolicyError(
                str(path), f"checks[{i}].params.{_key(err['loc'])}", err["msg"]
            ) from exc


def _check_tool_filters(raw: _MemberFile, path: Path) -> None:
    for i, entry in enumerate(raw.checks):
        for tool in entry.tools or []:
            if tool not in raw.tools:
                raise PolicyError(
                    str(path), f"checks[{i}].tools", f"{tool!r} is not a tool of {raw.member}"
                )


def _alias_map(members: list[MemberPolicy]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for member in members:
        for name in member.names:
            other = aliases.setdefault(name.lower(), member.id)
            if other != member.id:
                raise PolicyError(member.source, "aliases", f"{name!r} also names {other}")
    return aliases


def _version(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()[:12]


class PolicyStore:
    """The current policy set, reloaded when a file in the folder changes.

    A reload that fails keeps the last good set (the guard must not switch off because
    someone saved a typo) and logs the error with file and key.
    """

    def __init__(self, folder: Path, *, check_interval_s: float = 1.0) -> None:
        self.folder = folder
        self.interval = check_interval_s
        self._lock = threading.Lock()
        self._stamp = self._fingerprint()
        self._set = load_policies(folder)
        self._checked = time.monotonic()

    def current(self) -> PolicySet:
        now = time.monotonic()
        if now - self._checked >= self.interval:
            with self._lock:
                self._checked = now
                self._maybe_reload()
        return self._set

    def _fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        stats = ((p.name, p.stat()) for p in sorted(self.folder.glob("*.toml")))
        return tuple((name, st.st_mtime_ns, st.st_size) for name, st in stats)

    def _maybe_reload(self) -> None:
        stamp = self._fingerprint()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._set = load_policies(self.folder)
            log.info("policies reloaded", version=self._set.version)
        except PolicyError as exc:
            log.error("policy reload failed; keeping the last good policies", error=str(exc))
