#!/usr/bin/env bash
# Prometheus for the tests and benchmarks that compare the gateway with the
# real thing: one server on 127.0.0.1, with the remote-write receiver on, on
# a data directory of its own that is fresh on every start.
#
#   scripts/prometheus.sh start        install Prometheus (once), write its configuration,
#                                      start a server, wait until /-/ready answers
#   scripts/prometheus.sh stop         stop the server started by this script
#   scripts/prometheus.sh status       print whether the server runs; exit 0 if it is
#                                      ready, 3 if it is not running, 1 if it runs but
#                                      is not ready
#   scripts/prometheus.sh run CMD...   run CMD with PROMETHEUS_URL set: to PROMETHEUS_URL if
#                                      that is set already (nothing is started), else to the
#                                      running local server (left running), else to a server
#                                      started for CMD and stopped after it, also when CMD
#                                      fails; exits with CMD's status
#   scripts/prometheus.sh tools        install Debian's prometheus package when missing
#                                      (the server and promtool; apt-get, through sudo when
#                                      not root)
#
# The server is Debian's prometheus package (bookworm: 2.42), started by
# this script as the calling user with its own configuration, port and
# data. The package's own system service is stopped and disabled right
# after the package is installed: it is not used, and it would take port
# 9090 and /var/lib/prometheus. The configuration has no scrape targets
# unless PROMETHEUS_SCRAPE names one, and no remote write unless
# PROMETHEUS_REMOTE_WRITE names a receiver; it is checked with promtool
# before the server starts. The admin API is on (a test may delete series
# or take a snapshot). The server listens on loopback only.
#
# Cache layout (default <repo>/.prometheus):
#   server/          prometheus.yml and data/ of the server (fresh on every start)
#   logs/            prometheus.log (the server's output; the previous run's in .prev)
#   prometheus.pid   pid of the running server; prometheus.port its port
#
# Environment:
#   PROMETHEUS_PORT             HTTP port (9490: clear of the gateway's 8080, Cassandra's
#                               9042/7000/7199, Kafka's 9092/9093 and Prometheus' own 9090)
#   PROMETHEUS_SCRAPE           host:port of a target whose /metrics the server scrapes
#                               (job "tsgate"); none by default
#   PROMETHEUS_SCRAPE_INTERVAL  scrape interval and timeout of that job (1s)
#   PROMETHEUS_REMOTE_WRITE     URL the server remote-writes every sample it ingests to,
#                               with a one-second batch deadline and short backoffs
#   PROMETHEUS_RETENTION        --storage.tsdb.retention.time (400d: benchmarks load
#                               100 days of history and more)
#   PROMETHEUS_ARGS             extra server flags, appended last (word-split)
#   PROMETHEUS_START_TIMEOUT    seconds to wait for /-/ready before giving up (60)
#   PROMETHEUS_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL (30)
#   PROMETHEUS_HOME_CACHE       cache directory (<repo>/.prometheus)
#   PROMETHEUS_BIN              the server binary (/usr/bin/prometheus); when it is set,
#                               nothing is installed
#   PROMTOOL_BIN                promtool (/usr/bin/promtool, or beside PROMETHEUS_BIN)
#   PROMETHEUS_URL              for run: the server to use instead of a local one
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PROMETHEUS_HOME_CACHE:-$ROOT/.prometheus}"
SERVER="$CACHE/server"
CONFIG="$SERVER/prometheus.yml"
LOGDIR="$CACHE/logs"
LOG="$LOGDIR/prometheus.log"
PIDFILE="$CACHE/prometheus.pid"
PORTFILE="$CACHE/prometheus.port"

PORT="${PROMETHEUS_PORT:-9490}"
SCRAPE="${PROMETHEUS_SCRAPE:-}"
SCRAPE_INTERVAL="${PROMETHEUS_SCRAPE_INTERVAL:-1s}"
REMOTE_WRITE="${PROMETHEUS_REMOTE_WRITE:-}"
RETENTION="${PROMETHEUS_RETENTION:-400d}"
START_TIMEOUT="${PROMETHEUS_START_TIMEOUT:-60}"
STOP_TIMEOUT="${PROMETHEUS_STOP_TIMEOUT:-30}"
BIN="${PROMETHEUS_BIN:-/usr/bin/prometheus}"
if [ -n "${PROMTOOL_BIN:-}" ]; then
  PROMTOOL="$PROMTOOL_BIN"
elif [ -n "${PROMETHEUS_BIN:-}" ]; then
  PROMTOOL="$(dirname "$PROMETHEUS_BIN")/promtool"
else
  PROMTOOL=/usr/bin/promtool
fi

log() { echo "prometheus.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=lib/install.sh
. "$ROOT/scripts/lib/install.sh"
# shellcheck source=lib/process.sh
. "$ROOT/scripts/lib/process.sh"

# ensure_prometheus installs Debian's package when the server or promtool
# is missing, without the node exporter it recommends, and stops the
# system service the package may have started.
ensure_prometheus() {
  [ -x "$BIN" ] && [ -x "$PROMTOOL" ] && return 0
  [ -z "${PROMETHEUS_BIN:-}${PROMTOOL_BIN:-}" ] || die "$BIN or $PROMTOOL is not an executable (PROMETHEUS_BIN / PROMTOOL_BIN)"
  apt_install --no-install-recommends prometheus
  stop_system_service prometheus
  if [ ! -x "$BIN" ] || [ ! -x "$PROMTOOL" ]; then
    die "no $BIN and $PROMTOOL after installing prometheus"
  fi
}

version() { "$BIN" --version 2>&1 | sed -n 's/^prometheus, version \([^ ]*\).*/\1/p' | head -n 1; }

# running_pid prints the pid of the server started by this script if it runs.
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && alive "$pid" || return 1
  # A recycled pid runs something else: ours names its configuration.
  cmdline_has "$pid" "--config.file=$CONFIG" || return 1
  echo "$pid"
}

