#!/usr/bin/env bash
# Redis from Debian's redis-server, on 127.0.0.1:6379, no persistence.
# usage: redis.sh install|start|stop|status|pause|resume
set -euo pipefail
source "$(dirname "$0")/common.sh"
PORT=${RECAP_REDIS_PORT:-6379}
DIR="$RUN_DIR/redis"; PIDFILE="$DIR/redis.pid"

install() {
  command -v redis-server >/dev/null 2>&1 && return 0
  log "installing redis-server (Debian)"
  local sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq redis-server >&2
}

ready() { [ "$(redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null)" = "PONG" ]; }

start() {
  install
  mkdir -p "$DIR"
  if pid_alive "$PIDFILE" && ready; then return 0; fi
  redis-server --bind 127.0.0.1 --port "$PORT" --daemonize yes --pidfile "$PIDFILE" --logfile "$DIR/redis.log" \
    --dir "$DIR" --save '' --appendonly no --protected-mode yes >&2
  wait_until 30 redis ready || { tail -20 "$DIR/redis.log" >&2; exit 1; }
  log "redis ready on 127.0.0.1:$PORT"
}

case "${1:-start}" in
  install) install ;;
  start) start ;;
  stop) stop_pidfile "$PIDFILE" ;;
  status) ready && echo "redis: ready" || { echo "redis: down"; exit 1; } ;;
  pause) kill -STOP "$(cat "$PIDFILE")" ;;
  resume) kill -CONT "$(cat "$PIDFILE")" ;;
  kill9) stop_pidfile "$PIDFILE" KILL ;;
  *) echo "usage: $0 install|start|stop|status|pause|resume|kill9" >&2; exit 2 ;;
esac
