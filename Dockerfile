# syntax=docker/dockerfile:1
# recap: one image, one binary; the role is the command (`query-api`, `mcp`, `projector`,
# `webhooks`, `migrate`), e.g. `docker run IMAGE query-api --help`. The Helm chart in k8s/recap runs it.
#
#   docker build -t recap:dev .
#
# Build stage: librdkafka is compiled from source by rdkafka-sys (cmake), so the builder
# needs cmake and pkg-config (the image has the compilers, perl and make OpenSSL's build
# uses), as scripts/toolchain.sh installs on a dev box.
ARG RUST_VERSION=1.95.0
FROM rust:${RUST_VERSION}-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends cmake pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The caches keep the registry and incremental artifacts between builds on one builder;
# the binary is copied out because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin recap \
 && install -D -m 0755 target/release/recap /out/recap
# The runtime image below has glibc and libgcc only: refuse a binary that links anything
# else (say a later Cargo feature that links libcurl or OpenSSL dynamically) instead of
# shipping an image that fails at start.
RUN extra=$(ldd /out/recap | awk '{print $1}' \
      | grep -Ev '^(linux-vdso\.so\.1|/lib(64)?/ld-linux-[a-z0-9_-]+\.so\.[0-9]+|lib(c|m|dl|rt|pthread|gcc_s)\.so\.[0-9]+)$' || true); \
    if [ -n "$extra" ]; then echo "recap links libraries the runtime image lacks: $extra" >&2; exit 1; fi

# Runtime: distroless cc (Debian 12, same glibc as the builder): glibc, libgcc, CA
# certificates, no shell and no package manager. Its `nonroot` user is 65532.
# Lifecycle hooks therefore cannot exec a shell: the chart uses the native preStop sleep.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="recap" \
      org.opencontainers.image.description="The read side of the meeting-notes service: projector, REST API v1 and MCP server" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/recap /usr/local/bin/recap
USER 65532:65532
# REST API, MCP server, admin (/livez, /readyz, /metrics) as the chart configures them.
EXPOSE 8080 8081 9464
ENTRYPOINT ["/usr/local/bin/recap"]
CMD ["--help"]
