#!/usr/bin/env bash
# Apache Cassandra for integration tests and benchmarks: a single node, or a
# local multi-node cluster (the "cluster" subcommands).
#
#   scripts/cassandra.sh start        fetch Cassandra (once), start a node, wait until CQL works
#   scripts/cassandra.sh stop         stop the node started by this script
#   scripts/cassandra.sh status       print whether the node runs and its version; exit 0 if it
#                                     answers CQL, 3 if it is not running, 1 if it runs but
#                                     does not answer
#   scripts/cassandra.sh cql STMT...  run one CQL statement, print rows tab-separated
#   scripts/cassandra.sh nodetool ARGS...  Cassandra's nodetool against the node, which must
#                                     have been started with CASSANDRA_JMX_PORT set
#   scripts/cassandra.sh tools        install what starting a node needs, when missing:
#                                     JDK 17 and Maven (apt-get, through sudo when not root)
#   scripts/cassandra.sh cluster start [N]     a cluster of N nodes (3), node i on 127.0.0.i,
#                                     started one after another; returns once every node
#                                     lists the others as peers and all agree on the schema
#   scripts/cassandra.sh cluster stop          stop every node of the cluster
#   scripts/cassandra.sh cluster kill NODE     SIGKILL node NODE (1..N)
#   scripts/cassandra.sh cluster restart NODE  stop NODE if it runs, start it on its data,
#                                     wait until it answers CQL
#   scripts/cassandra.sh cluster status        one line per node; exit 0 if all answer CQL,
#                                     1 if some do not, 3 if none does
#   scripts/cassandra.sh cluster run CMD...    CMD with CASSANDRA_CLUSTER_HOSTS set to the
#                                     nodes' addresses, starting a cluster for it (and
#                                     stopping it after CMD, also when CMD fails) unless one
#                                     runs already (then it is used and left running)
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
#   cluster/         cluster mode: size, nodeN.pid, nodeN/ (conf, data, commit log,
#                    logs/cassandra.log of node N; fresh on every cluster start)
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
#   CASSANDRA_JMX_PORT       start the node with JMX on this loopback port, for nodetool
#                            (unset: no JMX, nothing listens)
#   CASSANDRA_START_TIMEOUT  seconds to wait for CQL before giving up (180)
#   CASSANDRA_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (60)
#   CASSANDRA_HOME_CACHE     cache directory (<repo>/.cassandra)
#   CASSANDRA_JAVA_HOME      JDK to run Cassandra with (default: a JDK 17 found in /usr/lib/jvm)
#   CASSANDRA_JVM_OPTS       extra JVM options, appended last (word-split)
#   CASSANDRA_CLUSTER_NATIVE_PORT   cluster mode: CQL port of every node (9043)
#   CASSANDRA_CLUSTER_STORAGE_PORT  cluster mode: internode port of every node (7001)
#   CASSANDRA_CLUSTER_JMX_PORT      cluster mode: node i's local JMX port is this + i (7300)
#   CASSANDRA_CLUSTER_HEAP          cluster mode: heap of each node (768M)
#   CASSANDRA_CLUSTER_SIZE          cluster run: number of nodes (3)
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
JMXFILE="$CACHE/cassandra.jmxport"
CQL_BIN="$CACHE/bin/cql"

NATIVE_PORT="${CASSANDRA_NATIVE_PORT:-9042}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
HEAP="${CASSANDRA_HEAP:-1G}"
SKIP_SYNC="${CASSANDRA_SKIP_SYNC:-true}"
START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-180}"
STOP_TIMEOUT="${CASSANDRA_STOP_TIMEOUT:-60}"

