#!/usr/bin/env bash
# Installs the Rust components the Makefile targets use, once.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is not installed: install Rust (rustup) first" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  installed=$(rustup component list --installed 2>/dev/null || true)
  for component in rustfmt clippy; do
    if ! grep -q "^${component}" <<<"$installed"; then
      rustup component add "$component" >&2
    fi
  done
fi
