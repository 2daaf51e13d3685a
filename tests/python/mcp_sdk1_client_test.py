"""Real-client checks of the MCP server with the official MCP Python SDK's 1.x line.

Clients that have not moved to 2.x keep speaking the handshake era through the 1.x
`ClientSession`, with the 1.x names (camelCase result fields, httpx, a callback handler
returning `(code, state)`). Run against a live `recap serve` by
tests/mcp_real_clients.rs (or by hand), with the python of
`scripts/setup-python.sh --sdk1`:

    MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... python tests/python/mcp_sdk1_client_test.py

1. Over Streamable HTTP with a personal access token: initialize, list the nine tools
   in the server's order, call each one, and read its JSON text result.
2. With the SDK's OAuth client provider: discovery (RFC 9728, RFC 8414), dynamic
   registration, authorization (the consent page answered programmatically with the
   PAT, as a user would type it), token exchange with PKCE, a tool call with the
   svc_oat_ token, then the provider's own refresh of an expired access token.

That every connection began with initialize is checked from the server's side, by the
Rust test reading the server's debug log. Exits non-zero on the first failed check.
"""

import json

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import LATEST_PROTOCOL_VERSION

from common import CALLS, EXPECTED_TOOLS, MCP_URL, PAT, ConsentBrowser, MemoryStorage, check, main, oauth_provider


class Browser(ConsentBrowser):
    async def callback(self) -> tuple[str, str | None]:
        query = self.redirect_query()
        return query["code"], query.get("state")


def tool_json(result):
    check(not result.isError, f"tool failed: {result}")
    check(len(result.content) == 1 and result.content[0].type == "text", f"one text item expected: {result.content}")
    data = json.loads(result.content[0].text)
    check(result.structuredContent in (None, data), "structuredContent is the text's JSON")
    return data


async def initialize(session):
    initialized = await session.initialize()
    check(initialized.protocolVersion == LATEST_PROTOCOL_VERSION, f"negotiated {initialized.protocolVersion}, not the SDK's {LATEST_PROTOCOL_VERSION}")


async def call_every_tool(session):
    await initialize(session)
    tools = await session.list_tools()
    names = [tool.name for tool in tools.tools]
    check(names == EXPECTED_TOOLS, f"tools/list: {names}")
    for tool in tools.tools:
        check(tool.annotations.readOnlyHint is True and tool.annotations.idempotentHint is True, f"annotations of {tool.name}")
    for name, arguments in CALLS.items():
        data = tool_json(await session.call_tool(name, arguments))
        print(f"  {name}: ok ({', '.join(sorted(data))})")
    meetings = tool_json(await session.call_tool("list_meetings", {"limit": 5}))
    check(meetings["pagination"]["limit"] == 5, f"pagination: {meetings['pagination']}")
    missing = await session.call_tool("get_meeting", {"meeting_id": "mtg_nope"})
    check(missing.isError, "an unknown meeting is a tool error")
    check("meeting mtg_nope not found" in missing.content[0].text, missing.content[0].text)


async def with_pat():
    print(f"PAT over Streamable HTTP, initialize with {LATEST_PROTOCOL_VERSION}")
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {PAT}"}, timeout=30) as http:
        async with streamable_http_client(MCP_URL, http_client=http, terminate_on_close=False) as (read, write, _):
            async with ClientSession(read, write) as session:
                await call_every_tool(session)


async def with_oauth():
    print("OAuth: discovery, registration, authorization, token exchange")
    storage = MemoryStorage()
    browser = Browser()
    provider = oauth_provider("recap python sdk 1 test", storage, browser)
    async with httpx.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(MCP_URL, http_client=http, terminate_on_close=False) as (read, write, _):
            async with ClientSession(read, write) as session:
                await initialize(session)
                check(storage.tokens is not None and storage.tokens.access_token.startswith("svc_oat_"), f"an svc_oat_ token: {storage.tokens}")
                check(storage.client_info is not None and storage.client_info.client_id.startswith("mcpc_"), "a registered client")
                check([tool.name for tool in (await session.list_tools()).tools] == EXPECTED_TOOLS, "tools/list with an OAuth token")
                tool_json(await session.call_tool("list_meetings", {"limit": 1}))
                print("  tool call with svc_oat_: ok")

                # The provider's own refresh path: as if the hour had passed, the next
                # request first exchanges the refresh token (rotated by the server).
                old_access, old_refresh = storage.tokens.access_token, storage.tokens.refresh_token
                provider.context.token_expiry_time = 1.0
                tool_json(await session.call_tool("list_meetings", {"limit": 1}))
                check(storage.tokens.access_token != old_access, "the provider refreshed the access token")
                check(storage.tokens.refresh_token != old_refresh, "the provider stored the rotated refresh token")
                print("  provider refresh: ok")


async def checks():
    await with_pat()
    await with_oauth()
    print("all python sdk 1.x client checks passed")


if __name__ == "__main__":
    main(checks)
