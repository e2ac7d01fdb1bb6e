# syntax=docker/dockerfile:1
# EventForge: one static binary in an image from scratch, the same image
# `make image` builds without a Docker engine (deploy/k8s/imagebuild): the
# nonroot user 65532, /etc/ssl/certs/ca-certificates.crt, a 1777 /tmp, the
# entrypoint /eventforge and the org.opencontainers.image.* labels.
# deploy/k8s/imagebuild/dockerfile_test.go keeps the two consistent.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t eventforge:local .
#   docker run --rm eventforge:local version

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# go.mod asks for a patch release newer than the image may carry: let the
# go command fetch that toolchain rather than fail.
ENV GOTOOLCHAIN=auto CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# Only the Go sources: local service data under .eventforge/ never enters
# the build.
COPY api/ api/
COPY cdc/ cdc/
COPY cmd/ cmd/
COPY internal/ internal/
COPY sql/ sql/
COPY worker/ worker/
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/eventforge ./cmd/eventforge
# The root file system of the image: users, CA bundle, /tmp, home.
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/home/nonroot && \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/rootfs/etc/passwd && \
    printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group && \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ && \
    chmod 1777 /rootfs/tmp && chmod 700 /rootfs/home/nonroot && chown 65532:65532 /rootfs/home/nonroot

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
COPY --from=build /rootfs/ /
COPY --from=build /out/eventforge /eventforge
ENV PATH=/ SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/home/nonroot
LABEL org.opencontainers.image.title="eventforge" \
      org.opencontainers.image.description="EventForge: CDC relay PostgreSQL outbox to Kafka, inbox workers, orders API" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/eventforge/eventforge" \
      org.opencontainers.image.licenses="NOASSERTION"
USER 65532:65532
WORKDIR /home/nonroot
# 8080: API (api run); 9090: /healthz, /readyz, /metrics (--metrics-addr).
EXPOSE 8080 9090
ENTRYPOINT ["/eventforge"]
CMD ["--help"]
