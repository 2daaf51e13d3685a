#!/usr/bin/env bash
# Installs and prepares what the Postgres comparison (scripts/peers/bench.sh) needs, once;
# later runs find it ready:
# - Debian's PostgreSQL (the release's own major: 15 on Debian 12, 17 on Debian 13; one
#   already installed is used, the newest when there are several) and wrk (apt);
# - a PostgreSQL cluster of its own on 127.0.0.1:$PEER_PG_PORT (default 54329), trust
#   authentication on loopback only, role and database `recap`. Its data dir is
#   ~/.cache/recap/peers/pg<major>, or, when run as root (PostgreSQL refuses to run as root,
#   and root's home is closed to other users), /var/lib/postgresql/recap-peers/pg<major>, owned by
#   the `postgres` user the package creates;
# - the FastAPI peer's Python environment, ~/.cache/recap/peers/venv (pinned in
#   peers/fastapi/requirements.txt);
# - the axum/PostgreSQL peer and the open-loop generator, built in release mode under
#   ~/.cache/recap/peer-target.
# Prints the environment bench.sh reads (PEER_PG_BIN, PEER_PG_DATA, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="$HOME/.cache/recap/peers"
mkdir -p "$cache"
port=${PEER_PG_PORT:-54329}

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
# The newest PostgreSQL installed (/usr/lib/postgresql/<major>/bin), if any.
installed_postgres() { ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n 1; }
need=()
[ -n "$(installed_postgres)" ] || need+=(postgresql)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >&2
fi
# The package's own cluster is not used; ours has its own port and data dir.
postgres=$(installed_postgres)
[ -n "$postgres" ] || { echo "setup.sh: no PostgreSQL under /usr/lib/postgresql after installing Debian's postgresql" >&2; exit 1; }
pg_bin=$(dirname "$postgres")
pg_major=$(basename "$(dirname "$pg_bin")")

if [ "$(id -u)" -eq 0 ]; then
  pg_data=/var/lib/postgresql/recap-peers/pg$pg_major
  as_pg=(runuser -u postgres --)
  mkdir -p "$(dirname "$pg_data")"
  chown postgres:postgres "$(dirname "$pg_data")"
else
  pg_data="$cache/pg$pg_major"
  as_pg=()
fi
if [ ! -f "$pg_data/PG_VERSION" ]; then
  "${as_pg[@]}" "$pg_bin/initdb" -D "$pg_data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >&2
  # Loopback only; sized for a read benchmark whose data (~200 MB) fits in shared buffers.
  cat <<CONF | "${as_pg[@]}" tee -a "$pg_data/postgresql.conf" >/dev/null
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$pg_data'
shared_buffers = 512MB
effective_cache_size = 2GB
max_connections = 50
synchronous_commit = off
log_min_messages = warning
CONF
fi

if [ ! -x "$cache/venv/bin/uvicorn" ] || ! cmp -s peers/fastapi/requirements.txt "$cache/venv/requirements.txt"; then
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install -q --disable-pip-version-check -r peers/fastapi/requirements.txt >&2
  cp peers/fastapi/requirements.txt "$cache/venv/requirements.txt"
fi

(cd peers/axum-postgres && CARGO_TARGET_DIR="$HOME/.cache/recap/peer-target" cargo build --release --locked -q >&2)

echo "PEER_PG_BIN=$pg_bin"
echo "PEER_PG_DATA=$pg_data"
echo "PEER_PG_PORT=$port"
echo "PEER_PG_AS_ROOT=$([ "$(id -u)" -eq 0 ] && echo 1 || echo 0)"
echo "PEER_VENV=$cache/venv"
echo "PEER_TARGET=$HOME/.cache/recap/peer-target/release"
