#!/usr/bin/env bash
# Apache Kafka for integration tests and benchmarks: one node in KRaft mode
# (broker and controller in one process) on 127.0.0.1.
#
#   scripts/kafka.sh start        fetch Kafka (once), format fresh storage, start the node,
#                                 wait until it accepts clients
#   scripts/kafka.sh stop         stop the node started by this script
#   scripts/kafka.sh status       print whether the node runs; exit 0 if it accepts
#                                 connections, 3 if it is not running, 1 if it runs but
#                                 does not accept them
#   scripts/kafka.sh run CMD...   run CMD with KAFKA_BROKERS set: to KAFKA_BROKERS if that
#                                 is set already (nothing is started), else to the running
#                                 local node (left running), else to a node started for
#                                 CMD and stopped after it, also when CMD fails; exits with
#                                 CMD's status
#   scripts/kafka.sh tools        install what starting a node needs, when missing:
#                                 JDK 17 and Maven (apt-get, through sudo when not root)
#
# Kafka is not installed system-wide: the runtime classpath of
# org.apache.kafka:kafka_2.13 is copied from Maven Central with the pom in
# scripts/kafka/pom.xml (the only place the version is pinned) into a
# git-ignored cache directory; the storage is formatted with
# kafka.tools.StorageTool (what bin/kafka-storage.sh runs) and the node is
# launched as kafka.Kafka on JDK 17, found and installed as for Cassandra
# (scripts/lib/jvm.sh). It listens on loopback only.
#
# Cache layout (default <repo>/.kafka):
#   lib-<version>/   Kafka jars; lib-<version>/.complete marks a finished download
#   node/            server.properties and the data of the node (fresh on every start)
#   logs/            server.log (the node's output), maven.log, format.log
#   kafka.pid        pid of the running node; kafka.port its client port
#
# Environment:
#   KAFKA_PORT             client port (9092)
#   KAFKA_CONTROLLER_PORT  KRaft controller port (KAFKA_PORT + 1)
#   KAFKA_HEAP             heap size, -Xms = -Xmx (512M)
#   KAFKA_START_TIMEOUT    seconds to wait for the node before giving up (120)
#   KAFKA_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL (30)
#   KAFKA_HOME_CACHE       cache directory (<repo>/.kafka)
#   KAFKA_JAVA_HOME        JDK to run Kafka with (default: a JDK 17 found in /usr/lib/jvm)
#   KAFKA_JVM_OPTS         extra JVM options, appended last (word-split)
#   KAFKA_BROKERS          for run: the brokers to use instead of a local node
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/kafka/pom.xml"
VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n 1)"
[ -n "$VERSION" ] || { echo "kafka.sh: cannot read kafka.version from $POM" >&2; exit 1; }

CACHE="${KAFKA_HOME_CACHE:-$ROOT/.kafka}"
LIB="$CACHE/lib-$VERSION"
NODE="$CACHE/node"
LOGDIR="$CACHE/logs"
LOG="$LOGDIR/server.log"
PIDFILE="$CACHE/kafka.pid"
PORTFILE="$CACHE/kafka.port"

PORT="${KAFKA_PORT:-9092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
HEAP="${KAFKA_HEAP:-512M}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
MAIN_CLASS=kafka.Kafka

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=lib/install.sh
. "$ROOT/scripts/lib/install.sh"
# shellcheck source=lib/process.sh
. "$ROOT/scripts/lib/process.sh"
# shellcheck source=lib/jvm.sh
. "$ROOT/scripts/lib/jvm.sh"

# running_pid prints the pid of the node started by this script if it runs.
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && alive "$pid" || return 1
  runs_class "$pid" "$MAIN_CLASS" || return 1
  echo "$pid"
}

running_port() { cat "$PORTFILE" 2>/dev/null || echo "$PORT"; }

# cluster_id prints a new KRaft cluster id: 16 random bytes, URL-safe
# base64 without padding, as kafka-storage.sh random-uuid prints it. Like
# Kafka's Uuid.randomUuid, it never starts with "-": kafka-storage's
# argument parser takes such an id for an option and refuses to format
# (one run in 64).
cluster_id() {
  local id
  id=-
  while [ "${id#-}" != "$id" ]; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
  done
  echo "$id"
}

jvm_opts() {
  JVM_OPTS=(
    # The heap and GC settings of bin/kafka-server-start.sh and
    # bin/kafka-run-class.sh, with a smaller heap for tests.
    "-Xms$HEAP" "-Xmx$HEAP"
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15
    -Djava.awt.headless=true -XX:+ExitOnOutOfMemoryError
    "-XX:HeapDumpPath=$LOGDIR"
    "-Dlog4j2.configurationFile=file:$ROOT/scripts/kafka/log4j2.xml"
    "-Dkafka.logs.dir=$LOGDIR"
    "-Djava.io.tmpdir=$NODE/tmp"
  )
  if [ -n "${KAFKA_JVM_OPTS:-}" ]; then
    # shellcheck disable=SC2206 # word splitting is intended
    JVM_OPTS+=($KAFKA_JVM_OPTS)
  fi
}

