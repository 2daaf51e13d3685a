"""Real-client checks of the MCP server with the official MCP Python SDK.

Run against a live `recap serve` by tests/mcp_real_clients.rs (or by hand):

    MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... python tests/python/mcp_client_test.py

1. Over Streamable HTTP with a personal access token: initialize, list the eight tools
   in docs/mcp.md's order, call each one, and read its JSON text result.
2. With the SDK's OAuth client provider: discovery (RFC 9728, RFC 8414), dynamic
   registration, authorization (the consent page answered programmatically with the
   PAT, as a user would type it), token exchange with PKCE, a tool call with the
   svc_oat_ token, then a refresh (rotation) and another call.

Exits non-zero with a message on the first failed check.
"""

import json

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult

from common import CALLS, EXPECTED_TOOLS, MCP_URL, PAT, ConsentBrowser, MemoryStorage, check, main, oauth_provider


def tool_json(result):
    check(not result.is_error, f"tool failed: {result}")
    check(len(result.content) == 1 and result.content[0].type == "text", f"one text item expected: {result.content}")
    return json.loads(result.content[0].text)


async def call_every_tool(session):
    await session.initialize()
    tools = await session.list_tools()
    names = [tool.name for tool in tools.tools]
    check(names == EXPECTED_TOOLS, f"tools/list: {names}")
    for tool in tools.tools:
        check(tool.annotations.read_only_hint is True and tool.annotations.idempotent_hint is True, f"annotations of {tool.name}")
    for name, arguments in CALLS.items():
        data = tool_json(await session.call_tool(name, arguments))
        print(f"  {name}: ok ({', '.join(sorted(data))})")
    meetings = tool_json(await session.call_tool("list_meetings", {"limit": 5}))
    check(meetings["pagination"]["limit"] == 5, f"pagination: {meetings['pagination']}")
    missing = await session.call_tool("get_meeting", {"meeting_id": "mtg_nope"})
    check(missing.is_error, "an unknown meeting is a tool error")
    check("meeting mtg_nope not found" in missing.content[0].text, missing.content[0].text)


async def with_pat():
    print("PAT over Streamable HTTP")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {PAT}"}, timeout=30) as http:
        async with streamable_http_client(MCP_URL, http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as session:
                await call_every_tool(session)


class Browser(ConsentBrowser):
    async def callback(self) -> AuthorizationCodeResult:
        query = self.redirect_query()
        fields = {"code": query["code"], "state": query.get("state")}
        if "iss" in AuthorizationCodeResult.model_fields and "iss" in query:
            fields["iss"] = query["iss"]
        return AuthorizationCodeResult(**fields)


async def with_oauth():
    print("OAuth: discovery, registration, authorization, token exchange")
    storage = MemoryStorage()
    browser = Browser()
    provider = oauth_provider("recap python test", storage, browser)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(MCP_URL, http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                check(storage.tokens is not None and storage.tokens.access_token.startswith("svc_oat_"), f"an svc_oat_ token: {storage.tokens}")
                check(storage.client_info is not None and storage.client_info.client_id.startswith("mcpc_"), "a registered client")
                first_access, first_refresh = storage.tokens.access_token, storage.tokens.refresh_token
                tool_json(await session.call_tool("list_meetings", {"limit": 1}))
                print("  tool call with svc_oat_: ok")

    # Refresh: the token endpoint rotates the refresh token; the new access token works.
    metadata = provider.context.oauth_metadata
    token_endpoint = str(metadata.token_endpoint)
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(
            token_endpoint,
            data={"grant_type": "refresh_token", "refresh_token": first_refresh, "client_id": storage.client_info.client_id},
        )
        check(response.status_code == 200, f"refresh: {response.status_code} {response.text}")
        refreshed = response.json()
        check(refreshed["refresh_token"] != first_refresh and refreshed["access_token"] != first_access, "rotation")
        reuse = await http.post(
            token_endpoint,
            data={"grant_type": "refresh_token", "refresh_token": first_refresh, "client_id": storage.client_info.client_id},
        )
        check(reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant", f"reuse refused: {reuse.text}")
    print("  refresh rotates; reuse refused")

    # The provider's own refresh path: expire the stored access token and call again.
    storage2 = MemoryStorage()
    browser2 = Browser()
    provider2 = oauth_provider("recap python test 2", storage2, browser2)
    async with httpx2.AsyncClient(auth=provider2, timeout=30) as http:
        async with streamable_http_client(MCP_URL, http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                old_refresh = storage2.tokens.refresh_token
                provider2.context.token_expiry_time = 1.0  # as if the hour had passed
                tool_json(await session.call_tool("list_meetings", {"limit": 1}))
                check(storage2.tokens.refresh_token != old_refresh, "the provider refreshed and stored the rotated token")
    print("  provider refresh: ok")


async def checks():
    await with_pat()
    await with_oauth()
    print("all python client checks passed")


if __name__ == "__main__":
    main(checks)
