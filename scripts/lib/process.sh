# shellcheck shell=bash
# Checks on the processes and ports of the test services the project's
# scripts start (Cassandra, Kafka, Prometheus, VictoriaMetrics).

# alive tells whether process $1 exists and is not a zombie (a process that
# died while this script is still its parent stays a zombie until the script
# exits).
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d ' ' -f 1)" != Z ]
}

# cmdline_has tells whether the command line of process $1 contains the
# text $2: a pid file may name a pid that has been reused since.
cmdline_has() {
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# port_busy tells whether something accepts connections on 127.0.0.1:$1.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# seconds_since T0 prints the seconds since $EPOCHREALTIME was T0, to 0.1 s.
seconds_since() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# http_ok tells whether http://127.0.0.1:$1$2 answers a GET with 200
# within 5 s (HTTP/1.0 over bash's /dev/tcp: no curl needed).
http_ok() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$2" "$1" >&3 || exit 1
    IFS= read -r -t 5 line <&3 || exit 1
    [[ $line == "HTTP/1."[01]" 200"* ]]
  ) 2>/dev/null
}

# stop_service stops the service named $1 (for messages) whose pid the
# calling script's running_pid prints: SIGTERM, then SIGKILL after
# $STOP_TIMEOUT s; its $PIDFILE and $PORTFILE are removed.
stop_service() {
  local name="$1" pid waited=0
  if ! pid="$(running_pid)"; then
    rm -f "$PIDFILE" "$PORTFILE"
    echo "$name is not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" && [ "$waited" -lt $((STOP_TIMEOUT * 5)) ]; do
    sleep 0.2
    waited=$((waited + 1))
  done
  if alive "$pid"; then
    log "$name (pid $pid) still running after $STOP_TIMEOUT s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.2; done
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  echo "$name stopped (pid $pid)"
}

# fail_service_start prints message $1 and the last $2 lines of $LOG,
# stops the half-started service (the calling script's cmd_stop) and exits.
fail_service_start() {
  log "$1; last lines of $LOG:"
  tail -n "$2" "$LOG" >&2 || true
  cmd_stop >&2 || true
  exit 1
}
