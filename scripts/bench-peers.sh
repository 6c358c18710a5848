#!/usr/bin/env bash
# The gateway beside VictoriaMetrics (single node) and Prometheus on the
# same data (make bench-peers; docs/benchmarks.md, "Beside VictoriaMetrics
# and Prometheus").
#
#   scripts/bench-peers.sh [FLAG...]   install the peers when missing (Debian's
#                                      victoria-metrics and prometheus packages, through
#                                      scripts/victoria.sh tools and scripts/prometheus.sh
#                                      tools), build the gateway and cmd/benchpeers, run
#                                      the benchmark; FLAGs go to cmd/benchpeers
#                                      (e.g. -days 14 -reps 7 for a quick run)
#
# cmd/benchpeers generates the data set, loads it into each side, starts
# the gateway (embedded store), VictoriaMetrics and Prometheus on loopback
# ports 18480-18482 with their data in the scratch directory, restarts them
# for the cold reads and stops them at the end. Should it be killed
# outright, the trap below stops every process it started (their ids are
# in the scratch directory's pids file, each checked to still name the
# scratch directory) and removes the scratch data, whatever the outcome.
# The run is bounded: after BENCH_PEERS_TIMEOUT seconds it is stopped.
#
# Environment:
#   BENCH_PEERS_ARGS      flags for cmd/benchpeers, word-split, before the command line's
#   BENCH_PEERS_DIR       where the scratch data and the report go (<repo>/.bench-peers);
#                         the report is report.md there, the servers' logs logs/ (kept)
#   BENCH_PEERS_TIMEOUT   seconds before the run is stopped (3600)
#   BENCH_PEERS_KEEP      1: keep the scratch data (data set, stores) after the run
#   BENCH_PEERS_STORE     cassandra: the gateway on a Cassandra node (scripts/cassandra.sh
#                         run: CASSANDRA_HOSTS, else a running local node, else one it
#                         starts and stops), keyspace benchpeers, dropped and created anew
#   GO                    the go command (go)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${BENCH_PEERS_DIR:-$ROOT/.bench-peers}"
SCRATCH="$DIR/run"
TIMEOUT="${BENCH_PEERS_TIMEOUT:-3600}"
GO="${GO:-go}"

log() { echo "bench-peers.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=lib/process.sh
. "$ROOT/scripts/lib/process.sh"

# cleanup stops what the benchmark started and left running (only when it
# was killed before it could stop them itself), keeps the logs and removes
# the scratch data.
# shellcheck disable=SC2317 # called by the EXIT trap only
cleanup() {
  local pid
  if [ -f "$SCRATCH/pids" ]; then
    while read -r pid; do
      if alive "$pid" && cmdline_has "$pid" "$SCRATCH"; then
        log "stopping process $pid left running"
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.2; done
        if alive "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
      fi
    done <"$SCRATCH/pids"
  fi
  if [ -d "$SCRATCH/logs" ]; then
    rm -rf "$DIR/logs"
    mv "$SCRATCH/logs" "$DIR/logs"
  fi
  if [ "${BENCH_PEERS_KEEP:-}" != 1 ]; then
    rm -rf "$SCRATCH"
  fi
}

case "$TIMEOUT" in '' | *[!0-9]*) die "BENCH_PEERS_TIMEOUT must be whole seconds, not $TIMEOUT" ;; esac
mkdir -p "$DIR"
"$ROOT/scripts/victoria.sh" tools >&2
"$ROOT/scripts/prometheus.sh" tools >&2
log "building the gateway and cmd/benchpeers"
version="$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)"
(cd "$ROOT" && "$GO" build -ldflags "-X main.version=$version" -o "$DIR/bin/gateway" ./cmd/gateway &&
  "$GO" build -o "$DIR/bin/benchpeers" ./cmd/benchpeers)

rm -f "$DIR/report.md"
trap cleanup EXIT

args=()
runner=()
case "${BENCH_PEERS_STORE:-embedded}" in
  embedded) ;;
  cassandra)
    # JMX for nodetool, so that the keyspace is measured once compacted
    # (used only when this starts the node; a running node is used as it is).
    export CASSANDRA_JMX_PORT="${CASSANDRA_JMX_PORT:-7199}"
    runner=("$ROOT/scripts/cassandra.sh" run)
    args=(-store cassandra -cassandra-data "$ROOT/.cassandra/node/data" -nodetool "$ROOT/scripts/cassandra.sh nodetool")
    ;;
  *) die "BENCH_PEERS_STORE must be embedded or cassandra, not $BENCH_PEERS_STORE" ;;
esac
if [ -n "${BENCH_PEERS_ARGS:-}" ]; then
  # shellcheck disable=SC2206 # word splitting is intended
  args+=($BENCH_PEERS_ARGS)
fi
rc=0
# In the background, so that a signal to this script is handled at once:
# it is passed on (the benchmark stops its servers) and becomes an exit,
# so that the EXIT trap runs.
timeout --signal=TERM --kill-after=60 "$TIMEOUT" \
  "${runner[@]}" "$DIR/bin/benchpeers" -scratch "$SCRATCH" -gateway "$DIR/bin/gateway" -out "$DIR/report.md" \
  -timeout "$((TIMEOUT - 30))s" "${args[@]}" "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true; wait "$child" || true; exit 130' INT TERM
wait "$child" || rc=$?
[ "$rc" -eq 0 ] || log "benchpeers exited with status $rc (logs in $DIR/logs)"
[ ! -f "$DIR/report.md" ] || log "report: $DIR/report.md"
exit "$rc"
