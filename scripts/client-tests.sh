#!/usr/bin/env bash
# Generates clients from api/openapi.yaml as users would and runs them
# against a gateway on the embedded store: TypeScript types from
# openapi-typescript (checked by tsc, run by node) and a Python client from
# openapi-python-client. The gateway is built and started here on a free
# loopback port with a scratch data directory, and stopped at the end.
# The tools come from api/clients/*/ (npm ci, a venv under .venv), which
# scripts/install-test-tools.sh installs; generated code stays out of git.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
gateway_pid=""
cleanup() {
  if [ -n "$gateway_pid" ]; then kill "$gateway_pid" 2>/dev/null || true; wait "$gateway_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

${GO:-go} build -o "$tmp/gateway" ./cmd/gateway
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/gateway" serve --addr "127.0.0.1:$port" --data-dir "$tmp/data" >"$tmp/gateway.log" 2>&1 &
gateway_pid=$!
export GATEWAY_URL="http://127.0.0.1:$port"
for _ in $(seq 100); do
  if curl -fsS "$GATEWAY_URL/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$gateway_pid" 2>/dev/null; then cat "$tmp/gateway.log" >&2; echo "the gateway did not start" >&2; exit 1; fi
  sleep 0.1
done
curl -fsS "$GATEWAY_URL/readyz" >/dev/null || { cat "$tmp/gateway.log" >&2; echo "the gateway is not ready" >&2; exit 1; }

echo "TypeScript client (openapi-typescript, tsc, node)"
(
  cd api/clients/typescript
  rm -rf gen dist
  node_modules/.bin/openapi-typescript "$root/api/openapi.yaml" -o gen/schema.d.ts --silent
  node_modules/.bin/tsc -p .
  node dist/main.js
)

echo "Python client (openapi-python-client)"
(
  cd api/clients/python
  rm -rf gen
  # The generator formats its output with the ruff it installs.
  PATH="$PWD/.venv/bin:$PATH" .venv/bin/openapi-python-client generate \
    --path "$root/api/openapi.yaml" --output-path gen/tsgate_client --meta none >"$tmp/generate.log" 2>&1 \
    || { cat "$tmp/generate.log" >&2; exit 1; }
  .venv/bin/python client_test.py
)
