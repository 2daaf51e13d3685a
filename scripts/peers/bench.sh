#!/usr/bin/env bash
# recap's two editions side by side with an axum/tokio-postgres read API and a
# FastAPI/asyncpg one over PostgreSQL, on the same data and load (scripts/peers/bench.py;
# docs/performance.md, "Side by side with a Postgres read API"). Part of `make bench`.
# The distributed edition (recap query-api over Cassandra and Redis, loaded through
# Kafka) is measured when the engines of `make up` run on this machine, skipped otherwise.
# RECAP_BIN: the recap release binary (default: the one `make bench` built).
# PEER_BENCH_ROUNDS (3), PEER_BENCH_SECONDS (3), PEER_BENCH_LATENCY_SECONDS (5);
# PEER_BENCH_PERF_DIR: where `perf record` profiles of the query-api go (none when unset),
# PEER_BENCH_PERF_SECONDS (8) the length of each profiled round.
# The PostgreSQL cluster is stopped at the end unless PEER_PG_KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
# setup.sh prints the environment the run reads (a failure stops the run here).
setup=$(scripts/peers/setup.sh)
while IFS='=' read -r key value; do
  export "$key=$value"
done <<<"$setup"
export RECAP_BIN=${RECAP_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/recap/target}/release/recap}
[ -x "$RECAP_BIN" ] || { echo "no recap binary at $RECAP_BIN (cargo build --release --bin recap)" >&2; exit 1; }
stop_postgres() {
  if [ "${PEER_PG_KEEP:-0}" != 1 ]; then
    as_pg=()
    [ "$PEER_PG_AS_ROOT" = 1 ] && as_pg=(runuser -u postgres --)
    "${as_pg[@]}" "$PEER_PG_BIN/pg_ctl" -D "$PEER_PG_DATA" -m fast stop >/dev/null 2>&1 || true
  fi
}
trap stop_postgres EXIT
python3 scripts/peers/bench.py
