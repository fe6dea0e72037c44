"""Deployment configuration: where things are, which roots are allowed, who may speak.

Search order (the design's contract): ``--config PATH``, ``$LINGYI_CONFIG``,
``./config/lingyi.toml``, then the defaults packaged with lingyi. Paths inside a file are
relative to that file (``~`` expands). ``--log``/``$LINGYI_LOG`` and ``$LINGYI_COUNCIL``
override the log and the council record.

Every key carries its description here, in the model: the configuration reference
(``docs/configuration.md``) and the config ``lingyi init`` writes are generated from it, so
they cannot drift from what is accepted. :attr:`Config.origins` says where each path in effect
came from (a flag, an environment variable, the file, a default), for ``lingyi config show``.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from lingyi._validation import Problem, problems
from lingyi.errors import ConfigError
from lingyi.redact import RedactSection, configure

MIN_FIELD_BYTES = 256  # below this a record could not say what it is about


def defaults_dir() -> Path:
    """The folder of packaged defaults: config, member policies, sample KB and data."""
    return Path(str(resources.files("lingyi") / "defaults"))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PathsSection(_Strict):
    """Where lingyi reads and writes. Relative paths are relative to the config file."""

    validators: str = Field("validators", description="Folder of member policy files (*.toml).")
    log: str = Field(
        "~/.local/state/lingyi/verification.jsonl",
        description="The verification log (JSONL, hash-chained). --log and $LINGYI_LOG override it.",
    )
    council: str = Field(
        "~/.local/state/lingyi/council.jsonl",
        description="The council record: messages members really posted. $LINGYI_COUNCIL overrides it.",
    )
    knowledge_base: str = Field(
        "kb", description="Folder of Markdown documents searched by search_knowledge."
    )
    repo_roots: list[str] = Field(
        default_factory=list,
        description="Folders under which git tools may act on repositories (empty: none).",
    )
    data_roots: list[str] = Field(
        default_factory=lambda: ["data"],
        description="Folders that file data sources are read from; a source's path is relative to the first.",
    )


class LogSection(_Strict):
    """How the verification log is written, authenticated, anchored and bounded."""

    fsync: bool = Field(
        False, description="fsync every record: survives power loss, costs ~0.3 ms a record."
    )
    key_env: str = Field(
        "",
        description="Environment variable holding the log key: records are chained with an "
        "HMAC, so a rewrite cannot be recomputed without it. One or more keys separated by "
        "whitespace, at least 32 characters each; the last one signs new records, the others "
        "are retired keys kept to verify older ones. Never logged. Empty: a plain hash chain.",
        examples=["LINGYI_LOG_KEY"],
    )
    key_file: str = Field(
        "",
        description="File holding the log key, as key_env (one key a line; append a line to "
        "rotate). Relative to this file; readable by the guard only. Set key_env or key_file.",
        examples=["secrets/log.key"],
    )
    checkpoints: str = Field(
        "",
        description="File of checkpoints (record count, last hash), signed with the key, "
        "appended after every record: a cut-off tail is then detected. Keep it where whoever "
        "can rewrite the log cannot (another disk, an append-only file). Kept for paths.log "
        "only, not for a log given by --log or $LINGYI_LOG. Empty: no checkpoints.",
        examples=["/var/lib/lingyi-anchor/verification.checkpoints"],
    )
    checkpoint_every: int = Field(
        1,
        ge=1,
        description="Write a checkpoint every N records (a cut of fewer records than this "
        "after the last checkpoint goes unnoticed).",
    )
    max_field_bytes: int = Field(
        16384,
        ge=0,
        description="Content, texts and a tool call's arguments longer than this (UTF-8 bytes) "
        "are stored cut, with their full length and sha256 in the record's truncated list; "
        "the verdict is made on all of it. 0: no limit.",
    )

    @model_validator(mode="after")
    def _one_key_source(self) -> LogSection:
        if self.key_env and self.key_file:
            raise ValueError("set key_env or key_file, not both")
        if 0 < self.max_field_bytes < MIN_FIELD_BYTES:
            raise ValueError(f"max_field_bytes must be 0 or at least {MIN_FIELD_BYTES}")
        return self


class StoreSection(_Strict):
    """The index beside the log (derived data: deleted, it is rebuilt from the log)."""

    path: str = Field(
        "",
        description="The SQLite index of the log (docs/store.md). Empty: <log>.index.sqlite "
        "beside the log. Kept for paths.log only, not for a log given by --log or $LINGYI_LOG.",
        examples=["/var/lib/lingyi/verification.index.sqlite"],
    )


class PoliciesSection(_Strict):
    """How the member policies in the validators folder are loaded."""

    require_shared: bool = Field(
        True,
        description="Refuse a validators folder without a shared file (_*.toml): without one, every check all members share is gone.",
    )
    allow_weakening: list[str] = Field(
        default_factory=list,
        description="What this deployment weakens on purpose against the shipped policies: "
        "the name of each check (boundary.medical), tools.<tool> for a tool's destructive or "
        "approval setting, judge for the judge rules. A start on weaker policies not named "
        "here is refused (file and key); docs/security.md lists what counts as weaker.",
        examples=[["boundary.medical"]],
    )
    cache: bool = Field(
        True,
        description="Deprecated, ignored: the parse cache is gone (policies are read in full at each start). Accepted so an older config still loads; a warning on stderr says so.",
    )


class CliSection(_Strict):
    """The command line."""

    server: str = Field(
        "",
        description='`lingyi verify` verifies through this running `lingyi serve --http` (e.g. "http://127.0.0.1:8765/mcp"), in that server\'s session evidence; an unreachable server is an error, never a local fallback. Empty: verify in-process. `--server URL` and `--local` override it (docs/verify-server.md).',
    )
    token_env: str = Field(
        "",
        description="The environment variable holding the bearer token `lingyi verify --server` sends (a value of that server's [[server.tokens]]). Empty: no token (a loopback server without tokens). Named but unset: an error.",
    )
    warm: bool = Field(
        True,
        description="Deprecated, ignored: the warm process is gone (docs/verify-server.md: use [cli] server). Accepted so an older config still loads; a warning on stderr says so.",
    )


class LedgerSection(_Strict):
    """Bounds of the evidence ledger: what the server remembers of each session's tool results."""

    max_entries: int = Field(
        1000,
        ge=1,
        description="Tool results kept per session at most; when full, each new one makes the session forget its oldest (counted).",
    )
    max_age_s: float = Field(
        86400.0,
        ge=0,
        description="Tool results older than this many seconds are forgotten (0: kept while the session lives).",
    )
    idle_s: float = Field(
        1800.0,
        gt=0,
        description="A session with no call for this many seconds is dropped (also the HTTP session idle time).",
    )
    max_sessions: int = Field(
        1000,
        ge=1,
        description="Sessions kept at once; beyond it the one idle longest is dropped (and counted).",
    )


