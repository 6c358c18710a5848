#!/usr/bin/env bash
# Single-node Apache Cassandra for integration tests and benchmarks.
#
#   scripts/cassandra.sh start        fetch Cassandra (once), start a node, wait until CQL works
#   scripts/cassandra.sh stop         stop the node started by this script
#   scripts/cassandra.sh status       print whether the node runs and its version; exit 0 if it
#                                     answers CQL, 3 if it is not running, 1 if it runs but
#                                     does not answer
#   scripts/cassandra.sh cql STMT...  run one CQL statement, print rows tab-separated
#   scripts/cassandra.sh run CMD...   run CMD with CASSANDRA_HOSTS set: to CASSANDRA_HOSTS
#                                     if that is set already (nothing is started), else to
#                                     the running local node (left running), else to a
#                                     node started for CMD and stopped after it, also
#                                     when CMD fails; exits with CMD's status
#
# Cassandra is not installed system-wide: the runtime classpath of
# org.apache.cassandra:cassandra-all is copied from Maven Central with the pom in
# scripts/cassandra/pom.xml (the only place the version is pinned) into a
# git-ignored cache directory, and CassandraDaemon is launched on JDK 17
# (Cassandra 5.0 runs on Java 11 and 17 only). JDK 17 and Maven are installed
# with apt-get when missing (Maven only when the classpath is not cached yet).
#
# Cache layout (default <repo>/.cassandra):
#   lib-<version>/   Cassandra jars; lib-<version>/.complete marks a finished download
#   bin/cql          the CQL helper built from scripts/cassandra/cql
#   node/            conf, data, commit log, ... of the node (fresh on every start)
#   logs/            cassandra.log (the node's output), maven.log, heap dumps
#   cassandra.pid    pid of the running node; cassandra.port its native port
#
# Environment:
#   CASSANDRA_NATIVE_PORT    CQL port (9042)
#   CASSANDRA_STORAGE_PORT   internode port (7000)
#   CASSANDRA_HEAP           heap size, -Xms = -Xmx (1G)
#   CASSANDRA_SKIP_SYNC      true skips fsync (fast tests, the default); set false
#                            for durability-sensitive benchmarks. Passed as
#                            -Dcassandra.skip_sync; Cassandra also reads this same
#                            variable from its environment, hence only true/false.
#   CASSANDRA_KEEP_DATA      1 keeps the data of the previous run instead of starting empty
#   CASSANDRA_START_TIMEOUT  seconds to wait for CQL before giving up (180)
#   CASSANDRA_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (60)
#   CASSANDRA_HOME_CACHE     cache directory (<repo>/.cassandra)
#   CASSANDRA_JAVA_HOME      JDK to run Cassandra with (default: a JDK 17 found in /usr/lib/jvm)
#   CASSANDRA_JVM_OPTS       extra JVM options, appended last (word-split)
#   CASSANDRA_HOSTS          for cql: where to connect (default 127.0.0.1:<port of
#                            the running node>); for run: the cluster to use instead
#                            of a local node
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/cassandra/pom.xml"
VERSION="$(sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' "$POM" | head -n 1)"
[ -n "$VERSION" ] || { echo "cassandra.sh: cannot read cassandra.version from $POM" >&2; exit 1; }

CACHE="${CASSANDRA_HOME_CACHE:-$ROOT/.cassandra}"
LIB="$CACHE/lib-$VERSION"
NODE="$CACHE/node"
LOGDIR="$CACHE/logs"
LOG="$LOGDIR/cassandra.log"
PIDFILE="$CACHE/cassandra.pid"
PORTFILE="$CACHE/cassandra.port"
CQL_BIN="$CACHE/bin/cql"

NATIVE_PORT="${CASSANDRA_NATIVE_PORT:-9042}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
HEAP="${CASSANDRA_HEAP:-1G}"
SKIP_SYNC="${CASSANDRA_SKIP_SYNC:-true}"
START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-180}"
STOP_TIMEOUT="${CASSANDRA_STOP_TIMEOUT:-60}"