# render_properties prints the node's server.properties.
render_properties() {
  sed -e "s#@PORT@#$PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" -e "s#@DATA_DIR@#$NODE/data#g" \
    "$ROOT/scripts/kafka/server.properties.in"
}

cmd_start() {
  local pid t0 deadline
  if pid="$(running_pid)"; then
    echo "Kafka is already running (pid $pid, port $(running_port))"
    return 0
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  for p in "$PORT" "$CONTROLLER_PORT"; do
    ! port_busy "$p" || die "port $p on 127.0.0.1 is already in use (set KAFKA_PORT / KAFKA_CONTROLLER_PORT)"
  done
  ensure_java17 "${KAFKA_JAVA_HOME:-}"
  fetch_classpath "Kafka $VERSION" "$POM" "$LIB" "kafka_2.13-$VERSION.jar" "$LOGDIR/maven.log"

  rm -rf "$NODE"
  mkdir -p "$NODE/data" "$NODE/tmp" "$LOGDIR"
  render_properties >"$NODE/server.properties"
  jvm_opts
  if ! "$JAVA_HOME17/bin/java" -Xmx256M "-Dlog4j2.configurationFile=file:$ROOT/scripts/kafka/log4j2.xml" \
      -cp "$LIB/*" kafka.tools.StorageTool \
      format --cluster-id "$(cluster_id)" --config "$NODE/server.properties" >"$LOGDIR/format.log" 2>&1; then
    tail -n 20 "$LOGDIR/format.log" >&2
    die "formatting the storage failed (full output in $LOGDIR/format.log)"
  fi
  [ -f "$LOG" ] && mv -f "$LOG" "$LOG.prev"
  : >"$LOG"

  log "starting Kafka $VERSION on 127.0.0.1:$PORT (controller on $CONTROLLER_PORT, JDK $JAVA_HOME17, heap $HEAP)"
  t0=$EPOCHREALTIME
  # setsid: the node gets its own session, so a Ctrl-C in the terminal does
  # not reach it; callers stop it with "stop".
  setsid "$JAVA_HOME17/bin/java" "${JVM_OPTS[@]}" -cp "$LIB/*" "$MAIN_CLASS" "$NODE/server.properties" \
    >>"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  echo "$PORT" >"$PORTFILE"

  deadline=$((SECONDS + START_TIMEOUT))
  until grep -qs 'Kafka Server started' "$LOG" && port_busy "$PORT"; do
    alive "$pid" || fail_start "Kafka exited during startup"
    [ "$SECONDS" -lt "$deadline" ] || fail_start "Kafka did not start within $START_TIMEOUT s"
    sleep 0.2
  done
  echo "Kafka $VERSION accepting clients on 127.0.0.1:$PORT after $(seconds_since "$t0") s (pid $pid, log $LOG)"
}

# fail_start prints the end of the log, stops the half-started node and exits.
fail_start() { fail_service_start "$1" 60; }

cmd_stop() { stop_service Kafka; }

cmd_status() {
  local pid port
  if ! pid="$(running_pid)"; then
    echo "Kafka is not running"
    return 3
  fi
  port="$(running_port)"
  if port_busy "$port"; then
    echo "Kafka running (pid $pid, port $port)"
  else
    echo "Kafka process running (pid $pid, port $port) but not accepting connections"
    return 1
  fi
}

cmd_run() {
  local rc=0
  [ "$#" -gt 0 ] || die "usage: $0 run COMMAND..."
  if [ -n "${KAFKA_BROKERS:-}" ]; then
    log "running against KAFKA_BROKERS=$KAFKA_BROKERS"
    "$@"
    return
  fi
  cmd_status >/dev/null 2>&1 || rc=$?
  case $rc in
    0) log "using the running local Kafka on port $(running_port)" ;;
    3)
      # Stopped on any exit; a signal becomes an exit so that the trap runs.
      trap 'cmd_stop >&2' EXIT
      trap 'exit 130' INT TERM
      cmd_start
      ;;
    *) cmd_status; exit 1 ;;
  esac
  KAFKA_BROKERS="127.0.0.1:$(running_port)" "$@"
}

# cmd_tools installs the JDK and Maven ahead of a first start.
cmd_tools() {
  ensure_java17 "${KAFKA_JAVA_HOME:-}"
  ensure_maven
  echo "JDK 17: $JAVA_HOME17; Maven: $(command -v mvn)"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  run) shift; cmd_run "$@" ;;
  tools) cmd_tools ;;
  *) echo "usage: $0 start|stop|status|run COMMAND...|tools" >&2; exit 2 ;;
esac
