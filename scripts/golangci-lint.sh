#!/usr/bin/env bash
# Runs golangci-lint, at the version pinned here, over every build of the
# module: the packages, and the integration and cluster tests with their
# build tags. The linters and their exceptions are in .golangci.yml.
#
# The binary is built from its module (the Go module proxy) with the
# machine's Go into .tools/bin (git-ignored), once per version: a release
# binary would have to come from GitHub, which this project does not
# depend on reaching.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v2.15.0
BIN=.tools/bin/golangci-lint-$VERSION
if [ ! -x "$BIN" ]; then
  echo "golangci-lint.sh: building golangci-lint $VERSION into .tools/bin (once; a few minutes)" >&2
  mkdir -p .tools/bin
  GOBIN="$PWD/.tools/bin" "${GO:-go}" install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$VERSION"
  mv .tools/bin/golangci-lint "$BIN"
fi
"$BIN" run ./...
"$BIN" run --build-tags integration ./integration/...
"$BIN" run --build-tags cluster ./integration/cluster/
