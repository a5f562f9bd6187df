# Build: a static binary, built the same way .ci/run builds it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The context leaves .git out, so the build cannot stamp VCS information
# itself: pass it in (`clankie version` prints "unknown" for what is not).
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg COMMIT_TIME=$(git log -1 --format=%cI) -t clankie .
ARG VERSION=""
ARG REVISION=""
ARG COMMIT_TIME=""
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X main.stampVersion=${VERSION} -X main.stampRevision=${REVISION} -X main.stampTime=${COMMIT_TIME}" \
      -o /out/clankie ./cmd/clankie \
 && /out/clankie version \
 && mkdir -p /out/data

# Run: nothing but the binary, as a non-root user, memory on a volume.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/clankie /usr/local/bin/clankie
# The memory root belongs to the non-root user, so a fresh named volume does too.
COPY --from=build --chown=65532:65532 /out/data /data
ENV CLANKIE_MEMORY_DIR=/data \
    CLANKIE_MEMORY_ADDR=0.0.0.0:4310
VOLUME ["/data"]
EXPOSE 4310
USER nonroot:nonroot
# distroless has no shell or curl: the binary checks its own readiness, at
# whatever address CLANKIE_MEMORY_ADDR binds (a changed port included).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/clankie", "health", "--local"]
ENTRYPOINT ["/usr/local/bin/clankie"]
CMD ["up"]