log() { echo "cassandra.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# as_root runs a command as root, through sudo when not root already.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* by hand"
  log "installing $* with apt-get"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# java_major prints the major version of the java binary $1.
java_major() {
  "$1" -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n 1
}

# find_java17 prints JAVA_HOME of a JDK 17, or fails. It never picks "the
# newest JDK": Cassandra 5.0 refuses to start on Java 18 and later.
find_java17() {
  local arch home
  if [ -n "${CASSANDRA_JAVA_HOME:-}" ]; then
    [ -x "$CASSANDRA_JAVA_HOME/bin/java" ] || die "CASSANDRA_JAVA_HOME=$CASSANDRA_JAVA_HOME has no bin/java"
    echo "$CASSANDRA_JAVA_HOME"
    return 0
  fi
  arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
  for home in "/usr/lib/jvm/java-17-openjdk-$arch" /usr/lib/jvm/*; do
    if [ -x "$home/bin/java" ] && [ "$(java_major "$home/bin/java")" = 17 ]; then
      echo "$home"
      return 0
    fi
  done
  return 1
}

ensure_java17() {
  if ! JAVA_HOME17="$(find_java17)"; then
    apt_install openjdk-17-jdk-headless
    JAVA_HOME17="$(find_java17)" || die "no JDK 17 found after installing openjdk-17-jdk-headless"
  fi
}

# fetch_classpath copies Cassandra's runtime jars into $LIB, once.
fetch_classpath() {
  [ -f "$LIB/.complete" ] && return 0
  command -v mvn >/dev/null 2>&1 || apt_install maven
  mkdir -p "$LOGDIR"
  local tmp="$LIB.partial" t0=$SECONDS
  rm -rf "$tmp"
  log "fetching the Cassandra $VERSION classpath from Maven Central into $LIB"
  if ! JAVA_HOME="$JAVA_HOME17" mvn -B -ntp -f "$POM" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
      >"$LOGDIR/maven.log" 2>&1; then
    tail -n 40 "$LOGDIR/maven.log" >&2
    die "maven failed (full output in $LOGDIR/maven.log)"
  fi
  ls "$tmp"/cassandra-all-"$VERSION".jar >/dev/null 2>&1 || die "maven did not produce cassandra-all-$VERSION.jar"
  rm -rf "$LIB"
  mv "$tmp" "$LIB"
  touch "$LIB/.complete"
  log "fetched $(ls "$LIB"/*.jar | wc -l) jars in $((SECONDS - t0)) s"
}

# ensure_cql builds the CQL helper, again only when its sources changed.
ensure_cql() {
  local src="$ROOT/scripts/cassandra/cql/main.go"
  if [ -x "$CQL_BIN" ] && [ ! "$src" -nt "$CQL_BIN" ] && [ ! "$ROOT/go.sum" -nt "$CQL_BIN" ] \
      && [ ! "$ROOT/go.mod" -nt "$CQL_BIN" ]; then
    return 0
  fi
  command -v go >/dev/null 2>&1 || die "go not found (needed to build $CQL_BIN)"
  mkdir -p "$(dirname "$CQL_BIN")"
  (cd "$ROOT" && go build -o "$CQL_BIN" ./scripts/cassandra/cql) || die "building the cql helper failed"
}

# alive tells whether process $1 exists and is not a zombie (a node that died
# while this script is still its parent stays a zombie until the script exits).
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d ' ' -f 1)" != Z ]
}

# running_pid prints the pid of the node started by this script if it runs.
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && alive "$pid" || return 1
  # Guard against a recycled pid: it must still be our CassandraDaemon.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'org.apache.cassandra.service.CassandraDaemon' || return 1
  echo "$pid"
}

running_port() { cat "$PORTFILE" 2>/dev/null || echo "$NATIVE_PORT"; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# release_version prints the node's release_version, retrying for up to $2 seconds.
release_version() {
  "$CQL_BIN" -hosts "127.0.0.1:$1" -timeout 5s -retry-for "${2}s" \
    "SELECT release_version FROM system.local" | sed -n 2p
}

jvm_opts() {
  local jamm
  jamm="$(ls "$LIB"/jamm-*.jar | head -n 1)"
  JVM_OPTS=(
    # Heap and G1 settings of Cassandra's conf/jvm17-server.options.
    "-Xms$HEAP" "-Xmx$HEAP"
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
    -XX:G1HeapRegionSize=16m -XX:G1RSetUpdatingPauseTimePercent=5
    -XX:MaxGCPauseMillis=300 -XX:InitiatingHeapOccupancyPercent=70
    # conf/jvm-server.options.
    -ea -da:net.openhft...
    -XX:+UseThreadPriorities -XX:+HeapDumpOnOutOfMemoryError "-XX:HeapDumpPath=$LOGDIR"
    -Xss256k -XX:+AlwaysPreTouch -XX:+UseTLAB -XX:+ResizeTLAB -XX:+UseNUMA
    -XX:+PerfDisableSharedMem -Djava.net.preferIPv4Stack=true
    # In place of cassandra-env.sh's -XX:OnOutOfMemoryError="kill -9 %p".
    -XX:+ExitOnOutOfMemoryError
    # Module access of conf/jvm17-server.options, including the flags
    # bin/cassandra.in.sh adds when running on a JDK.
    -Djdk.attach.allowAttachSelf=true
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED
    # Netty settings of conf/jvm17-server.options.
    -Dio.netty.tryReflectionSetAccessible=true
    -Dio.netty.allocator.useCacheForAllThreads=true
    -Dio.netty.allocator.maxOrder=11
    # What bin/cassandra and cassandra-env.sh pass.
    "-javaagent:$jamm"
    -Dcassandra-foreground=yes
    "-Dcassandra.config=file://$NODE/conf/cassandra.yaml"
    "-Dlogback.configurationFile=file://$NODE/conf/logback.xml"
    "-Dcassandra.logdir=$LOGDIR"
    "-Dcassandra.storagedir=$NODE"
    "-Dcassandra.triggers_dir=$NODE/conf/triggers"
    "-Djava.io.tmpdir=$NODE/tmp"
    # Single-node test settings: no gossip settling, short ring delay, no
    # flushes of system tables on schema changes, fsync per CASSANDRA_SKIP_SYNC.
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    -Dcassandra.ring_delay_ms=1000
    -Dcassandra.unsafesystem=true
    "-Dcassandra.skip_sync=$SKIP_SYNC"
    -Djava.security.egd=file:/dev/urandom
  )
  if [ -n "${CASSANDRA_JVM_OPTS:-}" ]; then
    # shellcheck disable=SC2206 # word splitting is intended
    JVM_OPTS+=($CASSANDRA_JVM_OPTS)
  fi
}

cmd_start() {
  local pid version t0 elapsed remaining
  if pid="$(running_pid)"; then
    echo "Cassandra is already running (pid $pid, native port $(running_port))"
    return 0
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  for p in "$NATIVE_PORT" "$STORAGE_PORT"; do
    ! port_busy "$p" || die "port $p on 127.0.0.1 is already in use (set CASSANDRA_NATIVE_PORT / CASSANDRA_STORAGE_PORT)"
  done
  case "$SKIP_SYNC" in true | false) ;; *) die "CASSANDRA_SKIP_SYNC must be true or false" ;; esac

  ensure_java17
  fetch_classpath
  ensure_cql

  if [ "${CASSANDRA_KEEP_DATA:-0}" != 1 ]; then
    rm -rf "$NODE"
  fi
  mkdir -p "$NODE/conf/triggers" "$NODE/tmp" "$LOGDIR"
  sed -e "s#@NODE_DIR@#$NODE#g" -e "s#@NATIVE_PORT@#$NATIVE_PORT#g" -e "s#@STORAGE_PORT@#$STORAGE_PORT#g" \
    "$ROOT/scripts/cassandra/cassandra.yaml.in" >"$NODE/conf/cassandra.yaml"
  cp "$ROOT/scripts/cassandra/logback.xml" "$NODE/conf/logback.xml"
  [ -f "$LOG" ] && mv -f "$LOG" "$LOG.prev"
  : >"$LOG" # exists before the background JVM opens it, for the wait below

  jvm_opts
  log "starting Cassandra $VERSION on 127.0.0.1:$NATIVE_PORT (JDK $JAVA_HOME17, heap $HEAP, skip_sync=$SKIP_SYNC)"
  t0=$EPOCHREALTIME
  # setsid: the node gets its own session, so a Ctrl-C in the terminal does not
  # reach it; callers stop it with "stop".
  setsid "$JAVA_HOME17/bin/java" "${JVM_OPTS[@]}" -cp "$NODE/conf:$LIB/*" \
    org.apache.cassandra.service.CassandraDaemon >>"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  echo "$NATIVE_PORT" >"$PORTFILE"

  local deadline=$((SECONDS + START_TIMEOUT))
  until grep -qs 'Starting listening for CQL clients' "$LOG"; do
    alive "$pid" || fail_start "Cassandra exited during startup"
    [ "$SECONDS" -lt "$deadline" ] || fail_start "Cassandra did not open the CQL port within $START_TIMEOUT s"
    sleep 0.2
  done
  remaining=$((deadline - SECONDS))
  [ "$remaining" -gt 0 ] || remaining=1
  version="$(release_version "$NATIVE_PORT" "$remaining")" || fail_start "CQL query against 127.0.0.1:$NATIVE_PORT failed"
  [ -n "$version" ] || fail_start "empty release_version from 127.0.0.1:$NATIVE_PORT"
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  echo "Cassandra $version accepting CQL on 127.0.0.1:$NATIVE_PORT after ${elapsed} s (pid $pid, log $LOG)"
}

# fail_start prints the end of the log, stops the half-started node and exits.
fail_start() {
  log "$1; last lines of $LOG:"
  tail -n 60 "$LOG" >&2 || true
  cmd_stop >&2 || true
  exit 1
}

cmd_stop() {
  local pid waited=0
  if ! pid="$(running_pid)"; then
    rm -f "$PIDFILE" "$PORTFILE"
    echo "Cassandra is not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" && [ "$waited" -lt "$STOP_TIMEOUT" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if alive "$pid"; then
    log "Cassandra (pid $pid) still running after $STOP_TIMEOUT s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.2; done
  fi
  rm -f "$PIDFILE" "$PORTFILE"
  echo "Cassandra stopped (pid $pid)"
}

cmd_status() {
  local pid port version
  if ! pid="$(running_pid)"; then
    echo "Cassandra is not running"
    return 3
  fi
  port="$(running_port)"
  ensure_cql
  if version="$(release_version "$port" 0)" && [ -n "$version" ]; then
    echo "Cassandra $version running (pid $pid, native port $port)"
  else
    echo "Cassandra process running (pid $pid, native port $port) but not answering CQL"
    return 1
  fi
}

cmd_cql() {
  [ "$#" -gt 0 ] || die "usage: $0 cql STATEMENT..."
  ensure_cql
  "$CQL_BIN" -hosts "${CASSANDRA_HOSTS:-127.0.0.1:$(running_port)}" "$@"
}

cmd_run() {
  local rc=0
  [ "$#" -gt 0 ] || die "usage: $0 run COMMAND..."
  if [ -n "${CASSANDRA_HOSTS:-}" ]; then
    log "running against CASSANDRA_HOSTS=$CASSANDRA_HOSTS"
    "$@"
    return
  fi
  cmd_status >/dev/null 2>&1 || rc=$?
  case $rc in
    0) log "using the running local Cassandra on port $(running_port)" ;;
    3)
      # Stopped on any exit; a signal becomes an exit so that the trap runs.
      trap 'cmd_stop >&2' EXIT
      trap 'exit 130' INT TERM
      cmd_start
      ;;
    *) cmd_status; exit 1 ;;
  esac
  CASSANDRA_HOSTS="127.0.0.1:$(running_port)" "$@"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  cql) shift; cmd_cql "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) echo "usage: $0 start|stop|status|cql STATEMENT...|run COMMAND..." >&2; exit 2 ;;
esac