class DataSourceEntry(_Strict):
    """Each is a table [data_sources.NAME]; models call the source by NAME."""

    kind: Literal["file", "http"] = Field(
        "file", description="A file under the data roots, or an HTTP(S) endpoint."
    )
    path: str | None = Field(
        None,
        description='For kind = "file": the file, relative to the first data root.',
        examples=["sample.csv"],
    )
    url: str | None = Field(
        None,
        description='For kind = "http": the URL to fetch.',
        examples=["https://example.org/data.csv"],
    )
    format: Literal["csv", "json", "jsonl"] | None = Field(
        None,
        description="Format of the data; unset: from the file suffix (or the Content-Type).",
        examples=["csv"],
    )
    description: str = Field("", description="What the data set holds, shown to models.")


class EvidenceSection(_Strict):
    """Where evidence that is not in the session ledger can be confirmed."""

    trace_backend_url: str = Field(
        "",
        description="Older form of [traces] base_url, kept working: GET {url}/{id} answers 2xx "
        "when a trace id exists, 404 when not (empty: none). [traces] base_url wins when both are set.",
    )
    trace_timeout_s: float = Field(
        1.0, description="Timeout of one lookup at trace_backend_url, in seconds."
    )
    kb_url_base: str = Field(
        "https://kb.lingyi.local/",
        description="Base of the stable URL each knowledge-base result carries (base + the document id without `kb:`), which answers cite; empty: results carry no URL.",
    )


