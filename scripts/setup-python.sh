#!/usr/bin/env bash
# Installs the official MCP Python SDK and the official Standard Webhooks library into a
# cached virtualenv for the real-client and webhook verification tests (tests/python).
# The one SDK drives both eras' checks: its ClientSession with initialize
# (mcp_client_test.py) and its Client pinned to 2026-07-28 (mcp_modern_client_test.py).
# Idempotent: a venv that already has the pinned versions is kept.
# Prints the venv's python path on its last line.
set -euo pipefail

MCP_VERSION="2.3.0"
STANDARDWEBHOOKS_VERSION="1.1.0"
VENV="${RECAP_VENV:-$HOME/.cache/recap/venv}"

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_VERSION' or m.version('standardwebhooks') != '$STANDARDWEBHOOKS_VERSION')" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" "standardwebhooks==$STANDARDWEBHOOKS_VERSION" >&2
echo "$VENV/bin/python"
