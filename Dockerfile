# The same image `make image` builds without a daemon (docs/image.md), for
# users with Docker or BuildKit:
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     -t ghcr.io/projection-recovery/projection-recovery:0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/member ./cmd/member

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), no shell.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="projection-recovery" \
      org.opencontainers.image.source="https://github.com/projection-recovery/projection-recovery" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/manager /out/member /
USER 65532:65532
ENTRYPOINT ["/manager"]
