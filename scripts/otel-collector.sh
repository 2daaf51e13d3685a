#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the telemetry tests export to (tests/telemetry.rs):
# the collector builder (`go install` from the Go module proxy, pinned) compiles a
# distribution with exactly what the tests use: the OTLP receiver and the debug exporter
# from core, the file exporter and the health_check extension from collector-contrib.
# Everything lands in ~/.cache/recap, outside the clone, so it survives `git clean` and
# later runs reuse it:
#   $CACHE/bin/builder                                  the collector builder
#   $CACHE/otelcol/<version>/otelcol-recap              the collector
# Each step is skipped when its output is already there for the pinned versions (the
# collector is rebuilt only when the manifest below changes). Concurrent runs wait on a
# lock instead of building twice. Prints the collector's path (nothing with -q).
# A cold build (empty Go module and build caches: ~520 MB of modules, ~670 MB of build
# cache under Go's own cache dirs) took 6m20s on 2 cores next to a Rust build (3.5
# CPU-minutes); a warm run answers at once.
set -euo pipefail

# One release train: core modules at v0.x, core's stable modules at the matching v1.x,
# collector-contrib at the same v0.x.
OTELCOL_VERSION=v0.162.0
OTELCOL_STABLE_VERSION=v1.68.0
CONTRIB_VERSION=v0.162.0

CACHE="${RECAP_OTELCOL_CACHE:-$HOME/.cache/recap}"
BIN="$CACHE/bin"
DIR="$CACHE/otelcol/$OTELCOL_VERSION"
COLLECTOR="$DIR/otelcol-recap"
mkdir -p "$BIN" "$DIR"

log() { echo "otel-collector: $*" >&2; }

manifest() {
  cat <<EOF
dist:
  name: otelcol-recap
  description: OpenTelemetry Collector for recap's telemetry tests
  version: ${OTELCOL_VERSION#v}
  output_path: $DIR/build
  go: $DIR/go
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $OTELCOL_VERSION
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter $CONTRIB_VERSION
extensions:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension $CONTRIB_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $OTELCOL_STABLE_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $OTELCOL_STABLE_VERSION
EOF
}

built() { [[ -x "$COLLECTOR" && -f "$DIR/manifest.yaml" && "$(cat "$DIR/manifest.yaml")" == "$(manifest)" ]]; }

if ! built; then
  exec 9>"$DIR/.lock"
  flock 9
  # Another run may have built it while this one waited.
  if ! built; then
    command -v go >/dev/null || { log "go is required to build the collector"; exit 1; }
    stamp="$BIN/.builder.version"
    if [[ ! -x "$BIN/builder" || ! -f "$stamp" || "$(cat "$stamp")" != "$OTELCOL_VERSION" ]]; then
      log "installing the collector builder $OTELCOL_VERSION (go install)"
      GOBIN="$BIN" GOFLAGS="-buildvcs=false" CGO_ENABLED=0 go install "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION"
      echo "$OTELCOL_VERSION" >"$stamp"
    fi
    log "building the collector $OTELCOL_VERSION (this compiles for a few minutes, once)"
    rm -rf "$DIR/build"
    manifest >"$DIR/manifest.yaml.partial"
    # The builder's `go mod tidy` also loads the tests of every component, and the file
    # exporter's tests import a module the proxy does not serve. The builder runs `go`
    # through this wrapper, which tidies tolerating that: a module the build needs and
    # cannot get still fails the compilation.
    cat >"$DIR/go" <<'SH'
#!/bin/sh
if [ "$1" = mod ] && [ "$2" = tidy ]; then shift 2; exec go mod tidy -e "$@"; fi
exec go "$@"
SH
    chmod +x "$DIR/go"
    GOFLAGS="-buildvcs=false" CGO_ENABLED=0 "$BIN/builder" --config "$DIR/manifest.yaml.partial" >&2
    mv "$DIR/build/otelcol-recap" "$COLLECTOR"
    mv "$DIR/manifest.yaml.partial" "$DIR/manifest.yaml"
    rm -rf "$DIR/build"
  fi
fi

[[ ${1:-} == -q ]] || echo "$COLLECTOR"
