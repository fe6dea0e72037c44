"""The gateway: upstream MCP servers whose tools the guard serves under a prefix, guarded.

- :mod:`.connection` — one upstream: the real MCP client (stdio or Streamable HTTP) on the
  gateway's own event loop thread, calls bounded by the upstream's timeout;
- :mod:`.merge` — an upstream tool's policy merged with the upstream's own input schema;
- :mod:`.evidence` — the evidence an upstream result holds, as the config names it;
- :mod:`.audit` — upstream results checked before they reach the model;
- :mod:`.gateway` — every upstream of a config: connect, list, serve, call.
"""

from lingyi.gateway.gateway import Gateway, Listing, ServedTool, UpstreamResult

__all__ = ["Gateway", "Listing", "ServedTool", "UpstreamResult"]
