# shellcheck shell=bash
# Running a JVM test service (Cassandra, Kafka) from the project's scripts:
# a JDK 17 found or installed, a Maven classpath fetched once into a cache,
# and the Java-specific check on the process. Source it after
# scripts/lib/install.sh and scripts/lib/process.sh, with log and die
# defined.

# java_major prints the major version of the java binary $1.
java_major() {
  "$1" -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n 1
}

# find_java17 [HOME] prints JAVA_HOME of a JDK 17, or fails: HOME when
# given (a setting such as CASSANDRA_JAVA_HOME; it must hold bin/java), else
# the first JDK 17 under /usr/lib/jvm. It never picks "the newest JDK":
# Cassandra 5.0 refuses to start on Java 18 and later.
find_java17() {
  local arch home
  if [ -n "${1:-}" ]; then
    [ -x "$1/bin/java" ] || die "$1 has no bin/java"
    echo "$1"
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

# ensure_java17 [HOME] sets JAVA_HOME17 to find_java17's answer, installing
# Debian's JDK 17 first when there is none.
ensure_java17() {
  if ! JAVA_HOME17="$(find_java17 "${1:-}")"; then
    apt_install openjdk-17-jdk-headless
    JAVA_HOME17="$(find_java17 "${1:-}")" || die "no JDK 17 found after installing openjdk-17-jdk-headless"
  fi
}

# ensure_maven installs Debian's Maven when there is none.
ensure_maven() {
  command -v mvn >/dev/null 2>&1 || apt_install maven
}

# fetch_classpath NAME POM LIB JAR LOGFILE copies the runtime classpath of
# the pom POM into the directory LIB, once (LIB/.complete marks a finished
# download); JAR is a jar that must be among them. Needs JAVA_HOME17.
fetch_classpath() {
  local name=$1 pom=$2 lib=$3 jar=$4 mvnlog=$5
  [ -f "$lib/.complete" ] && return 0
  ensure_maven
  mkdir -p "$(dirname "$mvnlog")"
  local tmp="$lib.partial" t0=$SECONDS
  rm -rf "$tmp"
  log "fetching the $name classpath from Maven Central into $lib"
  if ! JAVA_HOME="$JAVA_HOME17" mvn -B -ntp -f "$pom" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
      >"$mvnlog" 2>&1; then
    tail -n 40 "$mvnlog" >&2
    die "maven failed (full output in $mvnlog)"
  fi
  [ -f "$tmp/$jar" ] || die "maven did not produce $jar"
  rm -rf "$lib"
  mv "$tmp" "$lib"
  touch "$lib/.complete"
  local jars=("$lib"/*.jar)
  log "fetched ${#jars[@]} jars in $((SECONDS - t0)) s"
}

# runs_class tells whether process $1 runs the Java main class $2: a pid
# file may name a pid that has been reused since.
runs_class() { cmdline_has "$1" "$2"; }
