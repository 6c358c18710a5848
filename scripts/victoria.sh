#!/usr/bin/env bash
# VictoriaMetrics (single node) for the benchmarks that set the gateway
# beside it: one server on 127.0.0.1, on a data directory of its own that is
# fresh on every start.
#
#   scripts/victoria.sh start        install VictoriaMetrics (once), start a server,
#                                    wait until /health answers
#   scripts/victoria.sh stop         stop the server started by this script
#   scripts/victoria.sh status       print whether the server runs; exit 0 if it is
#                                    healthy, 3 if it is not running, 1 if it runs but
#                                    is not healthy
#   scripts/victoria.sh run CMD...   run CMD with VICTORIA_URL set: to VICTORIA_URL if that
#                                    is set already (nothing is started), else to the
#                                    running local server (left running), else to a server
#                                    started for CMD and stopped after it, also when CMD
#                                    fails; exits with CMD's status
#   scripts/victoria.sh tools        install Debian's victoria-metrics package when missing
#                                    (apt-get, through sudo when not root)
#
# The server is Debian's victoria-metrics package (bookworm: 1.79), started
# by this script as the calling user with its own port and data. The
# package's own system service is stopped and disabled right after the
# package is installed: it is not used, and it would take port 8428 and
# /var/lib/victoria-metrics. VictoriaMetrics refuses samples older than its
# retention period counted back from the wall clock, so the default keeps
# far more than the 100 days of history the benchmarks load. Its query
# result cache is on by default; VICTORIA_ARGS=-search.disableCache turns
# it off, for benchmarks run with and without it. The server listens on
# loopback only, for HTTP alone (no Graphite, InfluxDB or OpenTSDB
# listeners).
#
# Cache layout (default <repo>/.victoria):
#   server/data/     the server's storage (fresh on every start)
#   logs/            victoria.log (the server's output; the previous run's in .prev)
#   victoria.pid     pid of the running server; victoria.port its port
#
# Environment:
#   VICTORIA_PORT           HTTP port (8481: clear of VictoriaMetrics' own 8428, the
#                           gateway's 8080 and the other test services)
#   VICTORIA_RETENTION      -retentionPeriod (10y: the benchmarks' 100 days of history,
#                           placed at any instant of the recent past)
#   VICTORIA_ARGS           extra server flags, appended last (word-split); e.g.
#                           -search.disableCache, -search.latencyOffset=0s
#   VICTORIA_START_TIMEOUT  seconds to wait for /health before giving up (60)
#   VICTORIA_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (30)
#   VICTORIA_HOME_CACHE     cache directory (<repo>/.victoria)
#   VICTORIA_BIN            the server binary (/usr/bin/victoria-metrics); when it is
#                           set, nothing is installed
#   VICTORIA_URL            for run: the server to use instead of a local one
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${VICTORIA_HOME_CACHE:-$ROOT/.victoria}"
SERVER="$CACHE/server"
LOGDIR="$CACHE/logs"
LOG="$LOGDIR/victoria.log"
PIDFILE="$CACHE/victoria.pid"
PORTFILE="$CACHE/victoria.port"

PORT="${VICTORIA_PORT:-8481}"
RETENTION="${VICTORIA_RETENTION:-10y}"
START_TIMEOUT="${VICTORIA_START_TIMEOUT:-60}"
STOP_TIMEOUT="${VICTORIA_STOP_TIMEOUT:-30}"
BIN="${VICTORIA_BIN:-/usr/bin/victoria-metrics}"

log() { echo "victoria.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=lib/install.sh
. "$ROOT/scripts/lib/install.sh"
# shellcheck source=lib/process.sh
. "$ROOT/scripts/lib/process.sh"

# ensure_victoria installs Debian's package when the server is missing,
# and stops the system service the package may have started.
ensure_victoria() {
  [ -x "$BIN" ] && return 0
  [ -z "${VICTORIA_BIN:-}" ] || die "$BIN is not an executable (VICTORIA_BIN)"
  apt_install --no-install-recommends victoria-metrics
  stop_system_service victoria-metrics
  [ -x "$BIN" ] || die "no $BIN after installing victoria-metrics"
}

# version prints the server's version; Debian's build has none of its own
# to print, so it is the package's.
version() {
  local v
  v="$("$BIN" -version 2>/dev/null | head -n 1)"
  [ -n "$v" ] || v="$(dpkg-query -W -f='${Version}' victoria-metrics 2>/dev/null)" || true
  echo "${v:-unknown}"
}

# running_pid prints the pid of the server started by this script if it runs.
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && alive "$pid" || return 1
  # A recycled pid runs something else: ours names its data directory.
  cmdline_has "$pid" "-storageDataPath=$SERVER/data" || return 1
  echo "$pid"
}

