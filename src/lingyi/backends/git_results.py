"""What the git operations return: plain models, importable without GitPython.

The server registers each git tool with its result type when it starts; keeping the types
here lets it do that without importing GitPython (about 0.1 s), which loads on the first
git call (:mod:`lingyi.backends.git`, which re-exports these).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from lingyi.models import Evidence


class RepoState(BaseModel):
    """What a repository looks like right now (read-only snapshot)."""

    path: str
    branch: str | None
    detached: bool
    dirty: bool
    untracked: list[str] = Field(default_factory=list)
    merging: bool
    rebasing: bool
    head_sha: str | None


class CommitResult(BaseModel):
    sha: str
    short_sha: str
    branch: str
    message: str
    files: list[str] = Field(default_factory=list)

    def to_evidence(self) -> Evidence:
        title = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return Evidence(id=self.sha, title=title, snippet=f"{self.branch}: {len(self.files)} files")


class BranchResult(BaseModel):
    name: str
    sha: str

    def to_evidence(self) -> Evidence:
        return Evidence(id=f"branch:{self.name}@{self.sha[:12]}", title=f"branch {self.name}")


class PushResult(BaseModel):
    remote: str
    branch: str
    sha: str
    dry_run: bool
    summary: str

    def to_evidence(self) -> Evidence:
        kind = "dry-run push" if self.dry_run else "push"
        return Evidence(
            id=f"push:{self.remote}/{self.branch}@{self.sha[:12]}",
            title=f"{kind} {self.branch} to {self.remote}",
            snippet=self.summary,
        )


class AuditCommit(BaseModel):
    sha: str
    author: str
    date: str
    subject: str


class FileChange(BaseModel):
    path: str
    insertions: int
    deletions: int
    binary: bool = False


class AuditReport(BaseModel):
    id: str
    version: str
    previous: str | None
    commits: list[AuditCommit]
    files: list[FileChange]
    authors: list[str]
    markdown: str

    def to_evidence(self) -> Evidence:
        since = self.previous or "the root commit"
        snippet = f"{len(self.commits)} commits, {len(self.files)} files since {since}"
        return Evidence(id=self.id, title=f"audit report {self.version}", snippet=snippet)
