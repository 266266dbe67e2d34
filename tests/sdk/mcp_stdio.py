"""The official MCP Python SDK (`mcp`) launching `memproxy mcp` over stdio.

Usage: python mcp_stdio.py MEMPROXY_BINARY CONFIG_TOML. The Rust test has already saved Ana's bees
over HTTP in the same data directory, for tenant `acme` (the
proxy key's). Prints "ok <check>" per passed check; any failure raises.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.stdio import get_default_environment

BINARY, CONFIG = sys.argv[1], sys.argv[2]


def check(condition, name, detail=""):
    if not condition:
        raise AssertionError(f"check {name} failed: {detail}")
    print(f"ok {name}", flush=True)


async def call(client, name, arguments):
    result = await client.call_tool(name, arguments)
    return result.is_error, json.loads(result.content[0].text)


async def main():
    # The SDK passes the server only a few variables; the store's URL, when the test runs on
    # PostgreSQL, goes as an operator would pass it.
    env = {k: v for k, v in os.environ.items() if k == "MEMPROXY_DATABASE_URL"}
    params = StdioServerParameters(
        command=BINARY,
        args=["mcp", "--config", CONFIG, "--tenant", "acme", "--user", "ana"],
        env={**get_default_environment(), **env},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            names = {tool.name for tool in (await client.list_tools()).tools}
            check("search_memories" in names and "add_memory" in names, "stdio-tools", names)
            failed, found = await call(client, "search_memories", {"query": "bees on the roof"})
            texts = [hit["text"] for hit in found["results"]]
            check(not failed and any("bees" in t for t in texts), "stdio-same-memory", texts)
            failed, added = await call(client, "add_memory", {"text": "Ana plays the viola in a quartet."})
            check(not failed and added["created"] and "reconciled" not in added, "stdio-add", added)
            recent = await client.read_resource("memproxy://memories/recent")
            check("Ana plays the viola in a quartet." in recent.contents[0].text, "stdio-resources", recent)


asyncio.run(main())
