#!/usr/bin/env bash
# Checks that scripts/install-test-tools.sh sets up a machine that has none
# of the tools the tests use (make install-check; not part of make test):
# builds a minimal Debian bookworm root with debootstrap in a scratch
# directory outside the repository, puts a fresh clone of the repository's
# HEAD in it, and runs the script there twice, each time on a copy of that
# root: once as root, once as a user with passwordless sudo. Before a run
# it checks that the root lacks every tool; after, that each one is there.
#
# Needs root or sudo (debootstrap, chroot, mounts), Debian's packages, the
# npm registry and PyPI. The minimal root is built once and kept in
# $INSTALL_CHECK_DIR/base for later runs (rm -rf it to build it again).
#
# Environment:
#   INSTALL_CHECK_DIR    scratch directory (/tmp/tsgate-install-check)
#   INSTALL_CHECK_MODES  which runs: "root user" (both, the default), "root" or "user"
#   INSTALL_CHECK_KEEP   1 keeps each run's root for a look afterwards
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${INSTALL_CHECK_DIR:-/tmp/tsgate-install-check}"
MODES="${INSTALL_CHECK_MODES:-root user}"
BASE="$DIR/base"

log() { echo "install-check.sh: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=lib/install.sh
. "$ROOT/scripts/lib/install.sh"

case "$DIR" in
  "$ROOT" | "$ROOT"/*) die "INSTALL_CHECK_DIR must be outside the repository, not $DIR" ;;
esac

# The tools install-test-tools.sh is for; each check is run in the root.
TOOLS=(
  "node:command -v node"
  "npm:command -v npm"
  "chromium:test -x /usr/bin/chromium"
  "python3-venv:python3 -m venv /tmp/venv-check && rm -rf /tmp/venv-check"
  "curl:command -v curl"
  "shellcheck:command -v shellcheck"
  "JDK 17:for j in /usr/lib/jvm/*/bin/java; do [ -x \$j ] && \$j -version 2>&1 | grep -q 'version \"17' && exit 0; done; exit 1"
  "maven:command -v mvn"
  "prometheus:command -v prometheus && command -v promtool"
)

# build_base makes the minimal root once: debootstrap's minbase with sudo
# (for the user's run) and the CA certificates.
build_base() {
  [ -f "$BASE/.complete" ] && return 0
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  as_root rm -rf "$BASE"
  mkdir -p "$DIR"
  log "building a minimal Debian bookworm root in $BASE (debootstrap, a few minutes)"
  as_root debootstrap --variant=minbase --include=sudo,ca-certificates bookworm "$BASE" >"$DIR/debootstrap.log" 2>&1 \
    || { tail -n 20 "$DIR/debootstrap.log" >&2; die "debootstrap failed (log in $DIR/debootstrap.log)"; }
  as_root touch "$BASE/.complete"
}