class TracesSection(_Strict):
    """A Tempo-compatible trace API: unrecorded trace ids are looked up there, query_traces searches it."""

    # GET {base_url}/api/traces/{id} (200 with spans = exists; 404 or no spans = missing) and
    # GET {base_url}/api/search; an outage follows the on_error of the check that asked.

    base_url: str = Field(
        "",
        description="Base URL of the Tempo-compatible API (empty: no lookups, and query_traces "
        "answers that no backend is configured).",
        examples=["http://127.0.0.1:3200"],
    )
    timeout_s: float = Field(
        1.0,
        gt=0,
        description="Timeout of one lookup or search, in seconds: a verification "
        "waits no longer than this for the backend.",
    )
    concurrency: int = Field(
        4, ge=1, le=64, description="Lookups in flight at once, across all verifications."
    )
    cache_size: int = Field(
        10000, ge=0, description="Confirmed trace ids remembered (not looked up again)."
    )
    search_limit: int = Field(
        20, ge=1, le=1000, description="Traces query_traces returns at most when not told."
    )


class TokenEntry(_Strict):
    """Each [[server.tokens]] entry is one client's token, bound to the members it may speak for."""

    name: str = Field(
        description="A name for the client (shown in logs and errors).", examples=["desktop"]
    )
    env: str | None = Field(
        None,
        description="Environment variable that holds the token.",
        examples=["LINGYI_TOKEN_DESKTOP"],
    )
    token: str | None = Field(
        None, description="The token itself (for tests; prefer env).", examples=["change-me"]
    )
    members: list[str] = Field(
        default_factory=list, description="Members this token may speak for (empty: every member)."
    )

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: str | None) -> str | None:
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise ValueError(_SHORT)  # the key, never the value: errors reach terminals
        return token

    @model_validator(mode="after")
    def _one_source(self) -> TokenEntry:
        if (self.env is None) == (self.token is None):
            raise ValueError(f"token {self.name!r}: set env or token (one of them)")
        return self

    def value(self) -> str | None:
        return os.environ.get(self.env) if self.env else self.token

    def problem(self) -> str | None:
        """Why this token cannot be used now (its variable unset or short), or None."""
        if self.env is None:
            return None  # an inline token was checked when the config loaded
        value = os.environ.get(self.env)
        if not value:
            return f"token {self.name!r}: the environment variable {self.env} is not set"
        if len(value) < MIN_TOKEN_CHARS:
            return f"token {self.name!r}: the value of {self.env} is too short; {_SHORT}"
        return None


MIN_TOKEN_CHARS = 32  # a bearer token is the only thing between the network and the guard
_SHORT = f"a token must be at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"


def token_problems(raw: ConfigFile) -> list[Problem]:
    """Each configured token that cannot be used now, with its key: ``serve --http`` refuses
    to start on any (a token that failed to load must never leave members unauthenticated)."""
    return [
        Problem(f"server.tokens[{i}].env", why)
        for i, entry in enumerate(raw.server.tokens)
        if (why := entry.problem()) is not None
    ]


class ServerSection(_Strict):
    """The MCP server (lingyi serve)."""

    host: str = Field("127.0.0.1", description="HTTP bind address (lingyi serve --http).")
    port: int = Field(8765, description="HTTP port (lingyi serve --http).")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host headers accepted over HTTP (empty: loopback names with the port).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origin headers accepted over HTTP (empty: loopback origins with the port).",
    )
    tokens: list[TokenEntry] = Field(
        default_factory=list,
        description="Bearer tokens, at least 32 characters each; a token whose variable is "
        "not set stops serve --http. With none configured, HTTP serves loopback only, with no "
        "authentication.",
    )