running_port() { cat "$PORTFILE" 2>/dev/null || echo "$PORT"; }

# render_config prints prometheus.yml.
render_config() {
  cat <<EOF
# Written by scripts/prometheus.sh; fresh on every start.
global:
  scrape_interval: ${SCRAPE_INTERVAL}
  scrape_timeout: ${SCRAPE_INTERVAL}
  evaluation_interval: 1m
EOF
  if [ -n "$SCRAPE" ]; then
    cat <<EOF
scrape_configs:
  - job_name: tsgate
    metrics_path: /metrics
    static_configs:
      - targets: ['${SCRAPE}']
EOF
  fi
  if [ -n "$REMOTE_WRITE" ]; then
    cat <<EOF
remote_write:
  - url: '${REMOTE_WRITE}'
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 2s
EOF
  fi
}

cmd_start() {
  local pid t0 deadline
  if pid="$(running_pid)"; then
    echo "Prometheus is already running (pid $pid, port $(running_port))"
    return 0
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  ! port_busy "$PORT" || die "port $PORT on 127.0.0.1 is already in use (set PROMETHEUS_PORT)"
  case "$SCRAPE" in '' | *:*) ;; *) die "PROMETHEUS_SCRAPE must be host:port, not $SCRAPE" ;; esac
  ensure_prometheus

  rm -rf "$SERVER"
  mkdir -p "$SERVER/data" "$LOGDIR"
  render_config >"$CONFIG"
  if ! "$PROMTOOL" check config "$CONFIG" >"$LOGDIR/check-config.log" 2>&1; then
    cat "$LOGDIR/check-config.log" >&2
    die "promtool refused the configuration $CONFIG"
  fi
  local args=(
    "--config.file=$CONFIG"
    "--storage.tsdb.path=$SERVER/data"
    "--storage.tsdb.retention.time=$RETENTION"
    "--web.listen-address=127.0.0.1:$PORT"
    --web.enable-remote-write-receiver
    --web.enable-admin-api
    # On stop, a receiver that is gone delays the server by this much at
    # most (1m by default).
    --storage.remote.flush-deadline=5s
  )
  if [ -n "${PROMETHEUS_ARGS:-}" ]; then
    # shellcheck disable=SC2206 # word splitting is intended
    args+=($PROMETHEUS_ARGS)
  fi
  [ -f "$LOG" ] && mv -f "$LOG" "$LOG.prev"
  : >"$LOG"

  log "starting Prometheus $(version) on 127.0.0.1:$PORT${SCRAPE:+, scraping $SCRAPE every $SCRAPE_INTERVAL}${REMOTE_WRITE:+, remote-writing to $REMOTE_WRITE}"
  t0=$EPOCHREALTIME
  # setsid: the server gets its own session, so a Ctrl-C in the terminal
  # does not reach it; callers stop it with "stop". Its working directory
  # is the server directory (relative paths of the package's defaults).
  (cd "$SERVER" && exec setsid "$BIN" "${args[@]}" >>"$LOG" 2>&1 </dev/null) &
  pid=$!
  echo "$pid" >"$PIDFILE"
  echo "$PORT" >"$PORTFILE"

  deadline=$((SECONDS + START_TIMEOUT))
  until http_ok "$PORT" /-/ready; do
    alive "$pid" || fail_start "Prometheus exited during startup"
    [ "$SECONDS" -lt "$deadline" ] || fail_start "Prometheus was not ready within $START_TIMEOUT s"
    sleep 0.2
  done
  echo "Prometheus $(version) ready on 127.0.0.1:$PORT after $(seconds_since "$t0") s (pid $pid, log $LOG)"
}

# fail_start prints the end of the log, stops the half-started server and exits.
fail_start() { fail_service_start "$1" 40; }

cmd_stop() { stop_service Prometheus; }

cmd_status() {
  local pid port
  if ! pid="$(running_pid)"; then
    echo "Prometheus is not running"
    return 3
  fi
  port="$(running_port)"
  if http_ok "$port" /-/ready; then
    echo "Prometheus running (pid $pid, port $port)"
  else
    echo "Prometheus process running (pid $pid, port $port) but not ready"
    return 1
  fi
}

cmd_run() {
  local rc=0
  [ "$#" -gt 0 ] || die "usage: $0 run COMMAND..."
  if [ -n "${PROMETHEUS_URL:-}" ]; then
    log "running against PROMETHEUS_URL=$PROMETHEUS_URL"
    "$@"
    return
  fi
  cmd_status >/dev/null 2>&1 || rc=$?
  case $rc in
    0) log "using the running local Prometheus on port $(running_port)" ;;
    3)
      # Stopped on any exit; a signal becomes an exit so that the trap runs.
      trap 'cmd_stop >&2' EXIT
      trap 'exit 130' INT TERM
      cmd_start >&2
      ;;
    *) cmd_status; exit 1 ;;
  esac
  PROMETHEUS_URL="http://127.0.0.1:$(running_port)" "$@"
}

cmd_tools() {
  ensure_prometheus
  echo "Prometheus $(version): $BIN, $PROMTOOL"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  run) shift; cmd_run "$@" ;;
  tools) cmd_tools ;;
  *) echo "usage: $0 start|stop|status|run COMMAND...|tools" >&2; exit 2 ;;
esac
