#!/usr/bin/env bash
# Adds up cargo's per-binary "test result:" lines into one closing line. A test ignored
# by one pass and run by a later one (the engine and real-client passes run tests the
# first pass ignores) is not counted as skipped: skipped are the tests no pass ran. The
# failed tests are named just above the closing line, where a log's tail shows them.
set -euo pipefail
log=${1:?usage: test-summary.sh <cargo test log>}
# A failed test is named by its "... FAILED" line, or, when other output came between its
# name and its result (a --nocapture pass), by the binary's closing "failures:" list.
awk '/^failures:$/ { listing = 1; n = 0; next }
     listing && /^    [^ ]+$/ { names[++n] = substr($0, 5); next }
     /^test result:/ {
       for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i }
       if (listing) for (i = 1; i <= n; i++) if (!(names[i] in seen)) { failed[names[i]]++; seen[names[i]] = 1 }
       listing = 0; n = 0; delete seen
     }
     /^test .* \.\.\. / {
       name = $0; sub(/^test /, "", name); sub(/ \.\.\. .*$/, "", name)
       status = $0; sub(/^.* \.\.\. /, "", status)
       if (status ~ /^ignored/) ignored[name] = 1; else ran[name] = 1
       if (status ~ /^FAILED/) { failed[name]++; seen[name] = 1 }
     }
     END {
       for (name in ignored) if (!(name in ran)) s++
       for (name in failed) printf "failed: %s%s\n", name, (failed[name] > 1 ? " (in " failed[name] " passes)" : "")
       printf "\nsummary: %d passed, %d failed, %d skipped\n", p, f, s
     }' "$log"