class ApprovalsSection(_Strict):
    """Human approval of the calls a policy marks (``approval`` on a tool of a member policy)."""

    ttl_s: float = Field(
        900.0,
        gt=0,
        description="How long a request waits for a person, and an approval holds, in seconds.",
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Names of [[server.tokens]] that may approve through the approve_call tool "
        "(never a request their own token made); lingyi approve needs no token.",
        examples=[["ops"]],
    )
    destructive: bool = Field(
        False,
        description="Every tool whose policy says destructive = true needs approval, as if it "
        'said approval = "required".',
    )
    elicit: bool = Field(
        True,
        description="Ask the person through MCP elicitation when the client declared it; "
        "false: always answer with a pending approval id.",
    )
    elicit_timeout_s: float = Field(
        300.0,
        gt=0,
        description="Longest wait for the answer to an elicitation; then refused. At most "
        "ttl_s (unset: 300 or ttl_s, whichever is shorter).",
    )

    @model_validator(mode="after")
    def _answer_before_expiry(self) -> ApprovalsSection:
        # The gate records the person's answer against the request it asked about; a wait
        # longer than the request lives would let an answer approve an expired request.
        if self.elicit_timeout_s <= self.ttl_s:
            return self
        if "elicit_timeout_s" not in self.model_fields_set:
            self.elicit_timeout_s = self.ttl_s  # the default, shortened to fit
            return self
        raise ValueError(
            f"elicit_timeout_s ({self.elicit_timeout_s:g}) must not exceed ttl_s "
            f"({self.ttl_s:g}): an answer would come after its request expired"
        )


class ModelPrice(_Strict):
    """What one model costs, in US dollars per million tokens (for the judge's cost estimate)."""

    input: float = Field(ge=0, description="Dollars per million input tokens.", examples=[1.0])
    output: float = Field(ge=0, description="Dollars per million output tokens.", examples=[5.0])


def _default_prices() -> dict[str, ModelPrice]:
    # List prices when this was written; a deployment with other terms sets its own table.
    return {
        "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0),
        "claude-sonnet-4-5": ModelPrice(input=3.0, output=15.0),
        "claude-opus-4-5": ModelPrice(input=5.0, output=25.0),
        "claude-opus-4-1": ModelPrice(input=15.0, output=75.0),
    }


