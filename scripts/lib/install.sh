# shellcheck shell=bash
# Installing Debian packages from the project's scripts, as root or as a
# user with sudo. Source it after defining log and die.

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

# apt_install installs Debian packages (options such as
# --no-install-recommends may come first). The environment goes through env,
# so that the same line works with and without sudo in front of it; apt
# waits for the package lock rather than failing when another install
# (a second test target, the system's own updates) holds it.
apt_install() {
  local pkgs=() arg
  for arg in "$@"; do
    [[ $arg == -* ]] || pkgs+=("$arg")
  done
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${pkgs[*]} by hand"
  log "installing ${pkgs[*]} with apt-get"
  local wait=(-o DPkg::Lock::Timeout=600)
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq "$@" >/dev/null
}

# stop_system_service stops and disables the system service NAME that a
# Debian package may have started when it was installed (systemd, or the
# package's init script elsewhere): the scripts run servers of their own,
# on their own ports and data, and a service left running would take the
# package's default port and disk. Failures are ignored: where the
# package's postinst was not allowed to start it (policy-rc.d in a
# container) there is nothing to stop.
stop_system_service() {
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    as_root systemctl disable --now "$1" >/dev/null 2>&1 || true
  elif [ -x "/etc/init.d/$1" ]; then
    as_root "/etc/init.d/$1" stop >/dev/null 2>&1 || true
    as_root update-rc.d "$1" disable >/dev/null 2>&1 || true
  fi
}
