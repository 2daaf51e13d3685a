#!/usr/bin/env bash
# Installs headless Chromium (Debian package) and playwright-core (npm, driving that
# Chromium; it downloads no browser of its own) for the browser test (tests/browser).
# Idempotent: skips what is already present. Prints the node prefix on its last line.
set -euo pipefail

PLAYWRIGHT_VERSION="1.65.1"
NODE_PREFIX="${RECAP_NODE_PREFIX:-$HOME/.cache/recap/node}"

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium >&2
fi

installed=""
if [[ -f "$NODE_PREFIX/node_modules/playwright-core/package.json" ]]; then
  installed=$(node -p "require('$NODE_PREFIX/node_modules/playwright-core/package.json').version")
fi
if [[ "$installed" != "$PLAYWRIGHT_VERSION" ]]; then
  mkdir -p "$NODE_PREFIX"
  [[ -f "$NODE_PREFIX/package.json" ]] || echo '{"name":"recap-browser-tests","private":true}' >"$NODE_PREFIX/package.json"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_VERSION" >&2
fi
echo "$NODE_PREFIX"