class JudgeSection(_Strict):
    """The optional LLM judge, deployment-wide; policy files say where it runs ([[judge]])."""

    enabled: bool = Field(False, description="Run the judge at all.")
    model: str = Field(
        "claude-haiku-4-5", description="Model for rules that name none (a small, fast one)."
    )
    base_url: str | None = Field(
        None,
        description="A Messages-API compatible endpoint (unset: Anthropic's).",
        examples=["http://127.0.0.1:8080"],
    )
    api_key_env: str = Field(
        "ANTHROPIC_API_KEY",
        description="Environment variable that holds the API key (never logged). "
        "Unset or empty: the judge is unavailable and on_error applies.",
    )
    timeout_s: float = Field(
        20.0, gt=0, description="Deadline of one judge call, waiting for a free slot included."
    )
    on_error: Literal["pass", "fail"] = Field(
        "pass",
        description="When the judge cannot give a verdict (no key, outage, timeout, budget "
        "spent, too busy): pass (fail open) or fail (fail closed); recorded as degraded.",
    )
    on_fail: Literal["reject", "fallback", "warn"] = Field(
        "reject", description="What a negative verdict does to the decision."
    )
    members: list[str] = Field(
        default_factory=list, description="Members the judge runs for (empty: every member)."
    )
    max_tokens: int = Field(
        512, ge=64, le=4096, description="Most output tokens one verdict may use."
    )
    max_revisions: int = Field(
        2,
        ge=0,
        le=20,
        description="Revisions a session may make of one subject (assertion id, tool, or "
        "content) after needs_revision; the next one is rejected as max_iterations_reached.",
    )
    max_retries: int = Field(
        0,
        ge=0,
        le=5,
        description="Retries of a call the SDK may make on 429, 5xx or a lost connection, "
        "within timeout_s.",
    )
    max_in_flight: int = Field(
        4, ge=1, le=64, description="Judge calls sent to the model at the same time."
    )
    max_waiting: int = Field(
        8,
        ge=0,
        le=1024,
        description="Verifications that may wait for a free slot; beyond that the judge is "
        "busy (on_error applies), so waiting never ties up every worker.",
    )
    cache_ttl_s: float = Field(
        3600.0, ge=0, description="How long a verdict is reused for the same question (0: never)."
    )
    cache_entries: int = Field(4096, ge=0, description="Verdicts kept in the cache.")
    budget_session_usd: float = Field(
        0.5, ge=0, description="Most one session may spend on the judge (0: no limit)."
    )
    budget_day_usd: float = Field(
        20.0,
        ge=0,
        description="Most this process may spend on the judge per UTC day (0: no limit).",
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=_default_prices,
        description="Price per model, added to the built-in table (claude-haiku-4-5, "
        "claude-sonnet-4-5, claude-opus-4-5, claude-opus-4-1). A model matches its name or the "
        "longest listed prefix of it (a dated version); one not listed is priced as the "
        "dearest listed, so an estimate is never low.",
    )

    @field_validator("prices", mode="after")
    @classmethod
    def _with_default_prices(cls, prices: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        return {**_default_prices(), **prices}  # a deployment adds a model, keeps the rest


class LimitsSection(_Strict):
    """Bounds that keep one request from costing the guard seconds of work."""

    max_text_chars: int = Field(
        8000,
        ge=100,
        description="Longest content or text argument the checks read. A longer one is "
        "rejected (pre.size) and only its first max_text_chars characters are analysed.",
    )


class TelemetrySection(_Strict):
    """Decisions as OpenTelemetry spans over OTLP/HTTP, off by default (needs lingyi[telemetry])."""

    # One span per verification, with member, tool, type, decision, failed check codes, the
    # shadow decision and the latency as attributes; never the content or the arguments.

    enabled: bool = Field(False, description="Export one span per guarded call.")
    endpoint: str = Field(
        "http://127.0.0.1:4318",
        description="OTLP/HTTP endpoint of the collector; spans go to {endpoint}/v1/traces "
        "(an endpoint that already ends in /v1/traces is used as it is).",
    )
    service_name: str = Field(
        "lingyi-guard", min_length=1, description="The service.name of the spans' resource."
    )
    timeout_s: float = Field(
        5.0,
        gt=0,
        description="Deadline of one export, in the background: a slow or absent collector "
        "never delays a call; spans past the queue are dropped.",
    )
    headers_env: str = Field(
        "",
        description="Environment variable holding extra export headers as name=value pairs "
        "separated by commas (a collector's token; never logged). Empty: none.",
    )


class UpstreamEvidence(_Strict):
    """Which parts of one upstream tool's result are evidence a later assertion may cite."""

    tool: str = Field(
        description="The upstream tool's own name (without the prefix), e.g. git_log."
    )
    kind: Literal["id", "url", "title"] = Field(
        "id", description="What a match is: an evidence id, a URL or a title."
    )
    pattern: str | None = Field(
        None,
        description="Regex over the result's text; group 1 (or the whole match) is the value.",
        examples=[r"Commit: ([0-9a-f]{40})"],
    )
    field: str | None = Field(
        None, description="A key of the structured result whose value(s) are the evidence."
    )

    @model_validator(mode="after")
    def _one_source(self) -> UpstreamEvidence:
        if (self.pattern is None) == (self.field is None):
            raise ValueError("give exactly one of pattern or field")
        if self.pattern is not None:
            re.compile(self.pattern)  # a bad regex fails at load, naming the key
        return self


class UpstreamEntry(_Strict):
    """An upstream MCP server whose tools the guard serves as <name>.<tool>, guarded."""

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_-]*$",
        description="Prefix of its tools (git → git.git_commit); letters, digits, _ and -.",
    )
    command: list[str] | None = Field(
        None,
        min_length=1,
        description=(
            "Stdio: the command and its arguments; a first word python, python3 or {python} is "
            "the interpreter running the guard (docs/gateway.md)."
        ),
        examples=[["python", "-m", "mcp_server_git"]],
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Stdio: extra environment variables for the command."
    )
    url: str | None = Field(
        None,
        description="Streamable HTTP: the endpoint URL.",
        examples=["http://127.0.0.1:9000/mcp"],
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Streamable HTTP: headers sent with every request."
    )
    members: list[str] = Field(
        min_length=1,
        description="The members that may use its tools (each tool still needs a policy).",
    )
    timeout_s: float = Field(30.0, gt=0, description="Longest wait for one call, in seconds.")
    connect_timeout_s: float = Field(
        30.0, gt=0, description="Longest wait to start and initialize the upstream, in seconds."
    )
    evidence: list[UpstreamEvidence] = Field(
        default_factory=list,
        description="Evidence extracted from results, per tool (e.g. commit SHAs from git_log).",
    )
    on_change: Literal["withhold", "flag"] = Field(
        "withhold",
        description="A tool whose description or schema changes after start-up (a rug pull): "
        "withhold it until the guard restarts (reviewed), or only flag it in the log.",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (Streamable HTTP)")
        return self


class ConfigFile(_Strict):
    """Keys at the top of lingyi.toml, before any table."""

    language: Literal["zh", "en"] = Field(
        "zh",
        description="Language of reasons and recommendations (a member's policy may override it).",
    )
    timezone: str = Field(
        "", description="IANA zone for days and weeks in stats and reports (empty: the machine's)."
    )
    paths: PathsSection = Field(default_factory=PathsSection)
    log: LogSection = Field(default_factory=LogSection)
    store: StoreSection = Field(default_factory=StoreSection)
    policies: PoliciesSection = Field(default_factory=PoliciesSection)
    cli: CliSection = Field(default_factory=CliSection)
    ledger: LedgerSection = Field(default_factory=LedgerSection)
    data_sources: dict[str, DataSourceEntry] = Field(
        default_factory=dict, description="Registered data sources, by name."
    )
    evidence: EvidenceSection = Field(default_factory=EvidenceSection)
    traces: TracesSection = Field(default_factory=TracesSection)
    limits: LimitsSection = Field(default_factory=LimitsSection)
    server: ServerSection = Field(default_factory=ServerSection)
    judge: JudgeSection = Field(default_factory=JudgeSection)
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection)
    approvals: ApprovalsSection = Field(default_factory=ApprovalsSection)
    redact: RedactSection = Field(default_factory=RedactSection)
    upstreams: list[UpstreamEntry] = Field(
        default_factory=list, description="Upstream MCP servers served through the guard."
    )

    @model_validator(mode="after")
    def _unique_upstreams(self) -> ConfigFile:
        names = [u.name for u in self.upstreams]
        if dupes := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"upstreams: the name {dupes[0]!r} is used twice; names are prefixes")
        return self

    @model_validator(mode="after")
    def _known_approvers(self) -> ConfigFile:
        tokens = {t.name for t in self.server.tokens}
        if unknown := [a for a in self.approvals.approvers if a not in tokens]:
            raise ValueError(
                f"approvals.approvers: {unknown[0]!r} names no [[server.tokens]] entry "
                f"(tokens: {', '.join(sorted(tokens)) or 'none'})"
            )
        return self


