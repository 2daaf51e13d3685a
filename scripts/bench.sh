#!/usr/bin/env bash
# Runs every benchmark and prints its figures; see README.md, "Performance".
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq wrk
fi
echo "== embedded edition: projector, memory, page cost =="
cargo bench --bench embedded
echo
echo "== embedded edition: REST and MCP under load =="
cargo bench --bench http
