#!/usr/bin/env bash
# Installs the official MCP Python SDK and the official Standard Webhooks library into a
# cached virtualenv for the real-client and webhook verification tests (tests/python).
# The one SDK drives both eras' checks: its ClientSession with initialize
# (mcp_client_test.py) and its Client pinned to 2026-07-28 (mcp_modern_client_test.py).
# With --sdk1: the SDK's last 1.x release instead, alone in a virtualenv of its own (the
# two lines cannot share one), for the legacy client's checks (mcp_sdk1_client_test.py).
# Idempotent: a venv that already has the pinned versions is kept.
# Prints the venv's python path on its last line.
set -euo pipefail

MCP_VERSION="2.3.0"
MCP1_VERSION="1.30.0"
STANDARDWEBHOOKS_VERSION="1.1.0"

case "${1:-}" in
  "")
    VENV="${RECAP_VENV:-$HOME/.cache/recap/venv}"
    packages=("mcp==$MCP_VERSION" "standardwebhooks==$STANDARDWEBHOOKS_VERSION")
    ;;
  --sdk1)
    VENV="${RECAP_VENV_MCP1:-$HOME/.cache/recap/venv-mcp1}"
    packages=("mcp==$MCP1_VERSION")
    ;;
  *)
    echo "usage: $0 [--sdk1]" >&2
    exit 2
    ;;
esac

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(any(m.version(name) != version for name, version in (spec.split('==') for spec in sys.argv[1:])))" "${packages[@]}" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}" >&2
echo "$VENV/bin/python"
