#!/usr/bin/env bash
# Redis from Debian's redis-server package, a daemon on 127.0.0.1:6379 without
# persistence, with its pidfile and log under the run directory (not the system service).
# Readiness is PING answering PONG.
#
# usage: redis.sh install|start|stop|restart|status|kill9|pause|resume
set -euo pipefail
ENGINE=redis
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

DIR="$RUN_DIR/redis"
PIDFILE="$DIR/redis.pid"
PID_MARKER="redis-server $BIND:$REDIS_PORT"
PORTS=("$REDIS_PORT")
LOG_FILES=("$DIR/redis.log")

install() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    apt_install redis-server
  fi
}

ready() { [ "$(timeout 2 redis-cli -h "$BIND" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

launch() {
  refuse_foreign_ports
  rm -f "$PIDFILE"
  log "starting $(redis-server --version | cut -d' ' -f1-3) on $BIND:$REDIS_PORT"
  redis-server --bind "$BIND" --port "$REDIS_PORT" --daemonize yes --pidfile "$PIDFILE" \
    --logfile "$DIR/redis.log" --dir "$DIR" --save '' --appendonly no --protected-mode yes \
    </dev/null >/dev/null 2>>"$DIR/redis.log" 9>&- || { show_logs; die "redis-server did not start"; }
  # The daemon writes its pidfile just after forking.
  local deadline=$(( $(now_ms) + 10000 ))
  until [ -s "$PIDFILE" ] || (( $(now_ms) > deadline )); do sleep 0.1; done
}

_start() {
  local started
  started=$(now_ms)
  mkdir -p "$DIR"
  adopt_or_launch 30 || die "Redis did not become ready (log: $DIR/redis.log)"
  log "ready on $BIND:$REDIS_PORT in $(elapsed "$started") (pid $(engine_pid), RSS $(rss_of_engine))"
}

start() {
  install
  with_lock redis _start
}

status() {
  local pid
  if ! pid=$(engine_pid); then echo "redis: down"; return 1; fi
  if engine_paused; then echo "redis: paused (pid $pid)"; return 1; fi
  if ready 2>/dev/null; then echo "redis: ready on $BIND:$REDIS_PORT (pid $pid, RSS $(rss_of_engine))"; else echo "redis: running but not ready (pid $pid)"; return 1; fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) with_lock redis stop_engine TERM 30 ;;
  restart) with_lock redis stop_engine TERM 30 && start ;;
  status) status ;;
  kill9) with_lock redis stop_engine KILL 10 ;;
  pause) pause_engine ;;
  resume) resume_engine ;;
  *) engine_usage ;;
esac
