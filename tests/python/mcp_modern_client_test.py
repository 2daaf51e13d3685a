"""Real-client checks of MCP 2026-07-28 with the official MCP Python SDK's `Client`.

Run against a live `recap serve` by tests/mcp_real_clients.rs (or by hand):

    MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... python tests/python/mcp_modern_client_test.py

1. Pinned to 2026-07-28 (`mode="2026-07-28"`: no initialize, no discover probe, no
   fallback) with a personal access token: list the tools (caching hints included),
   call each one, read its JSON result, and an unknown meeting is a tool error.
2. `mode="auto"`: the client probes `server/discover` and, finding 2026-07-28 listed,
   stays on it.
3. Pinned to 2026-07-28 with the SDK's OAuth client provider: discovery, dynamic
   registration, authorization (the consent page answered as a user would, with the
   PAT), token exchange with PKCE, then a tool call with the svc_oat_ token.

That no initialize reached the server is checked from the server's side, by the Rust
test reading the server's debug log. Exits non-zero on the first failed check.
"""

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import CALLS, EXPECTED_TOOLS, MCP_URL, PAT, MemoryStorage, check, main, oauth_provider

# The handshake-era checks' result reading and consent page, in the same SDK's names.
from mcp_client_test import Browser, tool_json

MODERN = "2026-07-28"


def modern_client(http, mode=MODERN):
    return Client(streamable_http_client(MCP_URL, http_client=http, terminate_on_close=False), mode=mode)


async def call_every_tool(client):
    """Lists the tools (caching hints included) and calls every one on a connected client."""
    tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    check(names == EXPECTED_TOOLS, f"tools/list: {names}")
    check(tools.ttl_ms == 3_600_000 and tools.cache_scope == "public", f"caching hints: {tools.ttl_ms} {tools.cache_scope}")
    for tool in tools.tools:
        check(tool.annotations.read_only_hint is True, f"annotations of {tool.name}")
        check(tool.output_schema is not None, f"outputSchema of {tool.name}")
    for name, arguments in CALLS.items():
        result = await client.call_tool(name, arguments)
        data = tool_json(result)
        check(result.structured_content == data, f"{name}: structuredContent is the text's JSON")
        print(f"  {name}: ok ({', '.join(sorted(data))})")
    missing = await client.call_tool("get_meeting", {"meeting_id": "mtg_nope"})
    check(missing.is_error, "an unknown meeting is a tool error")
    check("meeting mtg_nope not found" in missing.content[0].text, missing.content[0].text)


async def pinned_with_pat():
    print(f"PAT, pinned to {MODERN}")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {PAT}"}, timeout=30) as http:
        async with modern_client(http) as client:
            await call_every_tool(client)


async def auto_with_pat():
    print("PAT, auto: server/discover then 2026-07-28")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {PAT}"}, timeout=30) as http:
        async with modern_client(http, mode="auto") as client:
            tools = await client.list_tools()
            check([tool.name for tool in tools.tools] == EXPECTED_TOOLS, "tools/list after discover")
            check(tools.ttl_ms is not None, "a modern list carries ttlMs, so the client stayed on 2026-07-28")
            tool_json(await client.call_tool("list_meetings", {"limit": 1}))
            print("  discover, list, call: ok")


async def pinned_with_oauth():
    print(f"OAuth, pinned to {MODERN}: discovery, registration, authorization, token exchange")
    storage = MemoryStorage()
    browser = Browser()
    provider = oauth_provider("recap python modern test", storage, browser)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with modern_client(http) as client:
            tools = await client.list_tools()
            check([tool.name for tool in tools.tools] == EXPECTED_TOOLS, "tools/list with an OAuth token")
            check(storage.tokens is not None and storage.tokens.access_token.startswith("svc_oat_"), f"an svc_oat_ token: {storage.tokens}")
            check(storage.client_info is not None and storage.client_info.client_id.startswith("mcpc_"), "a registered client")
            tool_json(await client.call_tool("list_meetings", {"limit": 1}))
            print("  tool call with svc_oat_: ok")


async def checks():
    await pinned_with_pat()
    await auto_with_pat()
    await pinned_with_oauth()
    print("all modern python client checks passed")


if __name__ == "__main__":
    main(checks)
