"""A deployment with the official git MCP server as an upstream (stdio), and its policies."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_server import Deployment, deploy, own_policies

REPO = '{ type = "path", required = true, roots = "repos", git_repo = true, description = "repository under the repo roots" }'
GIT_POLICIES = f"""

# The official git MCP server's tools, served as git.<tool> (the gateway).
[tools."git.git_status"]
read_only = true
args.repo_path = {REPO}

[tools."git.git_add"]
args.repo_path = {REPO}

[tools."git.git_commit"]
args.repo_path = {REPO}
args.message = {{ type = "string", required = true, min_length = 3, max_length = 2000 }}

[tools."git.git_log"]
read_only = true
args.repo_path = {REPO}
args.max_count = {{ type = "integer", min = 1, max = 100 }}
"""
GIT_UPSTREAM = f"""
[[upstreams]]
name = "git"
command = ["{sys.executable}", "-m", "mcp_server_git"]
members = ["lingflow"]
timeout_s = 20

[[upstreams.evidence]]
tool = "git_log"
pattern = 'Commit: ([0-9a-f]{{40}})'
"""


def git_deployment(root: Path, extra: str = "", policies: str = GIT_POLICIES) -> Deployment:
    """The test deployment with the git upstream configured and its tools owned by 灵通."""
    dep = deploy(root, GIT_UPSTREAM + extra)
    folder = own_policies(dep)
    flow = folder / "lingflow.toml"
    flow.write_text(flow.read_text(encoding="utf-8") + policies, encoding="utf-8")
    return dep


SERVER = Path(__file__).with_name("upstream_server.py")
FAKE_TOOLS = ("echo", "leak", "inject", "empty", "fail", "crash", "hang", "garbage", "mutate",
              "poisoned", "poisoned_arg", "retitle")  # fmt: skip
FAKE_POLICIES = "".join(
    f'\n[tools."fake.{name}"]\nread_only = true\n'
    + ('args.text = { type = "string", required = true, max_length = 1000 }\n' if name == "echo" else "")
    for name in FAKE_TOOLS
)  # fmt: skip


def fake_upstream(
    transport: str = "stdio", *, url: str = "", timeout_s: float = 3, on_change: str = "withhold"
) -> str:
    """The config of the test upstream (:mod:`tests.upstream_server`), for 灵通."""
    where = (
        f'url = "{url}"'
        if transport == "http"
        else f'command = ["{sys.executable}", "{SERVER}", "stdio"]'
    )
    return f"""
[[upstreams]]
name = "fake"
{where}
members = ["灵通"]
timeout_s = {timeout_s}
on_change = "{on_change}"

[[upstreams.evidence]]
tool = "echo"
kind = "url"
pattern = 'https://[^\\s]+'
"""
