# syntax=docker/dockerfile:1
# Images of the lab, built from this workspace (no protoc needed: the proto is compiled by protox):
#   docker build --target dn-sim  -t ozone-dn-lab/dn-sim .
#   docker build --target loadgen -t ozone-dn-lab/loadgen .
# docker-compose.yml builds both. The runtime is distroless (glibc, no shell, user nonroot), so
# dn-sim's healthcheck is dn-sim itself: `dn-sim healthcheck` asks grpc.health.v1.Health.
# The builder's glibc (bookworm) must not be newer than the runtime's (debian12 = bookworm).

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY . .
# The registry and target folders are BuildKit cache mounts: a rebuild after a source change
# compiles only the workspace. They are not part of any layer, so the binaries are copied out.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p dn-sim -p loadgen \
 && mkdir -p /out \
 && cp target/release/dn-sim target/release/loadgen /out/

FROM ${RUNTIME_IMAGE} AS loadgen
COPY --from=builder /out/loadgen /usr/local/bin/loadgen
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/loadgen"]
CMD ["--help"]

FROM ${RUNTIME_IMAGE} AS dn-sim
COPY --from=builder /out/dn-sim /usr/local/bin/dn-sim
# Every flag has a DN_SIM_* variable; OZONE-SITE.XML_<key>=<value> variables act as -D <key>=<value>.
ENV DN_SIM_LISTEN=0.0.0.0:9859 \
    DN_SIM_METRICS_LISTEN=0.0.0.0:9882 \
    NO_COLOR=1
EXPOSE 9859 9858 9857 9882
USER 65532:65532
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/dn-sim", "healthcheck", "--timeout", "2s"]
ENTRYPOINT ["/usr/local/bin/dn-sim"]