OriginKind = Literal["flag", "env", "cwd", "packaged", "file", "default"]


class Origin(BaseModel):
    """Where a setting in effect came from: ``kind`` for programs, ``detail`` for people."""

    kind: OriginKind
    detail: str


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
    log_key_file: Path | None = None
    checkpoints_path: Path | None = None  # None: none configured, or the log was overridden
    store_path: Path | None = None  # None: beside the log (the default, or the log overridden)
    origins: dict[str, Origin] = Field(default_factory=dict)

    @property
    def language(self) -> str:
        return self.raw.language

    @property
    def timezone(self) -> str:
        return self.raw.timezone


class ConfigFileError(ConfigError):
    """A config file that does not validate: every problem, each naming its key."""

    def __init__(self, path: Path, found: list[Problem]) -> None:
        self.path, self.problems = path, found
        super().__init__("\n".join(f"{path}: {p.key}: {p.message}" for p in found))


_LOCAL = Path("config/lingyi.toml")


def find_config(explicit: str | Path | None = None) -> Path:
    return locate_config(explicit)[0]


def locate_config(explicit: str | Path | None = None) -> tuple[Path, Origin]:
    """The config file by the search order, and which rule of the order found it."""
    if explicit:
        return Path(explicit), Origin(kind="flag", detail="--config")
    if env := os.environ.get("LINGYI_CONFIG"):
        return Path(env), Origin(kind="env", detail="$LINGYI_CONFIG")
    if _LOCAL.is_file():
        return _LOCAL, Origin(kind="cwd", detail=f"./{_LOCAL.as_posix()}")
    return defaults_dir() / "lingyi.toml", Origin(kind="packaged", detail="packaged defaults")


