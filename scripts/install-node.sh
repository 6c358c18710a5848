#!/usr/bin/env bash
# Installs Node.js from Debian's packages for the dashboard's JavaScript
# tests (node --test web/), when no node is on the PATH.
set -euo pipefail
if command -v node >/dev/null; then exit 0; fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing Node.js for the dashboard tests (apt-get install nodejs)" >&2
$sudo apt-get update -qq
$sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null
node --version
