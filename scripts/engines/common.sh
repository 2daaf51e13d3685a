#!/usr/bin/env bash
# Sourced by the engine scripts: where the engines are installed and run, their ports,
# and the helpers every engine shares (jars from Maven Central, pidfiles, readiness
# polling, log tails). Everything binds to 127.0.0.1.
#
# Overrides (all optional): RECAP_ENGINES_HOME (default ~/.cache/recap/engines),
# RECAP_KAFKA_PORT (9092), RECAP_KAFKA_CONTROLLER_PORT (9093), RECAP_KAFKA_SASL_PORT
# (9094, the broker's SASL/PLAIN listener), RECAP_CQL_PORT (9042),
# RECAP_CASSANDRA_STORAGE_PORT (7000), RECAP_CASSANDRA_JMX_PORT (7199),
# RECAP_REDIS_PORT (6379). A second set of engines can run beside the first with another
# home and other ports.
# shellcheck disable=SC2034 # the ports and paths are used by the scripts that source this file
set -euo pipefail

ENGINES_HOME="${RECAP_ENGINES_HOME:-$HOME/.cache/recap/engines}"
RUN_DIR="$ENGINES_HOME/run"
BIND=127.0.0.1
KAFKA_PORT=${RECAP_KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${RECAP_KAFKA_CONTROLLER_PORT:-9093}
KAFKA_SASL_PORT=${RECAP_KAFKA_SASL_PORT:-9094}
# The one user of that listener: a local test credential, nothing to keep secret.
KAFKA_SASL_USERNAME=recap
KAFKA_SASL_PASSWORD=recap-engines-sasl
CQL_PORT=${RECAP_CQL_PORT:-9042}
# Cassandra asks every client to log in (PasswordAuthenticator) and accepts TLS beside
# plain connections on the same port: recap's login, a local test credential too, and
# the node's built-in superuser, which the scripts use to create it.
CQL_USERNAME=recap
CQL_PASSWORD=recap-engines-cql
CQL_SUPERUSER=cassandra
CQL_SUPERUSER_PASSWORD=cassandra
CASSANDRA_STORAGE_PORT=${RECAP_CASSANDRA_STORAGE_PORT:-7000}
CASSANDRA_JMX_PORT=${RECAP_CASSANDRA_JMX_PORT:-7199}
REDIS_PORT=${RECAP_REDIS_PORT:-6379}
mkdir -p "$RUN_DIR"

# Set by each engine script before it uses the helpers below.
ENGINE=${ENGINE:-engines}
PIDFILE=${PIDFILE:-}
PID_MARKER=${PID_MARKER:-}   # a string the engine's command line contains
LOG_FILES=()
PORTS=()                     # the ports the engine listens on

log() { printf '[%s] %s\n' "$ENGINE" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now_ms() { date +%s%3N; }
elapsed() { local ms=$(( $(now_ms) - $1 )); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

# with_lock <name> <command...>: runs the command holding $ENGINES_HOME/.<name>.lock, so
# concurrent `make up`s, fault tests and installs never race each other.
with_lock() {
  local name=$1; shift
  (
    flock 9
    "$@"
  ) 9>"$ENGINES_HOME/.$name.lock"
}

# resolve_jars <dir> <groupId:artifactId:version>...: copies the artifacts and their
# runtime dependencies from Maven Central into <dir>/libs, once. Maven runs one at a
# time (one local repository); a failed resolution leaves nothing half-installed.
resolve_jars() {
  local dir=$1; shift
  [ -f "$dir/.complete" ] && return 0
  # Maven fetches the engines' jars from Maven Central; Debian's package when missing.
  command -v mvn >/dev/null 2>&1 || apt_install maven
  command -v mvn >/dev/null 2>&1 || die "mvn not found after installing Debian's maven"
  with_lock maven _resolve_jars "$dir" "$@"
}

# need_java17: sets JAVA17 to a Java 17 runtime, the JVM the engines are started on (their
# JVM options are Java 17's): RECAP_JAVA, JAVA_HOME's, the one on PATH or an installed
# one, in that order; Debian's openjdk-17-jre-headless is installed when there is none.
# Resolved once per script run (readiness probes call the admin tool repeatedly).
JAVA17=""
need_java17() {
  [ -n "$JAVA17" ] && return 0
  local candidate
  for candidate in "${RECAP_JAVA:-}" "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null || true)" /usr/lib/jvm/*17*/bin/java; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" -version 2>&1 | head -n 1 | grep -q 'version "17[."]'; then
      JAVA17=$candidate
      return 0
    fi
  done
  apt_install openjdk-17-jre-headless
  for candidate in /usr/lib/jvm/*17*/bin/java; do
    [ -x "$candidate" ] && { JAVA17=$candidate; return 0; }
  done
  die "no Java 17 runtime, even after installing openjdk-17-jre-headless"
}

_resolve_jars() {
  local dir=$1; shift
  [ -f "$dir/.complete" ] && return 0
  local staging="$dir.partial" deps="" started
  started=$(now_ms)
  rm -rf "$staging"
  mkdir -p "$staging"
  for coordinate in "$@"; do
    IFS=: read -r group artifact version <<<"$coordinate"
    deps+="<dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency>"
  done
  cat >"$staging/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>recap.engines</groupId><artifactId>$(basename "$dir")</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>$deps</dependencies></project>
POM
  log "resolving $* and their runtime dependencies from Maven Central"
  if ! mvn -B -q -f "$staging/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$staging/libs" >"$staging/mvn.log" 2>&1; then
    tail -n 25 "$staging/mvn.log" | sed "s/^/[$ENGINE] mvn: /" >&2
    die "could not resolve $* from Maven Central"
  fi
  touch "$staging/.complete"
  rm -rf "$dir"
  mv "$staging" "$dir"
  log "installed $(ls "$dir/libs" | wc -l) jars ($(du -sh "$dir/libs" | cut -f1)) in $(elapsed "$started") under $dir"
}

# engine_pid: prints the pid in $PIDFILE if that process is alive (not a zombie) and is
# this engine (its command line contains $PID_MARKER), so a recycled pid is never signalled.
engine_pid() {
  local pid state
  [ -s "$PIDFILE" ] || return 1
  pid=$(<"$PIDFILE")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$PID_MARKER" || return 1
  echo "$pid"
}

# engine_paused: true if the engine is stopped by SIGSTOP (see `pause`).
engine_paused() {
  local pid
  pid=$(engine_pid) || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = T ]
}

# port_open <port>: something accepts TCP connections on 127.0.0.1:<port>.
port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/$BIND/$1" 2>/dev/null; }

# ports_free [seconds]: waits until none of $PORTS accepts connections (a killed JVM
# closes its sockets only once all its threads are gone).
ports_free() {
  local deadline=$(( $(now_ms) + ${1:-0} * 1000 )) busy
  while :; do
    busy=""
    for port in "${PORTS[@]}"; do port_open "$port" && busy+=" $port"; done
    [ -z "$busy" ] && return 0
    if (( $(now_ms) >= deadline )); then
      echo "$busy"
      return 1
    fi
    sleep 0.2
  done
}

# refuse_foreign_ports: fails if another process (not this engine) holds one of $PORTS.
refuse_foreign_ports() {
  local busy
  busy=$(ports_free 10) || die "127.0.0.1:${busy# } is in use by another process (not $ENGINE from $RUN_DIR); stop it first"
}

show_logs() {
  for file in "${LOG_FILES[@]}"; do
    [ -s "$file" ] || continue
    log "last lines of $file:"
    tail -n 30 "$file" | sed "s/^/[$ENGINE]   /" >&2
  done
}

# wait_ready <seconds> <probe command...>: polls the readiness probe until it succeeds;
# fails at once (with the log tail) if the engine's process exits, or after the deadline.
wait_ready() {
  local timeout=$1 started
  shift
  started=$(now_ms)
  until "$@" >/dev/null 2>&1; do
    if ! engine_pid >/dev/null; then
      log "the process exited during start-up"
      show_logs
      return 1
    fi
    if (( $(now_ms) - started >= timeout * 1000 )); then
      log "not ready after ${timeout}s"
      show_logs
      return 1
    fi
    sleep 0.5
  done
  log "probe succeeded after $(elapsed "$started")"
}

# adopt_or_launch <seconds>: waits for a running engine (resuming it if paused) or starts
# one with the engine's `launch` function, until its `ready` probe answers. An engine that
# was already running but exits while this waits (stopped by whoever owned it) is
# replaced by a new one, once, instead of failing the start.
adopt_or_launch() {
  local timeout=$1 pid
  if pid=$(engine_pid); then
    if engine_paused; then
      log "resuming the paused process (pid $pid)"
      kill -CONT "$pid"
    fi
    # A benchmark killed mid-round can leave an engine held to one core (`taskset -a`):
    # an adopted engine gets every core of the machine back (the kernel keeps it within
    # its cgroup's cpuset), whatever cores the caller of this script was held to.
    if ! taskset -a -c -p "0-$(($(nproc --all) - 1))" "$pid" >/dev/null 2>&1; then
      log "warning: could not give the running process (pid $pid) every core back"
    fi
    if ready >/dev/null 2>&1; then
      log "already running (pid $pid) and ready"
      return 0
    fi
    log "running (pid $pid), waiting for readiness"
    wait_ready "$timeout" ready && return 0
    engine_pid >/dev/null && return 1
    log "the process that was running (pid $pid) is gone: starting a new one"
  fi
  launch
  wait_ready "$timeout" ready
}

# stop_engine [signal] [seconds]: signals the engine (TERM by default), waits until the
# process is gone, and sends KILL if it outlives the deadline.
stop_engine() {
  local signal=${1:-TERM} timeout=${2:-60} pid started
  if ! pid=$(engine_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  started=$(now_ms)
  log "stopping (pid $pid, SIG$signal)"
  kill "-$signal" "$pid" 2>/dev/null || true
  kill -CONT "$pid" 2>/dev/null || true # a paused engine handles the signal only once resumed
  while engine_pid >/dev/null; do
    if (( $(now_ms) - started >= timeout * 1000 )); then
      log "still running after ${timeout}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      timeout=$((timeout + 10))
    fi
    sleep 0.2
  done
  rm -f "$PIDFILE"
  ports_free 15 >/dev/null || log "warning: its ports are still open"
  log "stopped in $(elapsed "$started")"
}

pause_engine() {
  local pid
  pid=$(engine_pid) || die "not running"
  kill -STOP "$pid"
  log "paused (pid $pid, SIGSTOP)"
}

resume_engine() {
  local pid
  pid=$(engine_pid) || die "not running"
  kill -CONT "$pid"
  log "resumed (pid $pid, SIGCONT)"
}

# rss_of_engine: the engine's resident memory, for the progress lines.
rss_of_engine() {
  local pid
  pid=$(engine_pid) || return 0
  awk '/^VmRSS/ {printf "%d MiB", $2 / 1024}' "/proc/$pid/status" 2>/dev/null
}

# apt_install <package>...: Debian packages, without letting their init scripts start
# system services (recap starts its own engines on its own ports).
apt_install() {
  local sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  log "installing $* (apt)"
  with_lock apt _apt_install "$sudo_cmd" "$@"
}

_apt_install() {
  local sudo_cmd=$1 policy=/usr/sbin/policy-rc.d added=""
  shift
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
    $sudo_cmd chmod +x "$policy"
    added=1
  fi
  local status=0
  $sudo_cmd apt-get update -qq >&2 || status=$?
  [ $status -eq 0 ] && { DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@" >&2 || status=$?; }
  [ -z "$added" ] || $sudo_cmd rm -f "$policy"
  [ $status -eq 0 ] || die "apt-get install $* failed"
}

# left_by_gone_runs [name-prefix]: reads names (topics, keyspaces) on stdin and prints
# those a test or benchmark run left behind whose process is gone. Such runs name what
# they create after their kind and process id (t<pid>_, bench<pid>_, lagtest<pid>_, after
# the optional prefix, e.g. recap_), and delete it when they end; a run that was killed
# cannot, so what it made would pile up run after run (a broker holding thousands of
# test partitions runs out of heap). A running process's names are never printed.
left_by_gone_runs() {
  local prefix=${1:-} name
  while IFS= read -r name; do
    [[ $name =~ ^${prefix}(t|bench|lagtest)([0-9]+)_ ]] || continue
    # /proc/<n> exists for a thread's id too: only a process's own Tgid line counts.
    grep -qx "Tgid:[[:space:]]*${BASH_REMATCH[2]}" "/proc/${BASH_REMATCH[2]}/status" 2>/dev/null || printf '%s\n' "$name"
  done
}

# engine_usage: the subcommands every engine script offers.
engine_usage() {
  echo "usage: $0 install|start|stop|restart|status|kill9|pause|resume" >&2
  exit 2
}
