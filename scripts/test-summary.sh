#!/usr/bin/env bash
# Adds up cargo's per-binary "test result:" lines into one closing line.
set -euo pipefail
log=${1:?usage: test-summary.sh <cargo test log>}
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i; if ($(i+1) ~ /^ignored;?$/) s += $i } }
     END { printf "\nsummary: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
