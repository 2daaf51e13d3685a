#!/usr/bin/env bash
# Stops the engines that up.sh started (by their pidfiles, waiting until each process is
# gone). With --purge, also removes their data and logs ($RECAP_ENGINES_HOME/run); the
# installed jars and packages stay.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ENGINE=engines
# shellcheck source=common.sh
source "$here/common.sh"

case "${1:-}" in
  "" | --purge) ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac
declare -A jobs
for engine in cassandra kafka redis; do
  bash "$here/$engine.sh" stop &
  jobs[$engine]=$!
done
failed=()
for engine in cassandra kafka redis; do
  wait "${jobs[$engine]}" || failed+=("$engine")
done
if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED to stop: ${failed[*]}"
  exit 1
fi
if [ "${1:-}" = --purge ]; then
  rm -rf "$RUN_DIR"
  log "engine data and logs removed ($RUN_DIR)"
fi
log "engines stopped"
