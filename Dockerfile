# Build: a static binary, built the same way .ci/run builds it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/clankie ./cmd/clankie \
 && mkdir -p /out/data

# Run: nothing but the binary, as a non-root user, memory on a volume.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/clankie /usr/local/bin/clankie
# The memory root belongs to the non-root user, so a fresh named volume does too.
COPY --from=build --chown=65532:65532 /out/data /data
ENV CLANKIE_MEMORY_DIR=/data \
    CLANKIE_MEMORY_ADDR=0.0.0.0:4310 \
    CLANKIE_MEMORY_URL=http://127.0.0.1:4310
VOLUME ["/data"]
EXPOSE 4310
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/clankie"]
CMD ["up"]