log() { echo "cassandra.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=lib/install.sh
. "$ROOT/scripts/lib/install.sh"
# shellcheck source=lib/process.sh
. "$ROOT/scripts/lib/process.sh"
# shellcheck source=lib/jvm.sh
. "$ROOT/scripts/lib/jvm.sh"

# fetch_classpath_cassandra copies Cassandra's runtime jars into $LIB, once.
fetch_classpath_cassandra() {
  fetch_classpath "Cassandra $VERSION" "$POM" "$LIB" "cassandra-all-$VERSION.jar" "$LOGDIR/maven.log"
}

# ensure_node_tools checks the settings every node shares and installs what
# starting one needs: Java 17, the classpath, the CQL helper.
ensure_node_tools() {
  case "$SKIP_SYNC" in true | false) ;; *) die "CASSANDRA_SKIP_SYNC must be true or false" ;; esac
  ensure_java17 "${CASSANDRA_JAVA_HOME:-}"
  fetch_classpath_cassandra
  ensure_cql
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

# running_pid prints the pid of the node started by this script if it runs.
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && alive "$pid" || return 1
  # Guard against a recycled pid: it must still be our CassandraDaemon.
  runs_class "$pid" org.apache.cassandra.service.CassandraDaemon || return 1
  echo "$pid"
}

running_port() { cat "$PORTFILE" 2>/dev/null || echo "$NATIVE_PORT"; }

# release_version prints the node's release_version, retrying for up to $2 seconds.
release_version() {
  "$CQL_BIN" -hosts "127.0.0.1:$1" -timeout 5s -retry-for "${2}s" \
    "SELECT release_version FROM system.local" | sed -n 2p
}

jvm_opts() {
  local jamms=("$LIB"/jamm-*.jar) jamm
  jamm="${jamms[0]}"
  [ -f "$jamm" ] || die "no jamm jar in $LIB"
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
  if [ -n "${CASSANDRA_JMX_PORT:-}" ]; then
    # Local JMX only: it listens on loopback, for nodetool.
    JVM_OPTS+=("-Dcassandra.jmx.local.port=$CASSANDRA_JMX_PORT")
  fi
  if [ -n "${CASSANDRA_JVM_OPTS:-}" ]; then
    # shellcheck disable=SC2206 # word splitting is intended
    JVM_OPTS+=($CASSANDRA_JVM_OPTS)
  fi
}

# render_yaml ADDRESS SEEDS NATIVE_PORT STORAGE_PORT prints the cassandra.yaml
# of the node in $NODE.
render_yaml() {
  sed -e "s#@NODE_DIR@#$NODE#g" -e "s#@ADDRESS@#$1#g" -e "s#@SEEDS@#$2#g" \
    -e "s#@NATIVE_PORT@#$3#g" -e "s#@STORAGE_PORT@#$4#g" "$ROOT/scripts/cassandra/cassandra.yaml.in"
}

