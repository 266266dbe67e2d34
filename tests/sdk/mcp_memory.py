"""The official MCP Python SDK (`mcp`) against memproxy's `/mcp` (Streamable HTTP).

Usage: python mcp_memory.py BASE_URL KEY ANA_KEY GLOBEX_KEY (ANA_KEY: a key restricted to user
`ana`; GLOBEX_KEY: another tenant's). Prints "ok <check>" per passed check; any failure raises.
The Rust test has already recorded a chat turn of user `ana` ("I moved to Lisbon last spring.", which the scripted memory LLM stores as "The user moved to Lisbon last spring.")
and given her agent `coach` a `human` block and an archival passage, and checks afterwards, through the management API and a chat, what these calls left behind.
"""

import asyncio
import json
import sys
from contextlib import asynccontextmanager

import httpx2
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

BASE, KEY, ANA_KEY, GLOBEX_KEY = sys.argv[1:5]
TOOLS = {"search_memories", "add_memory", "list_memories", "update_memory", "delete_memory",
         "search_conversations", "get_core_memory", "edit_core_memory", "search_archival"}


@asynccontextmanager
async def session(user, key=KEY):
    headers = {"Authorization": f"Bearer {key}"}
    if user is not None:
        headers["X-Memproxy-User"] = user
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(f"{BASE}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                yield client


async def call(client, name, arguments):
    result = await client.call_tool(name, arguments)
    text = result.content[0].text
    return result.is_error, json.loads(text)


def check(condition, name, detail=""):
    if not condition:
        raise AssertionError(f"check {name} failed: {detail}")
    print(f"ok {name}", flush=True)


async def main():
    # add_memory is reconciled: the Rust test scripted the memory LLM's two reconcile answers,
    # an UPDATE of M0 and then a failure.
    async with session("cyd") as cyd:
        failed, nurse = await call(cyd, "add_memory", {"text": "Cyd works as a nurse in Leeds."})
        check(not failed and nurse["event"] == "added" and nurse["created"], "reconcile-add", nurse)
        failed, teacher = await call(cyd, "add_memory", {"text": "Cyd now works as a teacher in Leeds."})
        check(not failed and teacher["event"] == "updated" and teacher["id"] == nurse["id"]
              and not teacher["created"], "reconcile-update", teacher)
        failed, rows = await call(cyd, "list_memories", {})
        live = [m["text"] for m in rows["memories"]]
        check(live == ["Cyd works as a teacher in Leeds."], "reconcile-list", live)
        failed, stored = await call(cyd, "add_memory", {"text": "Cyd works as a teacher in Leeds on Mondays."})
        check(not failed and stored["event"] == "added" and stored["reconciled"] is False
              and "memory LLM failed" in stored["note"], "reconcile-llm-down", stored)
        failed, refusal = await call(cyd, "add_memory", {"text": "x" * 4001})
        check(failed and "at most 4000" in refusal["error"], "reconcile-too-long", refusal)

    async with session("ana") as ana:
        listed = await ana.list_tools()
        names = {tool.name for tool in listed.tools}
        check(names == TOOLS, "list-tools", names)
        check(all(tool.input_schema.get("type") == "object" for tool in listed.tools), "schemas")

        failed, added = await call(ana, "add_memory", {"text": "Ana keeps bees on her roof."})
        check(not failed and added["created"] is True, "add", added)
        failed, again = await call(ana, "add_memory", {"text": "Ana keeps bees on her roof."})
        check(not failed and again["created"] is False and again["id"] == added["id"], "duplicate", again)

        failed, found = await call(ana, "search_memories", {"query": "bees on the roof"})
        texts = [hit["text"] for hit in found["results"]]
        check(not failed and "Ana keeps bees on her roof." in texts, "search", texts)

        failed, updated = await call(ana, "update_memory",
                                     {"id": added["id"], "text": "Ana keeps two hives of bees on her roof."})
        check(not failed and updated["updated"], "update", updated)
        failed, rows = await call(ana, "list_memories", {})
        live = [m["text"] for m in rows["memories"]]
        check("Ana keeps two hives of bees on her roof." in live
              and "Ana keeps bees on her roof." not in live, "list", live)

        failed, car = await call(ana, "add_memory", {"text": "Ana's old car was a red Fiat."})
        failed, deleted = await call(ana, "delete_memory", {"id": car["id"]})
        failed_list, rows = await call(ana, "list_memories", {"include_invalid": True})
        check(not failed and deleted["deleted"]
              and all(m["id"] != car["id"] for m in rows["memories"]), "delete", rows)

        failed, turns = await call(ana, "search_conversations", {"query": "Lisbon"})
        said = [hit["text"] for hit in turns["results"]]
        check(not failed and any("Lisbon" in text for text in said), "search-conversations", said)

        # An explicit-mode agent's core and archival memory.
        failed, core = await call(ana, "get_core_memory", {"agent": "coach"})
        human = [b for b in core["blocks"] if b["label"] == "human"]
        check(not failed and human and human[0]["value"] == "Name: Ana.", "core-get", core)
        failed, edited = await call(ana, "edit_core_memory",
                                    {"agent": "coach", "label": "human", "value": "Name: Ana. Keeps bees."})
        check(not failed and edited["block"]["value"] == "Name: Ana. Keeps bees.", "core-edit", edited)
        failed, refusal = await call(ana, "edit_core_memory", {"agent": "coach", "label": "nope", "value": "x"})
        check(failed and "human" in refusal["error"], "core-edit-unknown", refusal)
        failed, passages = await call(ana, "search_archival", {"agent": "coach", "query": "marathon plan"})
        texts = [hit["text"] for hit in passages["results"]]
        check(not failed and "Ana's marathon plan: 16 weeks." in texts, "archival", texts)

        # Resources: recent memories and the agent's core memory, as Markdown.
        listed = await ana.list_resources()
        uris = {str(r.uri) for r in listed.resources}
        check({"memproxy://memories/recent", "memproxy://agents/coach/core-memory"} <= uris,
              "resources-list", uris)
        recent = await ana.read_resource("memproxy://memories/recent")
        text = recent.contents[0].text
        check(text.index("Ana keeps two hives of bees on her roof.") < text.index("The user moved to Lisbon")
              and "red Fiat" not in text, "resources-recent", text)
        core = await ana.read_resource("memproxy://agents/coach/core-memory")
        text = core.contents[0].text
        check("## human" in text and "Name: Ana. Keeps bees." in text, "resources-core", text)
        templates = await ana.list_resource_templates()
        check([str(t.uri_template) for t in templates.resource_templates]
              == ["memproxy://agents/{agent}/core-memory"], "resources-templates", templates)
        try:
            await ana.read_resource("memproxy://agents/nobody/core-memory")
            check(False, "resources-unknown", "no error")
        except MCPError as error:
            check("nobody" in str(error), "resources-unknown", error)

        # Bad arguments are a tool error the model can read; an unknown tool a protocol error.
        failed, refusal = await call(ana, "update_memory", {"id": "seven", "text": "x"})
        check(failed and "bad arguments" in refusal["error"], "bad-arguments", refusal)
        failed, refusal = await call(ana, "update_memory", {"id": 999999, "text": "Ana likes tea."})
        check(failed and "not found" in refusal["error"], "unknown-id", refusal)
        failed, refusal = await call(ana, "search_memories", {"query": "   "})
        check(failed, "empty-query", refusal)
        try:
            await ana.call_tool("drop_all_tables", {})
            check(False, "unknown-tool", "no error")
        except MCPError as error:
            check("drop_all_tables" in str(error), "unknown-tool", error)

    # Another user of the same key sees none of Ana's memories.
    async with session("bob") as bob:
        failed, found = await call(bob, "search_memories", {"query": "bees on the roof"})
        check(not failed and found["results"] == [], "isolation", found)
        failed, rows = await call(bob, "list_memories", {})
        check(rows["memories"] == [], "isolation-list", rows)
        failed, core = await call(bob, "get_core_memory", {"agent": "coach"})
        check(core["blocks"] == [], "isolation-core", core)
        listed = await bob.list_resources()
        uris = [str(r.uri) for r in listed.resources]
        check(uris == ["memproxy://memories/recent"], "isolation-resources", uris)
        recent = await bob.read_resource("memproxy://memories/recent")
        check("bees" not in recent.contents[0].text, "isolation-recent", recent)
        try:
            await bob.read_resource("memproxy://agents/coach/core-memory")
            check(False, "isolation-resource-core", "Bob read Ana's agent")
        except MCPError as error:
            check("coach" in str(error), "isolation-resource-core", error)

    # No user: every call says how to name one.
    async with session(None) as nobody:
        failed, refusal = await call(nobody, "list_memories", {})
        check(failed and "x-memproxy-user" in refusal["error"], "no-user", refusal)

    # A key restricted to Ana serves Ana without a header, and never Bob.
    async with session(None, key=ANA_KEY) as own:
        failed, rows = await call(own, "list_memories", {})
        live = [m["text"] for m in rows["memories"]]
        check(not failed and "Ana keeps two hives of bees on her roof." in live, "user-key", live)
    async with session("bob", key=ANA_KEY) as other:
        failed, refusal = await call(other, "list_memories", {})
        check(failed and "only for user 'ana'" in refusal["error"], "user-key-other", refusal)

    # Another tenant's user `ana` is someone else.
    async with session("ana", key=GLOBEX_KEY) as stranger:
        failed, rows = await call(stranger, "list_memories", {})
        failed_search, found = await call(stranger, "search_memories", {"query": "bees on the roof"})
        check(not failed and rows["memories"] == [] and found["results"] == [], "isolation-tenant", rows)

    # A wrong key never gets a session (the SDK raises on the 401; its exception type varies).
    connected = False
    try:
        async with session("ana", key="wrong-key") as intruder:
            await intruder.list_tools()
            connected = True
    except Exception:  # noqa: BLE001
        pass
    check(not connected, "wrong-key", "connected with a wrong key")


asyncio.run(main())
