#!/usr/bin/env bash
# Installs, from Debian's packages, the tools the tests use besides Go when
# they are missing: Node.js for the dashboard's JavaScript tests
# (node --test web/), npm and Chromium for its browser tests (make
# browser-test: npm ci in web/e2e, /usr/bin/chromium driven by
# playwright-core, which downloads no browser of its own, and the DejaVu
# fonts its screenshots are drawn with) and curl for the runnable API
# examples.
set -euo pipefail
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
# The browser tests pin the page's font to DejaVu Sans for their screenshots.
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
command -v curl >/dev/null || missing+=(curl)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing ${missing[*]} for the tests (apt-get install)" >&2
$sudo apt-get update -qq
$sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
