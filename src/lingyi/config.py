"""Deployment configuration: where things are, which roots are allowed, who may speak.

Search order (the design's contract): ``--config PATH``, ``$LINGYI_CONFIG``,
``./config/lingyi.toml``, then the defaults packaged with lingyi. Paths inside a file are
relative to that file (``~`` expands). ``--log``/``$LINGYI_LOG`` and ``$LINGYI_COUNCIL``
override the log and the council record.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lingyi.errors import ConfigError


def defaults_dir() -> Path:
    """The folder of packaged defaults: config, member policies, sample KB and data."""
    return Path(str(resources.files("lingyi") / "defaults"))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PathsSection(_Strict):
    validators: str = "validators"
    log: str = "~/.local/state/lingyi/verification.jsonl"
    council: str = "~/.local/state/lingyi/council.jsonl"
    knowledge_base: str = "kb"
    repo_roots: list[str] = Field(default_factory=list)
    data_roots: list[str] = Field(default_factory=lambda: ["data"])


class LogSection(_Strict):
    fsync: bool = False


class DataSourceEntry(_Strict):
    kind: Literal["file", "http"] = "file"
    path: str | None = None
    url: str | None = None
    format: Literal["csv", "json", "jsonl"] | None = None
    description: str = ""


class EvidenceSection(_Strict):
    trace_backend_url: str = ""
    trace_timeout_s: float = 1.0


class TokenEntry(_Strict):
    name: str
    env: str | None = None
    token: str | None = None
    members: list[str] = Field(default_factory=list)

    def value(self) -> str | None:
        return os.environ.get(self.env) if self.env else self.token


class ServerSection(_Strict):
    host: str = "127.0.0.1"
    port: int = 8765
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    tokens: list[TokenEntry] = Field(default_factory=list)


class JudgeSection(_Strict):
    enabled: bool = False
    model: str = "claude-haiku-4-5"
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    timeout_s: float = 20.0
    on_error: Literal["pass", "fail"] = "pass"
    on_fail: Literal["reject", "fallback", "warn"] = "reject"
    members: list[str] = Field(default_factory=list)


class ConfigFile(_Strict):
    language: Literal["zh", "en"] = "zh"
    timezone: str = ""
    paths: PathsSection = Field(default_factory=PathsSection)
    log: LogSection = Field(default_factory=LogSection)
    data_sources: dict[str, DataSourceEntry] = Field(default_factory=dict)
    evidence: EvidenceSection = Field(default_factory=EvidenceSection)
    server: ServerSection = Field(default_factory=ServerSection)
    judge: JudgeSection = Field(default_factory=JudgeSection)


class Config(BaseModel):
    """A loaded config with every path made absolute."""

    source: Path
    raw: ConfigFile
    validators_dir: Path
    log_path: Path
    council_path: Path
    kb_dir: Path
    repo_roots: list[Path]
    data_roots: list[Path]

    @property
    def language(self) -> str:
        return self.raw.language

    @property
    def timezone(self) -> str:
        return self.raw.timezone


def find_config(explicit: str | Path | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if env := os.environ.get("LINGYI_CONFIG"):
        return Path(env)
    local = Path("config/lingyi.toml")
    return local if local.is_file() else defaults_dir() / "lingyi.toml"


def load_config(explicit: str | Path | None = None, *, log: str | Path | None = None) -> Config:
    """Load the config by the search order and apply the log/council overrides."""
    path = find_config(explicit)
    raw = _parse(path)
    base = path.resolve().parent
    log_path = log or os.environ.get("LINGYI_LOG") or _under(base, raw.paths.log)
    council = os.environ.get("LINGYI_COUNCIL") or _under(base, raw.paths.council)
    return Config(
        source=path.resolve(),
        raw=raw,
        validators_dir=_under(base, raw.paths.validators),
        log_path=Path(log_path).expanduser().absolute(),
        council_path=Path(council).expanduser().absolute(),
        kb_dir=_under(base, raw.paths.knowledge_base),
        repo_roots=[_under(base, p) for p in raw.paths.repo_roots],
        data_roots=[_under(base, p) for p in raw.paths.data_roots],
    )


def _under(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def _parse(path: Path) -> ConfigFile:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    try:
        return ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_first_error(exc)}") from exc


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    return f"{key}: {err['msg']}"
