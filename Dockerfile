# syntax=docker/dockerfile:1
# EventForge: one static binary in a small non-root image.
#   docker build -t eventforge:local .
#   docker run --rm eventforge:local version

ARG GO_VERSION=1.26
ARG ALPINE_VERSION=3.22

FROM golang:${GO_VERSION}-alpine AS build
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

FROM alpine:${ALPINE_VERSION}
# busybox wget serves the compose healthchecks; nothing else is added.
RUN addgroup -S -g 10001 eventforge && adduser -S -D -H -u 10001 -G eventforge eventforge
COPY --from=build /out/eventforge /usr/local/bin/eventforge
COPY deploy/handlers/ /etc/eventforge/
USER 10001:10001
# 8080: API (api run); 9090: /healthz, /readyz, /metrics (--metrics-addr).
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/eventforge"]
CMD ["--help"]