cmd_start() {
  local pid version t0 elapsed remaining
  if pid="$(running_pid)"; then
    echo "Cassandra is already running (pid $pid, native port $(running_port))"
    return 0
  fi
  rm -f "$PIDFILE" "$PORTFILE" "$JMXFILE"
  for p in "$NATIVE_PORT" "$STORAGE_PORT" ${CASSANDRA_JMX_PORT:+"$CASSANDRA_JMX_PORT"}; do
    ! port_busy "$p" || die "port $p on 127.0.0.1 is already in use (set CASSANDRA_NATIVE_PORT / CASSANDRA_STORAGE_PORT / CASSANDRA_JMX_PORT)"
  done
  ensure_node_tools

  if [ "${CASSANDRA_KEEP_DATA:-0}" != 1 ]; then
    rm -rf "$NODE"
  fi
  mkdir -p "$NODE/conf/triggers" "$NODE/tmp" "$LOGDIR"
  render_yaml 127.0.0.1 "127.0.0.1:$STORAGE_PORT" "$NATIVE_PORT" "$STORAGE_PORT" >"$NODE/conf/cassandra.yaml"
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
  if [ -n "${CASSANDRA_JMX_PORT:-}" ]; then
    echo "$CASSANDRA_JMX_PORT" >"$JMXFILE"
  fi

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
    rm -f "$PIDFILE" "$PORTFILE" "$JMXFILE"
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
  rm -f "$PIDFILE" "$PORTFILE" "$JMXFILE"
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

cmd_nodetool() {
  local pid
  [ "$#" -gt 0 ] || die "usage: $0 nodetool ARGS..."
  pid="$(running_pid)" || die "Cassandra is not running"
  [ -s "$JMXFILE" ] || die "the node (pid $pid) was started without JMX: start it with CASSANDRA_JMX_PORT set"
  ensure_java17 "${CASSANDRA_JAVA_HOME:-}"
  # The module access of Cassandra's conf/jvm17-clients.options.
  "$JAVA_HOME17/bin/java" -Xmx256m \
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
    --add-exports java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens java.base/java.lang=ALL-UNNAMED \
    --add-opens java.base/java.nio=ALL-UNNAMED \
    "-Dlogback.configurationFile=file://$ROOT/scripts/cassandra/logback-tools.xml" \
    -cp "$LIB/*" org.apache.cassandra.tools.NodeTool \
    -h 127.0.0.1 -p "$(cat "$JMXFILE")" "$@"
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

# ---------------------------------------------------------------------------
# Cluster mode: N nodes (default 3), node i on 127.0.0.i, all on the same
# native and storage ports (Linux routes all of 127/8 to loopback), one data
# center (datacenter1, SimpleSnitch), node 1 the seed, evenly spaced single
# tokens and auto_bootstrap off, so a fresh cluster forms without streaming.

CLUSTER="$CACHE/cluster"
CL_NATIVE_PORT="${CASSANDRA_CLUSTER_NATIVE_PORT:-9043}"
CL_STORAGE_PORT="${CASSANDRA_CLUSTER_STORAGE_PORT:-7001}"
CL_JMX_BASE="${CASSANDRA_CLUSTER_JMX_PORT:-7300}"
CL_HEAP="${CASSANDRA_CLUSTER_HEAP:-768M}"

cl_size() { cat "$CLUSTER/size" 2>/dev/null || echo 0; }
cl_addr() { echo "127.0.0.$1"; }
cl_hosts() {
  local i out=""
  for ((i = 1; i <= $1; i++)); do out+="${out:+,}$(cl_addr "$i"):$CL_NATIVE_PORT"; done
  echo "$out"
}
cl_log() { echo "$CLUSTER/node$1/logs/cassandra.log"; }

# cl_pid prints the pid of cluster node $1 if it runs.
cl_pid() {
  local pid f="$CLUSTER/node$1.pid"
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  [ -n "$pid" ] && alive "$pid" || return 1
  runs_class "$pid" org.apache.cassandra.service.CassandraDaemon || return 1
  echo "$pid"
}

cl_check_node_arg() {
  local n
  n="$(cl_size)"
  if ! [[ "${1:-}" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ] || [ "$1" -gt "$n" ]; then
    die "cluster: NODE must be a number from 1 to $n (the cluster's size), not '${1:-}'"
  fi
}

# cl_token prints node $1's token of $2 evenly spaced Murmur3 tokens, computed
# in halves so that no intermediate value leaves the signed 64-bit range.
cl_token() {
  local half=$((4611686018427387904 / $2))
  echo $(((($1 - 1) * half - 2305843009213693952) * 4))
}

# cl_launch starts node $1 of a cluster of $2 in the background, keeping its
# data when it has some.
cl_launch() {
  local i=$1 n=$2 addr pid
  addr="$(cl_addr "$i")"
  local NODE="$CLUSTER/node$i" LOGDIR="$CLUSTER/node$i/logs" HEAP="$CL_HEAP"
  local log="$LOGDIR/cassandra.log"
  mkdir -p "$NODE/conf/triggers" "$NODE/tmp" "$LOGDIR"
  {
    render_yaml "$addr" "$(cl_addr 1):$CL_STORAGE_PORT" "$CL_NATIVE_PORT" "$CL_STORAGE_PORT"
    echo "initial_token: $(cl_token "$i" "$n")"
    echo "auto_bootstrap: false"
  } >"$NODE/conf/cassandra.yaml"
  cp "$ROOT/scripts/cassandra/logback.xml" "$NODE/conf/logback.xml"
  [ -f "$log" ] && mv -f "$log" "$log.prev"
  : >"$log"
  jvm_opts
  # Nodes are killed and restarted: their system tables (the schema above
  # all) must survive SIGKILL, which cassandra.unsafesystem gives up.
  local kept=() o
  for o in "${JVM_OPTS[@]}"; do
    [ "$o" = -Dcassandra.unsafesystem=true ] || kept+=("$o")
  done
  JVM_OPTS=("${kept[@]}")
  JVM_OPTS+=(
    "-Dcassandra.jmx.local.port=$((CL_JMX_BASE + i))"
    # Fresh test cluster: nodes join with preassigned tokens and no data to
    # stream, so range movements need no serialising, and a stopping node
    # need not announce itself for the default 2 s.
    -Dcassandra.consistent.rangemovement=false
    -Dcassandra.shutdown_announce_in_ms=200
  )
  setsid "$JAVA_HOME17/bin/java" "${JVM_OPTS[@]}" -cp "$NODE/conf:$LIB/*" \
    org.apache.cassandra.service.CassandraDaemon >>"$log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$CLUSTER/node$i.pid"
}

# cl_wait_cql waits until node $1 accepts CQL, or fails naming why.
cl_wait_cql() {
  local i=$1 deadline=$2 pid log remaining
  log="$(cl_log "$i")"
  until grep -qs 'Starting listening for CQL clients' "$log"; do
    pid="$(cl_pid "$i")" || cl_fail "node $i ($(cl_addr "$i")) exited during startup" "$i"
    [ "$SECONDS" -lt "$deadline" ] || cl_fail "node $i did not open the CQL port within $START_TIMEOUT s" "$i"
    sleep 0.2
  done
  remaining=$((deadline - SECONDS))
  [ "$remaining" -gt 0 ] || remaining=1
  cl_cql "$i" -retry-for "${remaining}s" "SELECT release_version FROM system.local" >/dev/null \
    || cl_fail "CQL query against node $i ($(cl_addr "$i"):$CL_NATIVE_PORT) failed" "$i"
}

# cl_cql runs a statement on node $1 alone (no other node coordinates it).
cl_cql() {
  local i=$1
  shift
  "$CQL_BIN" -hosts "$(cl_addr "$i"):$CL_NATIVE_PORT" -only -timeout 5s "$@"
}

# cl_formed tells whether every one of the $1 nodes answers CQL, lists the
# other nodes in system.peers with their addresses and host ids, and has the
# same schema version as the others; $2 nonempty prints what is missing.
cl_formed() {
  local n=$1 i out rows versions="" v
  for ((i = 1; i <= n; i++)); do
    if ! out="$(cl_cql "$i" "SELECT peer, rpc_address, host_id, schema_version FROM system.peers" 2>&1)"; then
      [ -z "${2:-}" ] || log "node $i: $out"
      return 1
    fi
    rows="$(echo "$out" | sed 1d | grep -vc null || true)"
    if [ "$rows" -ne $((n - 1)) ]; then
      [ -z "${2:-}" ] || log "node $i lists $rows of $((n - 1)) peers complete"
      return 1
    fi
    v="$(cl_cql "$i" "SELECT schema_version FROM system.local" 2>/dev/null | sed -n 2p)" || return 1
    versions+="$v"$'\n'
    v="$(echo "$out" | sed 1d | cut -f 4)"
    versions+="$v"$'\n'
  done
  if [ "$(echo -n "$versions" | sort -u | wc -l)" -ne 1 ]; then
    [ -z "${2:-}" ] || log "schema versions disagree: $(echo -n "$versions" | sort -u | tr '\n' ' ')"
    return 1
  fi
}

cl_fail() {
  local node="${2:-}" i
  log "cluster: $1"
  for ((i = 1; i <= $(cl_size); i++)); do
    [ -z "$node" ] || [ "$i" = "$node" ] || continue
    log "last lines of $(cl_log "$i"):"
    tail -n 40 "$(cl_log "$i")" >&2 || true
  done
  cmd_cluster_stop >&2 || true
  exit 1
}

cmd_cluster_start() {
  local n="${1:-3}" i t0 elapsed deadline addr
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 9 ]; then
    die "cluster start: N must be from 1 to 9, not '$n'"
  fi
  for ((i = 1; i <= $(cl_size); i++)); do
    if cl_pid "$i" >/dev/null; then
      echo "a cluster of $(cl_size) nodes is already running ($(cl_hosts "$(cl_size)"))"
      return 0
    fi
  done
  for ((i = 1; i <= n; i++)); do
    addr="$(cl_addr "$i")"
    for p in "$CL_NATIVE_PORT" "$CL_STORAGE_PORT"; do
      ! (exec 3<>"/dev/tcp/$addr/$p") 2>/dev/null \
        || die "port $p on $addr is already in use (set CASSANDRA_CLUSTER_NATIVE_PORT / CASSANDRA_CLUSTER_STORAGE_PORT)"
    done
    ! port_busy $((CL_JMX_BASE + i)) || die "JMX port $((CL_JMX_BASE + i)) is already in use (set CASSANDRA_CLUSTER_JMX_PORT)"
  done
  ensure_node_tools
  if [ "${CASSANDRA_KEEP_DATA:-0}" != 1 ]; then
    rm -rf "$CLUSTER"
  fi
  mkdir -p "$CLUSTER"
  echo "$n" >"$CLUSTER/size"
  log "starting a cluster of $n Cassandra $VERSION nodes on $(cl_hosts "$n") (heap $CL_HEAP each, storage port $CL_STORAGE_PORT)"
  t0=$EPOCHREALTIME
  deadline=$((SECONDS + START_TIMEOUT))
  for ((i = 1; i <= n; i++)); do
    cl_launch "$i" "$n"
    cl_wait_cql "$i" "$deadline"
    log "node $i accepting CQL on $(cl_addr "$i"):$CL_NATIVE_PORT after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
  done
  until cl_formed "$n"; do
    [ "$SECONDS" -lt "$deadline" ] || { cl_formed "$n" report || true; cl_fail "the nodes did not see each other within $START_TIMEOUT s"; }
    sleep 0.5
  done
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  echo "Cassandra cluster of $n nodes formed after ${elapsed} s: $(cl_hosts "$n")"
}

# cl_stop_node stops node $1: SIGTERM, then SIGKILL after $STOP_TIMEOUT s.
cl_stop_node() {
  local pid waited=0
  pid="$(cl_pid "$1")" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" && [ "$waited" -lt $((STOP_TIMEOUT * 5)) ]; do
    sleep 0.2
    waited=$((waited + 1))
  done
  if alive "$pid"; then
    log "node $1 (pid $pid) still running after $STOP_TIMEOUT s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.2; done
  fi
}

cmd_cluster_stop() {
  local i n pids=()
  n="$(cl_size)"
  for ((i = 1; i <= n; i++)); do
    cl_stop_node "$i" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  echo "Cassandra cluster stopped"
}

cmd_cluster_kill() {
  local pid
  cl_check_node_arg "${1:-}"
  if ! pid="$(cl_pid "$1")"; then
    echo "node $1 is not running"
    return 0
  fi
  kill -KILL "$pid"
  while alive "$pid"; do sleep 0.05; done
  echo "node $1 killed (pid $pid)"
}

cmd_cluster_restart() {
  local t0 deadline
  cl_check_node_arg "${1:-}"
  ensure_java17 "${CASSANDRA_JAVA_HOME:-}"
  ensure_cql
  cl_stop_node "$1"
  t0=$EPOCHREALTIME
  deadline=$((SECONDS + START_TIMEOUT))
  # A failing restart must not stop the rest of the cluster.
  cl_fail() { log "cluster: $1"; tail -n 40 "$(cl_log "${2:-1}")" >&2 || true; cl_stop_node "${2:-1}"; exit 1; }
  # A node restarted right after a SIGKILL, on a loaded machine, now and
  # then exits while it starts (its log is kept as cassandra.log.failed);
  # one more start is what an operator would try, so the script does.
  if ! (cl_launch "$1" "$(cl_size)" && cl_wait_cql "$1" "$deadline"); then
    cp -f "$(cl_log "$1")" "$(cl_log "$1").failed" 2>/dev/null || true
    log "cluster: node $1 failed to start; starting it once more (log of the failed start: $(cl_log "$1").failed)"
    cl_stop_node "$1"
    deadline=$((SECONDS + START_TIMEOUT))
    cl_launch "$1" "$(cl_size)"
    cl_wait_cql "$1" "$deadline"
  fi
  echo "node $1 accepting CQL on $(cl_addr "$1"):$CL_NATIVE_PORT after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
}

cmd_cluster_status() {
  local n i pid rc=0 up=0
  n="$(cl_size)"
  if [ "$n" -eq 0 ]; then
    echo "no cluster has been started"
    return 3
  fi
  ensure_cql
  for ((i = 1; i <= n; i++)); do
    if ! pid="$(cl_pid "$i")"; then
      echo "node $i $(cl_addr "$i"):$CL_NATIVE_PORT  not running"
      rc=1
    elif cl_cql "$i" "SELECT release_version FROM system.local" >/dev/null 2>&1; then
      echo "node $i $(cl_addr "$i"):$CL_NATIVE_PORT  up (pid $pid)"
      up=$((up + 1))
    else
      echo "node $i $(cl_addr "$i"):$CL_NATIVE_PORT  running (pid $pid) but not answering CQL"
      rc=1
    fi
  done
  [ "$up" -gt 0 ] || rc=3
  return $rc
}

cmd_cluster_run() {
  local i
  [ "$#" -gt 0 ] || die "usage: $0 cluster run COMMAND..."
  for ((i = 1; i <= $(cl_size); i++)); do
    if cl_pid "$i" >/dev/null; then
      log "using the running cluster of $(cl_size) nodes ($(cl_hosts "$(cl_size)")); it is left running"
      CASSANDRA_CLUSTER_HOSTS="$(cl_hosts "$(cl_size)")" "$@"
      return
    fi
  done
  # Stopped on any exit; a signal becomes an exit so that the trap runs.
  trap 'cmd_cluster_stop >&2' EXIT
  trap 'exit 130' INT TERM
  cmd_cluster_start "${CASSANDRA_CLUSTER_SIZE:-3}"
  CASSANDRA_CLUSTER_HOSTS="$(cl_hosts "$(cl_size)")" "$@"
}

cmd_cluster() {
  case "${1:-}" in
    start) shift; cmd_cluster_start "$@" ;;
    stop) cmd_cluster_stop ;;
    kill) shift; cmd_cluster_kill "$@" ;;
    restart) shift; cmd_cluster_restart "$@" ;;
    status) cmd_cluster_status ;;
    run) shift; cmd_cluster_run "$@" ;;
    *) echo "usage: $0 cluster start [N]|stop|kill NODE|restart NODE|status|run COMMAND..." >&2; exit 2 ;;
  esac
}

# cmd_tools installs the JDK and Maven ahead of a first start (scripts/
# install-test-tools.sh), so that a machine is set up once, as a person
# with sudo, rather than in the middle of a test run.
cmd_tools() {
  ensure_java17 "${CASSANDRA_JAVA_HOME:-}"
  ensure_maven
  echo "JDK 17: $JAVA_HOME17; Maven: $(command -v mvn)"
}

case "${1:-}" in
  start) cmd_start ;;
  tools) cmd_tools ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  cql) shift; cmd_cql "$@" ;;
  nodetool) shift; cmd_nodetool "$@" ;;
  run) shift; cmd_run "$@" ;;
  cluster) shift; cmd_cluster "$@" ;;
  *) echo "usage: $0 start|stop|status|cql STATEMENT...|nodetool ARGS...|run COMMAND...|tools|cluster ..." >&2; exit 2 ;;
esac
