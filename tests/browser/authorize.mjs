// Headless Chromium answers the authorization page as a user would: it opens the page a
// registered client sends it to, types the personal access token, approves, and lands on
// the client's loopback redirect URI with a code, the state and the issuer. The code is
// then exchanged (PKCE) and the svc_oat_ token calls a tool.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... NODE_PATH=~/.cache/recap/node/node_modules node tests/browser/authorize.mjs

import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");

const mcpUrl = process.env.MCP_URL;
const pat = process.env.RECAP_PAT;
const check = (condition, message) => {
  if (!condition) throw new Error(message);
};

// The client's loopback redirect target: a real page for the browser to land on.
const callback = createServer((request, response) => {
  response.writeHead(200, { "content-type": "text/html" });
  response.end("<!doctype html><title>callback</title><p>authorization received</p>");
});
await new Promise((resolve) => callback.listen(0, "127.0.0.1", resolve));
const redirectUri = `http://127.0.0.1:${callback.address().port}/callback`;

const metadata = await (await fetch(`${mcpUrl}/.well-known/oauth-authorization-server`)).json();
const registration = await fetch(metadata.registration_endpoint, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ client_name: "Browser Test Client", redirect_uris: [redirectUri], token_endpoint_auth_method: "none" }),
});
check(registration.status === 201, `registration: ${registration.status}`);
const { client_id: clientId } = await registration.json();

const verifier = randomBytes(32).toString("base64url");
const challenge = createHash("sha256").update(verifier).digest("base64url");
const state = randomBytes(8).toString("hex");
const authorizeUrl = new URL(metadata.authorization_endpoint);
for (const [key, value] of Object.entries({
  response_type: "code",
  client_id: clientId,
  redirect_uri: redirectUri,
  code_challenge: challenge,
  code_challenge_method: "S256",
  state,
  scope: "svc:read",
})) {
  authorizeUrl.searchParams.set(key, value);
}

const userDataDir = mkdtempSync(join(tmpdir(), "recap-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let landed;
try {
  const page = await context.newPage();
  await page.goto(authorizeUrl.toString());
  check((await page.textContent("#client-name")) === "Browser Test Client", "the page names the client");
  check((await page.textContent("#scope")) === "svc:read", "the page names the scope");
  await page.fill("input[name=pat]", pat);
  await Promise.all([page.waitForURL((url) => url.toString().startsWith(redirectUri)), page.click("button[value=approve]")]);
  landed = new URL(page.url());
  check((await page.textContent("p")) === "authorization received", "the browser shows the client's page");
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  callback.close();
}

check(`${landed.origin}${landed.pathname}` === redirectUri, `landed on ${landed}`);
const code = landed.searchParams.get("code");
check(code, "a code");
check(landed.searchParams.get("state") === state, "the state comes back");
check(landed.searchParams.get("iss") === metadata.issuer, "iss is the issuer (RFC 9207)");
console.log("chromium landed on the redirect with code, state and iss");

const tokenResponse = await fetch(metadata.token_endpoint, {
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier }),
});
check(tokenResponse.status === 200, `token: ${tokenResponse.status}`);
const tokens = await tokenResponse.json();
check(tokens.access_token.startsWith("svc_oat_"), "an svc_oat_ token");
const call = await fetch(mcpUrl, {
  method: "POST",
  headers: { authorization: `Bearer ${tokens.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "list_meetings", arguments: { limit: 1 } } }),
});
const body = await call.json();
check(call.status === 200 && body.result && body.result.isError === false, `tool call: ${call.status} ${JSON.stringify(body)}`);
console.log("the code exchanged for a working svc_oat_ token");
