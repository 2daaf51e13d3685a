#!/usr/bin/env bash
# Installs what the build needs beyond cargo, once: the Rust components the Makefile
# targets use, and the Debian packages librdkafka (the Kafka client, built from source
# with cmake) compiles against.
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
# librdkafka is a C and C++ cmake project; OpenSSL, built with it, needs perl and make.
# librdkafka's sources include curl's header even when built without curl (its
# configuration defines WITH_OAUTHBEARER_OIDC to 0, and one file tests it with #ifdef),
# so the header must be there, though nothing links libcurl.
packages=(cmake pkg-config g++ perl make libcurl4-openssl-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing packages ${missing[*]}: install them with your package manager" >&2
    exit 1
  fi
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "installing ${missing[*]}" >&2
  $sudo_cmd apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi
