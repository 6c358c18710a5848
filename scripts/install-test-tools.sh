#!/usr/bin/env bash
# Installs what the tests use besides Go, when it is missing or stale:
# from Debian's packages, Node.js and npm (the dashboard's JavaScript tests,
# the contract's linters, the TypeScript client), Chromium and the DejaVu
# fonts (the dashboard's browser tests, make browser-test: npm ci in
# web/e2e, /usr/bin/chromium driven by playwright-core, which downloads no
# browser of its own), curl (the runnable API examples, the client tests),
# Python with venv (the Python client) and shellcheck (make shellcheck);
# JDK 17 and Maven for the Cassandra and Kafka test nodes (scripts/cassandra.sh
# tools, scripts/kafka.sh tools); Prometheus, the server the PromQL answers
# are compared with (scripts/prometheus.sh tools);
# then the npm projects api/lint and api/clients/typescript (npm ci, from
# their committed package-lock.json) and the Python client generator in a
# venv under api/clients/python/.venv (git-ignored). npm runs no install
# scripts: none of these packages needs one, and some would call home.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "install-test-tools.sh: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=lib/install.sh
. scripts/lib/install.sh
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
# The browser tests pin the page's font to DejaVu Sans for their screenshots.
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v shellcheck >/dev/null || missing+=(shellcheck)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} for the tests" >&2
  apt_install "${missing[@]}"
fi
scripts/cassandra.sh tools >/dev/null
scripts/prometheus.sh tools >/dev/null

# An npm project is installed again when its lock file changed since.
for dir in api/lint api/clients/typescript; do
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "installing the npm packages of $dir (npm ci)" >&2
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
done

venv=api/clients/python/.venv
req=api/clients/python/requirements.txt
if [ ! -x "$venv/bin/openapi-python-client" ] || [ "$req" -nt "$venv/.installed" ]; then
  echo "installing the Python client generator into $venv (pip)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$req"
  touch "$venv/.installed"
fi
