// What the Node real-client checks share: the tools and calls the Python checks expect
// (tests/python/common.py), the result checks, the clients' packages loaded from
// the directory scripts/setup-node.sh installed, an OAuth client provider whose
// "browser" answers the consent page as a user would (it opens the page, types the
// personal access token, approves) and keeps the code the redirect carries, and the
// https server of a client's metadata document.

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { createRequire } from "node:module";
import { join } from "node:path";

export const MCP_URL = process.env.MCP_URL;
export const PAT = process.env.RECAP_PAT;
export const CLIENTS_DIR = process.env.RECAP_NODE_CLIENTS;
export const MEETING_ID = process.env.RECAP_MEETING_ID ?? "mtg_weekly_1";
export const SHARE_ID = process.env.RECAP_SHARE_ID ?? "shr_team";
export const REDIRECT_URI = "http://127.0.0.1:47999/callback";

export const EXPECTED_TOOLS = [
  "list_meetings",
  "get_meeting",
  "get_meeting_transcript",
  "get_recurring_meeting_history",
  "search_meetings",
  "list_pending_action_items",
  "search_shared_notes",
  "get_shared_note",
  "list_recent_changes",
];

// One call of every tool, with arguments that find the world the Rust test seeded, and
// a field each result must have.
export const CALLS = {
  list_meetings: [{ limit: 5 }, "meetings"],
  get_meeting: [{ meeting_id: MEETING_ID }, "action_items"],
  get_meeting_transcript: [{ meeting_id: MEETING_ID, limit: 2 }, "meeting_id"],
  get_recurring_meeting_history: [{ meeting_id: MEETING_ID }, "meetings"],
  search_meetings: [{ query: "weekly" }, "meetings"],
  list_pending_action_items: [{}, "action_items"],
  search_shared_notes: [{ query: "budget" }, "results"],
  get_shared_note: [{ share_id: SHARE_ID }, "share_id"],
  list_recent_changes: [{ limit: 5 }, "changes"],
};

export function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${typeof message === "function" ? message() : message}`);
}

/** A package of the installed clients, by its CommonJS entry (no build step, no loader). */
export function load(specifier) {
  check(CLIENTS_DIR, "RECAP_NODE_CLIENTS names the directory scripts/setup-node.sh printed");
  return createRequire(join(CLIENTS_DIR, "package.json"))(specifier);
}

/** The JSON of a successful tool result: one text item, and structuredContent if any is the same. */
export function toolJson(name, result) {
  check(!result.isError, () => `${name} failed: ${JSON.stringify(result)}`);
  check(result.content?.length === 1 && result.content[0].type === "text", () => `${name}: one text item expected: ${JSON.stringify(result.content)}`);
  const data = JSON.parse(result.content[0].text);
  check(data && typeof data === "object" && !Array.isArray(data), () => `${name}: a JSON object: ${result.content[0].text}`);
  if (result.structuredContent !== undefined) {
    check(JSON.stringify(result.structuredContent) === JSON.stringify(data), `${name}: structuredContent is the text's JSON`);
  }
  return data;
}

