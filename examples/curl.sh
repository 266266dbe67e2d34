#!/usr/bin/env bash
# Talk to memproxy with curl. Start it first (scripts/run); without an LLM at hand, run the mock:
#   cargo run -- mock-upstream --listen 127.0.0.1:8090 &
#   scripts/run --upstream http://127.0.0.1:8090/v1
set -euo pipefail
base="${MEMPROXY_URL:-http://127.0.0.1:8080}"
key="${MEMPROXY_KEY:-unused-when-auth-is-off}"

# A plain completion; X-Memproxy-User scopes memory to one user.
curl -sS "$base/v1/chat/completions" \
  -H "Authorization: Bearer $key" -H "Content-Type: application/json" \
  -H "X-Memproxy-User: alice" \
  -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}'
echo

# Streaming (-N: print events as they arrive).
curl -sSN "$base/v1/chat/completions" \
  -H "Authorization: Bearer $key" -H "Content-Type: application/json" \
  -d '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Count to 3"}]}'

# Pick a strategy per request with a route prefix or the X-Memproxy-Mode header.
curl -sS "$base/passthrough/v1/models" -H "Authorization: Bearer $key"
echo
