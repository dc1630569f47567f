# Sourced by scripts/bootstrap and scripts/release-local (each defines `say`): Debian
# packages and Debian roots, made the same way for both.

elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

# apt's machine-readable status (fd 3) as one line per 10 % of each phase.
apt_progress() {
  local last=-10 phase="" kind percent what
  while IFS=: read -r kind _ percent what; do
    case $kind in dlstatus) kind=downloading ;; pmstatus) kind=installing ;; *) continue ;; esac
    [ "$kind" = "$phase" ] || { phase=$kind; last=-10; }
    percent=${percent%%.*}
    if [ "$percent" -ge $((last + 10)) ]; then
      last=$percent
      say "  apt $kind: $percent% $what"
    fi
  done
}

# apt_install <what> <check> <why> <package…>: installs Debian packages once <check> (a
# function) prints nothing, then asks <check> again.
apt_install() {
  local what=$1 check=$2 why=$3; shift 3
  [ -n "$($check)" ] && return
  local started log=build/bootstrap/apt.log
  started=$(date +%s)
  mkdir -p build/bootstrap
  local command="apt-get install -y --no-install-recommends $*"
  say "installing $what (apt-get): $why"
  if ! command -v apt-get >/dev/null; then
    say "this machine has no apt-get: install $what yourself and run scripts/bootstrap again" >&2
    exit 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      say "installing $what needs root, and sudo is not available without a password here. Run this, then scripts/bootstrap (or make test) again:" >&2
      say "    sudo apt-get update && sudo $command" >&2
      exit 1
    fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >"$log" 2>&1 \
    || { say "apt-get update failed (the end of $log):" >&2; tail -5 "$log" >&2; exit 1; }
  local status=0
  # shellcheck disable=SC2086  # $command is split into its words on purpose
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive $command -q -o APT::Status-Fd=3 \
    </dev/null 3>&1 >>"$log" 2>&1 | apt_progress || status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ] || [ -z "$($check)" ]; then
    say "'$command' exited with $status, and $what is still missing (the end of $log):" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  say "$what ready in $(elapsed "$started") ($($check))"
}

# emulation_ready <arch>: this machine runs <arch> programs (qemu-user-static through
# binfmt_misc: the kernel hands an arm64 binary to qemu), or says why not and stops.
qemu_version() { command -v qemu-aarch64-static >/dev/null && qemu-aarch64-static --version 2>/dev/null | head -1; }
emulation_ready() {
  local arch=$1 qemu
  case $arch in
    arm64) qemu=qemu-aarch64 ;;
    *) say "no emulation for Debian architecture $arch here (only arm64)" >&2; exit 1 ;;
  esac
  apt_install "qemu-user-static and binfmt-support" qemu_version "the Debian $arch root runs under emulation" qemu-user-static binfmt-support
  if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
      || { say "binfmt_misc cannot be mounted here, so $arch programs cannot run" >&2; exit 1; }
  fi
  [ -e "/proc/sys/fs/binfmt_misc/$qemu" ] || update-binfmts --enable "$qemu" >/dev/null 2>&1 || true
  grep -q '^enabled' "/proc/sys/fs/binfmt_misc/$qemu" 2>/dev/null \
    || { say "binfmt_misc has no enabled $qemu entry (update-binfmts --enable $qemu failed), so $arch programs cannot run" >&2; exit 1; }
}

# debian_root <suite> <packages,comma,separated> <dir> [<arch>]: a minimal Debian root from
# the mirror (debootstrap, installed when missing) holding <packages>, for <arch> (this
# machine's by default; arm64 under emulation), which trusts what this machine's network
# path signs with: the host's CA bundle as /etc/ssl/certs/host-ca-bundle.crt (scripts/in-root
# points pip and OpenSSL at it). <dir> is made afresh; the caller moves it into place when it
# is complete.
# foreign_arch <Debian architecture>: true when this machine runs it only under emulation.
foreign_arch() { [ "$1" != "$(dpkg --print-architecture)" ]; }
debootstrap_version() { command -v debootstrap >/dev/null && debootstrap --version 2>/dev/null; }
# debian_root_tools <arch>: debootstrap, and emulation for a foreign <arch> (apt: run it
# where no other apt runs; debian_root does, and a caller that makes a root in the
# background runs it first).
debian_root_tools() {
  apt_install "Debian's debootstrap" debootstrap_version "it makes the Debian roots" debootstrap
  ! foreign_arch "$1" || emulation_ready "$1"
}
# remove_root <dir>: a root's folder, after unmounting what is mounted in it (a debootstrap
# that was killed leaves its /proc mounted there, which rm cannot remove).
remove_root() {
  local dir mount
  dir=$(realpath -m "$1")
  awk -v dir="$dir/" 'index($2 "/", dir) == 1 { print $2 }' /proc/mounts | sort -r | while read -r mount; do
    umount -l "$mount"
  done
  rm -rf "$dir"
}
debian_root() {
  local suite=$1 packages=$2 dir=$3 arch=${4:-$(dpkg --print-architecture)} log=build/bootstrap/debootstrap-$1-${4:-native}.log
  debian_root_tools "$arch"
  remove_root "$dir"
  mkdir -p "$(dirname "$dir")" build/bootstrap
  if ! debootstrap --arch="$arch" --variant=minbase --include="$packages" "$suite" "$dir" http://deb.debian.org/debian >"$log" 2>&1; then
    say "debootstrap failed (the end of $log):" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/host-ca-bundle.crt"
}
