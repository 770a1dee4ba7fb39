# Shared by the scripts in scripts/ (source it; it defines functions only).
#
#   as_root CMD...            run CMD as root: directly when we are root, through sudo when sudo is
#                             installed, else fail saying what to run as root
#   apt_install [--no-recommends] WHY PKG...
#                             install the Debian packages among PKG that are missing (apt-get);
#                             WHY says what they are for. Fails, naming the command to run as root,
#                             when neither root nor sudo is available. --no-recommends: for server
#                             packages, whose recommends pull a mail server (exim4 fails to configure
#                             in a chroot) and cron
#   apt_try_install WHY PKG...  the same for optional packages: says what is missing and returns 1
#                             instead of failing
# $LIB_NAME (default: the calling script's name) prefixes the messages.

LIB_NAME=${LIB_NAME:-$(basename "$0" .sh)}
_apt_updated=0

lib_die() { echo "$LIB_NAME: error: $*" >&2; exit 1; }

can_be_root() { [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else lib_die "this needs root, and sudo is not installed. Run as root: $*"
  fi
}

# apt_missing PKG...: prints the packages among PKG that are not installed.
apt_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || printf '%s\n' "$p"
  done
}

_apt_recommends=()
_apt_do() {
  local why=$1
  shift
  echo "$LIB_NAME: installing $* (Debian packages) $why" >&2
  if [ "$_apt_updated" = 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    _apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${_apt_recommends[@]+"${_apt_recommends[@]}"} "$@" >/dev/null
}

apt_install() {
  local why missing
  _apt_recommends=()
  if [ "${1:-}" = --no-recommends ]; then _apt_recommends=(--no-install-recommends); shift; fi
  why=$1
  shift
  missing=$(apt_missing "$@" | tr '\n' ' ')
  missing=${missing% }
  [ -n "$missing" ] || return 0
  command -v apt-get >/dev/null 2>&1 \
    || lib_die "missing $missing $why; this is not a Debian system: install their equivalents"
  can_be_root || lib_die "missing Debian packages $why, and sudo is not installed. As root, run:
    apt-get update && apt-get install -y ${_apt_recommends[*]:+${_apt_recommends[*]} }$missing
then run this again."
  # shellcheck disable=SC2086
  _apt_do "$why" $missing
}

apt_try_install() {
  local why=$1 missing
  _apt_recommends=()
  shift
  missing=$(apt_missing "$@" | tr '\n' ' ')
  missing=${missing% }
  [ -n "$missing" ] || return 0
  if ! command -v apt-get >/dev/null 2>&1 || ! can_be_root; then
    echo "$LIB_NAME: note: $missing not installed ($why); as root: apt-get install -y $missing" >&2
    return 1
  fi
  # shellcheck disable=SC2086
  _apt_do "$why" $missing
}
