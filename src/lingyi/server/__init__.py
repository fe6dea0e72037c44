"""The MCP server: every real tool behind the constraint layer.

One module per concern:

- :mod:`.auth` — bearer tokens bound to members, Host/Origin allow-lists;
- :mod:`.app` — the runtime (guard, ledger, council, backends, worker hop, drain); a guarded
  call runs through :mod:`lingyi.pipeline` and answers with :mod:`lingyi.verdict`;
- :mod:`.tools` — the tool table built from the policies (raw arguments, the guard's own
  tools in ``guard_tools.toml``, the start-up match of policy and served tools);
- :mod:`.executors` — the real work behind each policy tool;
- :mod:`.resources` — policies, the recent log and the weekly report as MCP resources;
- :mod:`.notifications` — the MCP logging capability (verdicts as log messages);
- :mod:`.listchanged` — ``notifications/tools/list_changed`` when what is served changes;
- :mod:`.approve` — ``approve_call``, an approver's answer to a held call;
- :mod:`.build` — the SDK's low-level ``Server`` over a :class:`GuardApp`;
- :mod:`.transports` — stdio and Streamable HTTP.
"""

from lingyi.server.app import GuardApp
from lingyi.server.auth import StaticTokens, is_loopback, transport_security
from lingyi.server.build import GuardServer, build_server
from lingyi.server.resources import recent_records
from lingyi.server.tools import tool_problems
from lingyi.server.transports import http_app, serve_http, serve_stdio, start_banner

__all__ = [
    "GuardApp",
    "GuardServer",
    "StaticTokens",
    "build_server",
    "http_app",
    "is_loopback",
    "recent_records",
    "serve_http",
    "serve_stdio",
    "start_banner",
    "tool_problems",
    "transport_security",
]
