#!/usr/bin/env bash
# Installs Schemathesis, which fuzzes REST v1 from schemas/openapi.json (tests/schemathesis.rs),
# into a cached virtualenv of its own: its dependencies are many and must not move the
# versions the MCP and webhook checks pin (scripts/setup-python.sh).
# Idempotent: a venv that already has the pinned version is kept.
# Prints the path of its `st` command on its last line.
set -euo pipefail

SCHEMATHESIS_VERSION="4.32.5"
VENV="${RECAP_SCHEMATHESIS_VENV:-$HOME/.cache/recap/schemathesis}"

if [[ -x "$VENV/bin/st" ]] && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('schemathesis') != '$SCHEMATHESIS_VERSION')" 2>/dev/null; then
  echo "$VENV/bin/st"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2
echo "$VENV/bin/st"