running_port() { cat "$PORTFILE" 2>/dev/null || echo "$PORT"; }

cmd_start() {
  local pid t0 deadline
  if pid="$(running_pid)"; then
    echo "VictoriaMetrics is already running (pid $pid, port $(running_port))"
    return 0
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  ! port_busy "$PORT" || die "port $PORT on 127.0.0.1 is already in use (set VICTORIA_PORT)"
  ensure_victoria

  rm -rf "$SERVER"
  mkdir -p "$SERVER/data" "$LOGDIR"
  local args=(
    "-storageDataPath=$SERVER/data"
    "-retentionPeriod=$RETENTION"
    "-httpListenAddr=127.0.0.1:$PORT"
  )
  if [ -n "${VICTORIA_ARGS:-}" ]; then
    # shellcheck disable=SC2206 # word splitting is intended
    args+=($VICTORIA_ARGS)
  fi
  [ -f "$LOG" ] && mv -f "$LOG" "$LOG.prev"
  : >"$LOG"

  log "starting VictoriaMetrics $(version) on 127.0.0.1:$PORT (retention $RETENTION${VICTORIA_ARGS:+, $VICTORIA_ARGS})"
  t0=$EPOCHREALTIME
  # setsid: the server gets its own session, so a Ctrl-C in the terminal
  # does not reach it; callers stop it with "stop".
  (cd "$SERVER" && exec setsid "$BIN" "${args[@]}" >>"$LOG" 2>&1 </dev/null) &
  pid=$!
  echo "$pid" >"$PIDFILE"
  echo "$PORT" >"$PORTFILE"

  deadline=$((SECONDS + START_TIMEOUT))
  until http_ok "$PORT" /health; do
    alive "$pid" || fail_start "VictoriaMetrics exited during startup"
    [ "$SECONDS" -lt "$deadline" ] || fail_start "VictoriaMetrics was not healthy within $START_TIMEOUT s"
    sleep 0.2
  done
  echo "VictoriaMetrics ready on 127.0.0.1:$PORT after $(seconds_since "$t0") s (pid $pid, log $LOG)"
}

# fail_start prints the end of the log, stops the half-started server and exits.
fail_start() { fail_service_start "$1" 40; }

cmd_stop() { stop_service VictoriaMetrics; }

cmd_status() {
  local pid port
  if ! pid="$(running_pid)"; then
    echo "VictoriaMetrics is not running"
    return 3
  fi
  port="$(running_port)"
  if http_ok "$port" /health; then
    echo "VictoriaMetrics running (pid $pid, port $port)"
  else
    echo "VictoriaMetrics process running (pid $pid, port $port) but not healthy"
    return 1
  fi
}

cmd_run() {
  local rc=0
  [ "$#" -gt 0 ] || die "usage: $0 run COMMAND..."
  if [ -n "${VICTORIA_URL:-}" ]; then
    log "running against VICTORIA_URL=$VICTORIA_URL"
    "$@"
    return
  fi
  cmd_status >/dev/null 2>&1 || rc=$?
  case $rc in
    0) log "using the running local VictoriaMetrics on port $(running_port)" ;;
    3)
      # Stopped on any exit; a signal becomes an exit so that the trap runs.
      trap 'cmd_stop >&2' EXIT
      trap 'exit 130' INT TERM
      cmd_start >&2
      ;;
    *) cmd_status; exit 1 ;;
  esac
  VICTORIA_URL="http://127.0.0.1:$(running_port)" "$@"
}

cmd_tools() {
  ensure_victoria
  echo "VictoriaMetrics $(version): $BIN"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  run) shift; cmd_run "$@" ;;
  tools) cmd_tools ;;
  *) echo "usage: $0 start|stop|status|run COMMAND...|tools" >&2; exit 2 ;;
esac
