"""The real work behind each policy tool, with no guard logic: the guard has already approved
the arguments (or offered the fallback's) by the time an executor runs.

Executors read the arguments as given: ``tool.args_schema`` validated them with the policy's
schema, so nothing here coerces. :data:`IMPLEMENTATIONS` is what the server can serve; the
policies must declare exactly these tools (:func:`lingyi.server.tools.tool_problems`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from lingyi import messages
from lingyi.backends import git_results as results
from lingyi.backends.data import AccessResult, Analysis
from lingyi.backends.traces import TraceSearch
from lingyi.errors import BackendError
from lingyi.models import Evidence
from lingyi.policy import MemberPolicy
from lingyi.server.app import Executor, Run
from lingyi.verdict import Guarded, SearchHits

if TYPE_CHECKING:  # GitPython loads with the first git call, not when the server starts
    import git

DEFAULT_LIMIT = 5


def search(run: Run) -> tuple[SearchHits, list[Evidence]]:
    limit = run.args.get("limit", DEFAULT_LIMIT)
    domains: list[str | None] = list(run.args.get("domains") or []) or [None]
    kb = run.app.kb
    hits = [h for d in domains for h in kb.search(run.args["query"], limit, domain=d)]
    base = run.app.config.raw.evidence.kb_url_base
    best = [h.with_url(base) for h in sorted(hits, key=lambda h: -h.score)[:limit]]
    return SearchHits(hits=best), [h.to_evidence() for h in best]


def _repo(run: Run) -> Any:
    roots = run.app.config.repo_roots
    if not roots:
        raise BackendError(messages.text(run.app.config.language, "server.no_repo_roots"))
    from lingyi.backends import git as gitb  # GitPython with it: on the first git call

    return gitb.open_repo(run.args.get("repo_path") or roots[0], roots)


def author_of(owner: MemberPolicy) -> git.Actor:
    """Commits are authored by the member that owns the tool, as its policy names it."""
    import git

    return git.Actor(owner.name, f"{owner.id}@council.local")


class _Evidenced(Protocol):
    def to_evidence(self) -> Evidence: ...


E = TypeVar("E", bound=_Evidenced)


def _in_repo(op: Callable[[Any, Run], E]) -> Callable[[Run], tuple[E, list[Evidence]]]:
    """A git tool: open the repository (inside the roots), run ``op``, evidence its result."""

    def execute(run: Run) -> tuple[E, list[Evidence]]:
        with _repo(run) as repo:
            done = op(repo, run)
        return done, [done.to_evidence()]

    return execute


def _commit(repo: Any, run: Run) -> results.CommitResult:
    from lingyi.backends import git as gitb

    return gitb.commit(
        repo,
        run.args["message"],
        paths=run.args.get("paths"),
        add_all=run.args.get("add_all", False),
        author=author_of(run.owner),
    )


def _branch(repo: Any, run: Run) -> results.BranchResult:
    from lingyi.backends import git as gitb

    return gitb.branch(repo, run.args["name"], start_point=run.args.get("start_point"))


def _push(repo: Any, run: Run) -> results.PushResult:
    from lingyi.backends import git as gitb

    force, dry_run = run.args.get("force", False), run.args.get("dry_run", False)
    return gitb.push(repo, run.args["remote"], run.args["branch"], force=force, dry_run=dry_run)


def _audit(repo: Any, run: Run) -> results.AuditReport:
    from lingyi.backends import git as gitb

    return gitb.audit_report(repo, run.args["version"])


def _access(run: Run) -> tuple[AccessResult, list[Evidence]]:
    done = run.app.data.access(run.args["source"])
    return done, [done.to_evidence()]


def _analyze(run: Run) -> tuple[Analysis, list[Evidence]]:
    args = run.args
    done = run.app.data.analyze(
        args["source"], columns=args.get("columns"), group_by=args.get("group_by")
    )
    return done, [done.to_evidence()]


HOUR_S = 3600


def _query_traces(run: Run) -> tuple[TraceSearch, list[Evidence]]:
    """The Tempo search; each trace id found is session evidence (in its one 32-digit form)."""
    backend, config = run.app.traces, run.app.config
    if backend is None:
        raise BackendError(messages.text(config.language, "server.no_trace_backend"))
    end = run.args.get("end") or int(time.time())
    start = run.args.get("start") or max(0, end - HOUR_S)
    limit = run.args.get("limit") or config.raw.traces.search_limit
    found = backend.search(run.args["service"], start, end, limit)
    return found, [hit.to_evidence() for hit in found.traces]


@dataclass(frozen=True)
class Implementation:
    """A policy tool's real work: the executor, its result model, the arguments it reads."""

    execute: Executor
    output: type[BaseModel]
    args: frozenset[str]
    required: frozenset[str]


def _impl(
    execute: Executor, output: type[BaseModel], required: str, optional: str = ""
) -> Implementation:
    need, may = frozenset(required.split()), frozenset(optional.split())
    return Implementation(execute, output, need | may, need)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "search_knowledge": _impl(search, Guarded[SearchHits], "query", "domains limit"),
    "git_commit": _impl(
        _in_repo(_commit), Guarded[results.CommitResult], "repo_path message", "paths add_all"
    ),
    "git_branch": _impl(
        _in_repo(_branch), Guarded[results.BranchResult], "repo_path name", "start_point"
    ),
    "git_push": _impl(
        _in_repo(_push), Guarded[results.PushResult], "repo_path remote branch", "force dry_run"
    ),
    "generate_audit_report": _impl(
        _in_repo(_audit), Guarded[results.AuditReport], "version", "repo_path"
    ),
    "access_data_source": _impl(_access, Guarded[AccessResult], "source"),
    "analyze_data": _impl(_analyze, Guarded[Analysis], "source", "columns group_by"),
    "query_traces": _impl(_query_traces, Guarded[TraceSearch], "service", "start end limit"),
}