# prepare copies the base root to $1 and sets it up like a machine on this
# network: name resolution, the host's own certificate authorities (a
# network that inspects TLS has them), no services started by packages, a
# user tsgate with passwordless sudo, and a fresh clone of the repository.
prepare() {
  local r="$1"
  as_root rm -rf "$r"
  as_root cp -a "$BASE" "$r"
  as_root rm -f "$r/.complete"
  as_root cp /etc/resolv.conf "$r/etc/resolv.conf"
  # sudo looks the host's name up.
  printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" | as_root tee "$r/etc/hosts" >/dev/null
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    as_root cp /usr/local/share/ca-certificates/*.crt "$r/usr/local/share/ca-certificates/"
    as_root chroot "$r" update-ca-certificates >/dev/null 2>&1
  fi
  printf '#!/bin/sh\nexit 101\n' | as_root tee "$r/usr/sbin/policy-rc.d" >/dev/null
  as_root chmod 755 "$r/usr/sbin/policy-rc.d"
  as_root chroot "$r" useradd --create-home --shell /bin/bash tsgate
  echo 'tsgate ALL=(ALL) NOPASSWD: ALL' | as_root tee "$r/etc/sudoers.d/tsgate" >/dev/null
  as_root chmod 440 "$r/etc/sudoers.d/tsgate"
  local clone
  clone="$(mktemp -d)"
  git clone --quiet --no-hardlinks "$ROOT" "$clone/tsgate"
  git -C "$clone/tsgate" checkout --quiet "$(git -C "$ROOT" rev-parse HEAD)"
  as_root cp -a "$clone/tsgate" "$r/home/tsgate/tsgate"
  rm -rf "$clone"
  as_root chroot "$r" chown -R tsgate:tsgate /home/tsgate/tsgate
}

MOUNTED=()
mount_into() {
  local r="$1"
  as_root mount -t proc proc "$r/proc"
  MOUNTED+=("$r/proc")
  as_root mount --bind /dev "$r/dev"
  MOUNTED+=("$r/dev")
  as_root mount --bind /dev/pts "$r/dev/pts"
  MOUNTED+=("$r/dev/pts")
}

unmount_all() {
  local i
  for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
    as_root umount "${MOUNTED[$i]}" || as_root umount -l "${MOUNTED[$i]}" || true
  done
  MOUNTED=()
}
trap unmount_all EXIT

# in_root runs a bash command in root $1 as user $2 (root or tsgate), with
# a clean environment but for the locale and the terminal.
in_root() {
  local r="$1" user="$2"
  shift 2
  as_root chroot "$r" /usr/sbin/runuser -u "$user" -- env -i HOME="$([ "$user" = root ] && echo /root || echo /home/tsgate)" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb bash -c "$*"
}

# check_tools reports each tool as present or missing in root $1; it fails
# unless every one is $2 (present or missing).
check_tools() {
  local r="$1" want="$2" entry name test got bad=0
  for entry in "${TOOLS[@]}"; do
    name="${entry%%:*}"
    test="${entry#*:}"
    if in_root "$r" root "$test" >/dev/null 2>&1; then got=present; else got=missing; fi
    printf '  %-13s %s\n' "$name" "$got" >&2
    [ "$got" = "$want" ] || bad=1
  done
  return "$bad"
}

run_mode() {
  local mode="$1" r="$DIR/$1" user start
  case "$mode" in root) user=root ;; user) user=tsgate ;; *) die "unknown mode $mode (root or user)" ;; esac
  log "[$mode] preparing $r"
  prepare "$r"
  mount_into "$r"
  log "[$mode] before: every tool must be missing"
  check_tools "$r" missing || die "[$mode] the fresh root already has some of the tools"
  log "[$mode] running scripts/install-test-tools.sh as $user"
  start=$SECONDS
  if ! in_root "$r" "$user" "cd /home/tsgate/tsgate && scripts/install-test-tools.sh" >"$DIR/$mode.log" 2>&1; then
    tail -n 40 "$DIR/$mode.log" >&2
    die "[$mode] scripts/install-test-tools.sh failed (log in $DIR/$mode.log)"
  fi
  log "[$mode] done in $((SECONDS - start)) s (log in $DIR/$mode.log); after: every tool must be present"
  check_tools "$r" present || die "[$mode] some tools are still missing after scripts/install-test-tools.sh"
  in_root "$r" "$user" "cd /home/tsgate/tsgate && test -d api/lint/node_modules && test -d api/clients/typescript/node_modules && test -x api/clients/python/.venv/bin/openapi-python-client" \
    || die "[$mode] the npm projects or the Python client generator are not installed"
  log "[$mode] a second run installs nothing and succeeds"
  in_root "$r" "$user" "cd /home/tsgate/tsgate && scripts/install-test-tools.sh" >>"$DIR/$mode.log" 2>&1 \
    || die "[$mode] the second run failed (log in $DIR/$mode.log)"
  unmount_all
  if [ "${INSTALL_CHECK_KEEP:-0}" != 1 ]; then
    as_root rm -rf "$r"
  fi
  log "[$mode] ok"
}

build_base
for mode in $MODES; do
  run_mode "$mode"
done
log "every tool installs on a bare Debian bookworm ($MODES)"
