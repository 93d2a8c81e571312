# syntax=docker/dockerfile:1
# hookgate: one image for every role (controller, receiver, worker, migrate) plus the kubectl plugin.
#   docker build -t hookgate:0.1.0 .
# The chart runs it as `hookgate <role> ...`; see charts/hookgate.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Only what the build reads: the manifest, the lockfile, the sources and the migrations that
# sqlx::migrate! embeds at compile time.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY migrations ./migrations
# The cache mounts keep the registry and build artefacts between builds; the binaries are copied
# out because the target mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin hookgate --bin kubectl-hookgate \
 && mkdir -p /out \
 && cp target/release/hookgate target/release/kubectl-hookgate /out/

# glibc, libgcc and CA certificates, no shell, no package manager; runs as nonroot (65532).
# No HEALTHCHECK: Kubernetes ignores it (the chart probes /healthz and /readyz on the admin port),
# and the image has no shell or curl to run one.
# checkov:skip=CKV_DOCKER_2:Kubernetes ignores HEALTHCHECK; the chart probes /healthz and /readyz
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/hookgate /hookgate
COPY --from=build /out/kubectl-hookgate /kubectl-hookgate
USER 65532:65532
EXPOSE 8080 9090 9091
ENTRYPOINT ["/hookgate"]
