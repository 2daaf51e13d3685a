#!/usr/bin/env bash
# Stops the engines; --purge also removes their data.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
for engine in cassandra kafka redis; do
  bash "$here/$engine.sh" stop || true
done
if [ "${1:-}" = "--purge" ]; then
  rm -rf "$RUN_DIR"
  log "engine data removed"
fi
log "engines stopped"
