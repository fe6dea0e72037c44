"""post_council_message never writes a fabricated relay onto the council record.

Driven through a real MCP client against a temporary deployment (helpers of test_server):
a member posts its own news, then another member relays it faithfully, fabricates it behind
its own name and a split name, names a second speaker who said nothing, or relays it in a
list item, a table row or a label, or quotes a fabrication in a fence as an example. Only
the posts whose relays are on record (or that relay nothing) reach the council file.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp import Client
from mcp_types import CallToolResult

from tests.test_server import deploy, verdict, with_client

POSTS = [
    ("lingflow", "v2.9 迁移脚本已合入主干，CI 全绿。", "approved"),
    ("lingyi", "LingYi here. LingFlow told me the v2.9 migration script is merged.", "approved"),
    ("lingyi", "灵依：灵 通说 v2.9 的迁移脚本还没合入", "rejected"),  # own name, split name
    ("lingyi", "灵通和灵研都说 v2.9 迁移脚本已合入", "rejected"),  # 灵研 said nothing
    ("lingzhi", "靈通說 v2.9 的遷移腳本已經合入", "approved"),  # traditional script
    # Markdown and speaker labels relay as much as a speech verb does (issue 25 class 3)
    ("lingyi", "- 灵通：v2.9 迁移脚本还没合入", "rejected"),
    ("lingyi", "| 灵通 | v2.9 迁移脚本还没合入 |", "rejected"),
    ("lingyi", "【灵通】v2.9 迁移脚本还没合入", "rejected"),
    ("lingyi", "反例，别这样写：\n```\n灵通说 v2.9 迁移脚本还没合入\n```", "approved"),
]


def test_a_fabricated_relay_is_refused_and_never_posted(tmp_path: Path) -> None:
    """Each post is screened by its relays; refused posts leave the council file untouched."""
    dep = deploy(tmp_path / "deploy")
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        for member, content, _ in POSTS:
            args = {"member": member, "content": content}
            out.append(await client.call_tool("post_council_message", args))

    with_client(dep, body)
    assert [verdict(r)["decision"] for r in out] == [d for _, _, d in POSTS]
    lines = (dep.root / "council.jsonl").read_text(encoding="utf-8").splitlines()
    posted = [json.loads(line)["content"] for line in lines]
    assert posted == [c for _, c, d in POSTS if d == "approved"]