/** Lists the tools and calls every one on a connected SDK client (1.x and 2.x alike). */
export async function callEveryTool(client) {
  const tools = await client.listTools();
  const names = tools.tools.map((tool) => tool.name);
  check(JSON.stringify(names) === JSON.stringify(EXPECTED_TOOLS), `tools/list: ${names}`);
  for (const tool of tools.tools) {
    check(tool.annotations?.readOnlyHint === true && tool.annotations?.idempotentHint === true, `annotations of ${tool.name}`);
  }
  for (const [name, [args, field]] of Object.entries(CALLS)) {
    const data = toolJson(name, await client.callTool({ name, arguments: args }));
    check(field in data, () => `${name}: no ${field} in ${JSON.stringify(data)}`);
    console.log(`  ${name}: ok (${Object.keys(data).sort().join(", ")})`);
  }
  const meetings = toolJson("list_meetings", await client.callTool({ name: "list_meetings", arguments: { limit: 5 } }));
  check(meetings.pagination.limit === 5, `pagination: ${JSON.stringify(meetings.pagination)}`);
  check(meetings.meetings.some((meeting) => meeting.id === MEETING_ID), `the seeded meeting is listed: ${JSON.stringify(meetings)}`);
  const missing = await client.callTool({ name: "get_meeting", arguments: { meeting_id: "mtg_nope" } });
  check(missing.isError === true, () => `an unknown meeting is a tool error: ${JSON.stringify(missing)}`);
  check(missing.content[0].text.includes("meeting mtg_nope not found"), missing.content[0].text);
  return tools;
}

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const unescape = (text) =>
  text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, name) => {
    if (name[0] === "#") return String.fromCodePoint(name[1].toLowerCase() === "x" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10));
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
const attributes = (tag) => Object.fromEntries([...tag.matchAll(/([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*=\s*("([^"]*)"|'([^']*)')/g)].map((m) => [m[1].toLowerCase(), unescape(m[3] ?? m[4])]));

/** The consent page's form: its action, method, hidden fields and input names. */
export function readForm(html) {
  const form = html.match(/<form\b[^>]*>/i);
  check(form, "the page has a form");
  const { action, method } = attributes(form[0]);
  const fields = {};
  const inputs = [];
  for (const tag of html.matchAll(/<input\b[^>]*>/gi)) {
    const input = attributes(tag[0]);
    inputs.push(input.name);
    if (input.type === "hidden") fields[input.name] = input.value ?? "";
  }
  return { action, method, fields, inputs };
}

/**
 * Answers the authorization page as a user would: open it, type the PAT, approve. The
 * approval must send the browser to `redirectUri` (the client's callback, with the code).
 */
export async function approve(authorizationUrl, redirectUri = REDIRECT_URI) {
  const page = await fetch(authorizationUrl, { redirect: "manual" });
  const text = await page.text();
  check(page.status === 200, `authorize page: ${page.status} ${text.slice(0, 300)}`);
  check(text.includes("svc:read"), "the page names the scope");
  const form = readForm(text);
  check(form.method?.toUpperCase() === "POST" && form.inputs.includes("pat"), `a POST form with a pat input: ${form.inputs}`);
  const answer = await fetch(new URL(form.action ?? "", authorizationUrl), {
    method: "POST",
    body: new URLSearchParams({ ...form.fields, pat: PAT, decision: "approve" }),
    redirect: "manual",
  });
  check(answer.status === 302 || answer.status === 303, `approval redirects: ${answer.status} ${(await answer.text()).slice(0, 300)}`);
  const location = answer.headers.get("location");
  check(location?.startsWith(redirectUri + "?"), `redirected to the registered URI: ${location}`);
  return new URL(location);
}

/**
 * An OAuthClientProvider (the same interface in SDK 1.x and 2.x) keeping everything in
 * memory. Its redirectToAuthorization is the user's browser: it approves at once and
 * keeps the callback URL for the test to hand to transport.finishAuth.
 */
export class MemoryOAuthProvider {
  constructor(clientName) {
    this.metadata = {
      client_name: clientName,
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
    this.client = undefined;
    this.stored = undefined;
    this.verifier = undefined;
    this.sentState = undefined;
    this.callback = undefined;
    this.redirects = 0;
  }
  get redirectUrl() {
    return REDIRECT_URI;
  }
  get clientMetadata() {
    return this.metadata;
  }
  state() {
    this.sentState = randomBytes(16).toString("base64url");
    return this.sentState;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens) {
    this.stored = tokens;
  }
  async redirectToAuthorization(url) {
    this.redirects += 1;
    check(url.searchParams.get("code_challenge_method") === "S256", `PKCE S256: ${url}`);
    this.callback = await approve(url);
    check(this.callback.searchParams.get("state") === this.sentState, `the state comes back: ${this.callback}`);
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    check(this.verifier, "a code verifier was saved");
    return this.verifier;
  }
}

export const DOCUMENT_PATH = "/oauth/recap-cimd-client.json";

/**
 * A client's metadata document, served over https on 127.0.0.1 with the certificate the
 * Rust test made with its own CA (RECAP_CIMD_CERT and RECAP_CIMD_KEY; the server under
 * test trusts that CA through --mcp-cimd-extra-ca-file). Its URL is the client_id; it
 * lists `redirectUri` as the client's only one. Every request it got is kept.
 */
export async function serveMetadataDocument(clientName, redirectUri = REDIRECT_URI) {
  const served = { url: undefined, requests: [] };
  const server = createServer({ cert: readFileSync(process.env.RECAP_CIMD_CERT), key: readFileSync(process.env.RECAP_CIMD_KEY) }, (request, response) => {
    served.requests.push(`${request.method} ${request.url}`);
    if (request.method !== "GET" || request.url !== DOCUMENT_PATH) {
      response.writeHead(404, { "content-type": "application/json" }).end("{}");
      return;
    }
    const document = {
      client_id: served.url,
      client_name: clientName,
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
    response.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=300" }).end(JSON.stringify(document));
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  served.url = `https://127.0.0.1:${server.address().port}${DOCUMENT_PATH}`;
  return { server, served };
}

/** Runs the checks; any failure is printed and exits non-zero. */
export function main(run) {
  run().then(
    () => process.exit(0),
    (error) => {
      console.error(error?.stack ?? error);
      console.error(`FAILED: ${error?.message ?? error}`);
      process.exit(1);
    },
  );
}
