"""A bare MCP server: the baseline that ``bench_server.py`` and ``bench_start.py`` measure against.

What a team would write without the guard: the same SDK (``MCPServer``), one
``search_knowledge`` tool making the same knowledge-base call as the guard's executor
(:func:`lingyi.server.executors.search`: every domain asked, the best ``limit`` hits) in the
same worker-thread hop (``anyio.to_thread.run_sync``), and returning the hits as structured
content. No policy, no verification, no ledger, no log, and nothing of lingyi imported but
the knowledge base itself.

    python benchmarks/bare_server.py KB_DIR [--domains JSON] [--http --port N]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import anyio
import structlog
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from lingyi.backends.kb import KBHit, KnowledgeBase


class SearchHits(BaseModel):
    hits: list[KBHit]


def build(kb: KnowledgeBase) -> MCPServer:
    """The bare server over ``kb``: one tool, the SDK's own argument handling."""
    server = MCPServer(name="bare-kb", log_level="WARNING")

    def search(query: str, domains: list[str] | None, limit: int) -> SearchHits:
        hits = [h for d in (domains or [None]) for h in kb.search(query, limit, domain=d)]
        return SearchHits(hits=sorted(hits, key=lambda h: -h.score)[:limit])

    @server.tool(name="search_knowledge", description="Search the knowledge base.")
    async def search_knowledge(
        query: str, domains: list[str] | None = None, limit: int = 5
    ) -> SearchHits:
        return await anyio.to_thread.run_sync(search, query, domains, limit)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("kb", type=Path, help="the knowledge-base folder")
    parser.add_argument("--domains", help="the KB's domains as a JSON list (default: any)")
    parser.add_argument("--http", action="store_true", help="Streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    # stdout is the protocol's: the knowledge base's log lines go to stderr, warnings only
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    domains = json.loads(args.domains) if args.domains else None
    kb = KnowledgeBase(args.kb, domains=domains)
    server = build(kb)
    try:
        if not args.http:
            anyio.run(server.run_stdio_async)
            return
        import uvicorn  # as lingyi serve --http: imported only for HTTP

        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=args.port, log_config=None,
                           access_log=False, log_level="warning")
        ).run()  # fmt: skip
    finally:
        kb.close()


if __name__ == "__main__":
    main()
