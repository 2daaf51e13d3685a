#!/usr/bin/env bash
# Runs every benchmark and prints its figures; see README.md, "Performance".
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== embedded edition: projector, memory, page cost =="
cargo bench --bench embedded
