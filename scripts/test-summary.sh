#!/usr/bin/env bash
# Adds up cargo's per-binary "test result:" lines into one closing line. A test ignored
# by one pass and run by a later one (the engine and real-client passes run tests the
# first pass ignores) is not counted as skipped: skipped are the tests no pass ran.
set -euo pipefail
log=${1:?usage: test-summary.sh <cargo test log>}
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i } }
     /^test .* \.\.\. / {
       name = $0; sub(/^test /, "", name); sub(/ \.\.\. .*$/, "", name)
       status = $0; sub(/^.* \.\.\. /, "", status)
       if (status ~ /^ignored/) ignored[name] = 1; else ran[name] = 1
     }
     END {
       for (name in ignored) if (!(name in ran)) s++
       printf "\nsummary: %d passed, %d failed, %d skipped\n", p, f, s
     }' "$log"
