#!/usr/bin/env bash
# Shared by the engine scripts: where engines are installed and run, and helpers.
set -euo pipefail
ENGINES_HOME="${RECAP_ENGINES_HOME:-$HOME/.cache/recap/engines}"
RUN_DIR="$ENGINES_HOME/run"
mkdir -p "$ENGINES_HOME" "$RUN_DIR"

log() { echo "[engines] $*" >&2; }

# resolve_jars <dir> <groupId:artifactId:version>...: copies the artifacts and their
# runtime dependencies from Maven Central into <dir> (once).
resolve_jars() {
  local dir=$1; shift
  [ -f "$dir/.complete" ] && return 0
  mkdir -p "$dir"
  local pom="$dir/pom.xml" deps=""
  for coordinate in "$@"; do
    IFS=: read -r group artifact version <<<"$coordinate"
    deps+="<dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency>"
  done
  cat > "$pom" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>recap.engines</groupId><artifactId>engine</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>$deps</dependencies></project>
POM
  log "resolving $* from Maven Central"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dir/libs" -DincludeScope=runtime >&2
  touch "$dir/.complete"
}

# wait_until <seconds> <description> <command...>: polls a readiness probe.
wait_until() {
  local deadline=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "$what: not ready after the deadline"
      return 1
    fi
    sleep 0.5
  done
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pidfile() {
  local pidfile=$1 signal=${2:-TERM}
  if pid_alive "$pidfile"; then
    kill "-$signal" "$(cat "$pidfile")" 2>/dev/null || true
    for _ in $(seq 1 120); do pid_alive "$pidfile" || break; sleep 0.5; done
    pid_alive "$pidfile" && kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}