def load_config(explicit: str | Path | None = None, *, log: str | Path | None = None) -> Config:
    """Load the config by the search order and apply the log/council overrides."""
    path, found_by = locate_config(explicit)
    raw = _parse(path)
    configure(raw.redact)  # what is redacted follows the config that is in use
    base = path.resolve().parent
    log_value, log_origin = _override(log, "--log", "LINGYI_LOG", raw, "log", path)
    council, council_origin = _override(None, "", "LINGYI_COUNCIL", raw, "council", path)
    return Config(
        source=path.resolve(),
        raw=raw,
        validators_dir=_under(base, raw.paths.validators),
        log_path=_absolute(log_value, base, from_file=log_origin.kind in ("file", "default")),
        council_path=_absolute(council, base, from_file=council_origin.kind in ("file", "default")),
        kb_dir=_under(base, raw.paths.knowledge_base),
        repo_roots=[_under(base, p) for p in raw.paths.repo_roots],
        data_roots=[_under(base, p) for p in raw.paths.data_roots],
        log_key_file=_under(base, raw.log.key_file) if raw.log.key_file else None,
        checkpoints_path=_checkpoints(raw, base, log_origin),
        store_path=_under(base, raw.store.path)
        if raw.store.path and log_origin.kind not in ("flag", "env")
        else None,
        origins={
            "config": found_by,
            "log": log_origin,
            "council": council_origin,
            **{key: _file_origin(raw, key, path) for key in _PATH_KEYS},
        },
    )


_PATH_KEYS = ("validators", "knowledge_base", "repo_roots", "data_roots")


def _checkpoints(raw: ConfigFile, base: Path, log_origin: Origin) -> Path | None:
    """The checkpoint file, for the config's own log only: the checkpoints of another log
    (--log, $LINGYI_LOG) in the same file would make both unverifiable."""
    if not raw.log.checkpoints or log_origin.kind in ("flag", "env"):
        return None
    return _under(base, raw.log.checkpoints)


def _override(
    given: str | Path | None, flag: str, env: str, raw: ConfigFile, key: str, path: Path
) -> tuple[str, Origin]:
    """A path that a flag, then an environment variable, may override before the file."""
    if given:
        return str(given), Origin(kind="flag", detail=flag)
    if value := os.environ.get(env):
        return value, Origin(kind="env", detail=f"${env}")
    return str(getattr(raw.paths, key)), _file_origin(raw, key, path)


def _file_origin(raw: ConfigFile, key: str, path: Path) -> Origin:
    if key in raw.paths.model_fields_set:
        return Origin(kind="file", detail=f"paths.{key} in {path}")
    return Origin(kind="default", detail=f"default of paths.{key}, relative to {path}")


def _absolute(value: str, base: Path, *, from_file: bool) -> Path:
    # A flag or variable is relative to where the user is, a file's value to the file.
    if from_file:
        return _under(base, value)
    return Path(value).expanduser().absolute()


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
        raw = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigFileError(path, problems(exc, ConfigFile)) from exc
    if found := _data_source_problems(raw) + _token_name_problems(raw):
        raise ConfigFileError(path, found)
    _warn_deprecated(raw, path)
    return raw


def _token_name_problems(raw: ConfigFile) -> list[Problem]:
    """A second token of one name: the log and the approvals could not tell them apart."""
    names = [t.name for t in raw.server.tokens]
    return [
        Problem(f"server.tokens[{i}].name", f"{name!r} is used twice; one token per name")
        for i, name in enumerate(names)
        if name in names[:i]
    ]


# Keys an older lingyi read, still accepted so its configs load: the key → why it is gone.
DEPRECATED = {
    ("cli", "warm"): "the warm process is gone; [cli] server verifies through a running server",
    ("policies", "cache"): "the parse cache is gone; policies are read in full at every start",
}


def _warn_deprecated(raw: ConfigFile, path: Path) -> None:
    """One line on stderr per deprecated key the file sets (stdout stays the command's)."""
    for (section, key), why in DEPRECATED.items():
        if key in getattr(raw, section).model_fields_set:
            sys.stderr.write(
                f"lingyi: warning: {path}: [{section}] {key} is deprecated and ignored "
                f"({why}): remove it\n"
            )


def _data_source_problems(raw: ConfigFile) -> list[Problem]:
    """What the data backend would refuse (a file without a path, an http source without an
    http(s) URL), found when the config loads instead of when the server starts."""
    from lingyi.backends.data import DataSource  # the backend owns the rule; loaded only here

    found: list[Problem] = []
    for name, entry in raw.data_sources.items():
        try:
            DataSource(name=name, **entry.model_dump())
        except ValidationError as exc:
            found += problems(exc, DataSource, prefix=f"data_sources.{name}")
    return found
