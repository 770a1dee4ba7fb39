#!/usr/bin/env bash
# The README's set-up on a really fresh machine: a minimal Debian 12 chroot (debootstrap
# --variant=minbase bookworm, then only git, ca-certificates and python3), with this repository's
# HEAD cloned into it (/srv/tacc_hub: tasks run as the demo's and the tests' own accounts, which cannot
# enter /root), and nothing else of this machine but its way to reach the package registries.
#
#   scripts/fresh-check.sh               full: the first half, then ./scripts/test.sh in the chroot
#   scripts/fresh-check.sh --first-half  ./scripts/start.sh in the background, wait for the hub, run
#                                        `tcloud submit examples/ddp -f` through it (must succeed),
#                                        then ./scripts/start.sh stop: nothing of it may be left running
#   --keep      leave the chroot (in $TACC_FRESH_DIR, default a new /var/tmp/tacc-fresh.XXXX) afterwards
#
# Needs root (debootstrap, chroot, mounts) and apt (installs debootstrap when missing). What is
# copied in, so the chroot reaches the same registries as this machine: /etc/resolv.conf, the apt
# sources and /etc/apt/apt.conf.d, the extra CA certificates (/usr/local/share/ca-certificates, then
# update-ca-certificates inside), /etc/pip.conf and the npm configuration (/etc/npmrc, ~/.npmrc);
# PIP_CERT and NODE_EXTRA_CA_CERTS are passed on when set. Not copied: PIP_FIND_LINKS, local wheel
# folders, /etc/xdg/pip: a new user has none of them. Every command inside runs under
# `env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 chroot DIR bash -lc ...`.
# TACC_TORCH, when set, is passed on to the chroot's bootstrap. Each phase's time is printed.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd -P)
LIB_NAME=fresh-check
# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

mode=full
keep=0
for arg in "$@"; do
  case "$arg" in
    --first-half) mode=first-half ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 [--first-half] [--keep]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || lib_die "needs root (debootstrap, chroot and mounts); run it as root"

T0=$SECONDS
phase_start=$SECONDS
phase_name=""
phase() {  # phase NAME: ends the previous phase (printing its time) and starts NAME
  [ -z "$phase_name" ] || echo "fresh-check: phase '$phase_name' took $((SECONDS - phase_start)) s" >&2
  phase_name=$1
  phase_start=$SECONDS
  [ -z "$1" ] || echo "fresh-check: == $1" >&2
}

DIR=${TACC_FRESH_DIR:-$(mktemp -d /var/tmp/tacc-fresh.XXXXXX)}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
[ "$DIR" != / ] || lib_die "refusing to use / as the chroot"
chmod 755 "$DIR"  # the chroot's /: mktemp makes it 0700, and then no other user (munge, postgres) can run anything
MOUNTED=()

chroot_pids() {  # processes whose root directory is the chroot
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$DIR" ] && echo "${p#/proc/}"
  done
  return 0
}

cleanup() {
  local rc=$? i pids
  set +e
  phase ""
  pids=$(chroot_pids)
  if [ -n "$pids" ]; then
    echo "fresh-check: stopping what is left running in the chroot: $(echo $pids)" >&2
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for ((i = 0; i < 50; i++)); do [ -z "$(chroot_pids)" ] && break; sleep 0.2; done
    pids=$(chroot_pids)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    sleep 0.5
  fi
  for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
    umount -R "${MOUNTED[$i]}" 2>/dev/null || umount -l "${MOUNTED[$i]}" 2>/dev/null \
      || echo "fresh-check: could not unmount ${MOUNTED[$i]}" >&2
  done
  if [ "$keep" = 1 ] || [ "$rc" != 0 ]; then
    echo "fresh-check: the chroot is kept in $DIR (logs: $DIR/root/*.log)" >&2
  fi
  if [ "$keep" = 0 ] && [ "$rc" = 0 ]; then
    # only after every mount is gone: never delete through a bind mount
    if ! grep -qF " $DIR/" /proc/mounts; then rm -rf --one-file-system "$DIR"; fi
  fi
  echo "fresh-check: total $((SECONDS - T0)) s, exit $rc" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mnt() {  # mnt TARGET MOUNT-ARGS...: mount, and remember it for the unmount in reverse order
  local target=$DIR/$1
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  MOUNTED+=("$target")
}

CA_ENV=()
for v in PIP_CERT NODE_EXTRA_CA_CERTS; do
  [ -n "${!v:-}" ] && CA_ENV+=("$v=${!v}")
done
inside() {  # inside COMMAND-STRING: run it in the chroot, with nothing of this machine's environment
  env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 ${CA_ENV[@]+"${CA_ENV[@]}"} \
    ${TACC_TORCH:+TACC_TORCH=$TACC_TORCH} chroot "$DIR" bash -lc "$1"
}

# The Debian mirror of this machine's apt sources (deb822 .sources or one-line .list).
mirror() {
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v -- '-security' | head -1)
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
                     | grep -v -- '-security' | awk '{print $2}' | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

# ------------------------------------------------------------------ the minimal Debian 12
phase "debootstrap"
command -v debootstrap >/dev/null || apt_install "(to make the chroot)" debootstrap
if [ ! -x "$DIR/usr/bin/apt-get" ]; then
  debootstrap --variant=minbase bookworm "$DIR" "$(mirror)" >"$DIR.debootstrap.log" 2>&1 \
    || { tail -20 "$DIR.debootstrap.log" >&2; lib_die "debootstrap failed (log: $DIR.debootstrap.log)"; }
fi

phase "registries and mounts"
cp /etc/resolv.conf "$DIR/etc/resolv.conf"
rm -f "$DIR/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mkdir -p "$DIR$(dirname "$f")"
  cp "$f" "$DIR$f"
  # the keyrings those sources are signed by
  for k in $(grep -ho 'Signed-By: *[^ ]*\|signed-by=[^] ]*' "$f" | sed 's/.*[:=] *//'); do
    [ -f "$k" ] && [ ! -f "$DIR$k" ] && { mkdir -p "$DIR$(dirname "$k")"; cp "$k" "$DIR$k"; }
  done
done
cp -a /etc/apt/apt.conf.d/. "$DIR/etc/apt/apt.conf.d/"
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$DIR/usr/local/share/ca-certificates"
  cp -a /usr/local/share/ca-certificates/. "$DIR/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$DIR/etc/pip.conf"
[ -f /etc/npmrc ] && cp /etc/npmrc "$DIR/etc/npmrc"
[ -f "$HOME/.npmrc" ] && cp "$HOME/.npmrc" "$DIR/root/.npmrc"
printf '#!/bin/sh\nexit 101\n' >"$DIR/usr/sbin/policy-rc.d"
chmod 755 "$DIR/usr/sbin/policy-rc.d"
host=$(hostname)
grep -qw "$host" "$DIR/etc/hosts" 2>/dev/null || echo "127.0.0.1 $host" >>"$DIR/etc/hosts"
grep -qw localhost "$DIR/etc/hosts" || echo "127.0.0.1 localhost" >>"$DIR/etc/hosts"

mnt proc -t proc proc
mnt sys -t sysfs sysfs
mnt sys/fs/cgroup --rbind /sys/fs/cgroup
mnt dev --bind /dev
mnt dev/pts --bind /dev/pts
mountpoint -q /dev/shm && mnt dev/shm --bind /dev/shm
mnt tmp -t tmpfs -o size=8g,mode=1777 tmpfs

phase "apt-get install git ca-certificates python3"
inside 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq git ca-certificates python3 >/dev/null && update-ca-certificates >/dev/null'

phase "clone"
rm -rf "$DIR/srv/tacc_hub"
mkdir -p "$DIR/srv"
chmod 755 "$DIR/srv"
git clone -q "$REPO" "$DIR/srv/tacc_hub"
echo "fresh-check: testing $(git -C "$DIR/srv/tacc_hub" log --oneline -1)" >&2

# Free ports for the hub (its port, +1 the proxy's API, +81 the hub's API) and the service.
read -r HUB_PORT SVC_PORT < <(python3 - <<'PY'
import socket
def free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p)); return True
        except OSError:
            return False
for base in range(18000, 30000, 97):
    if all(free(p) for p in (base, base + 1, base + 81, base + 50)):
        print(base, base + 50); break
PY
)
PORTS="export TACC_HUB_PORT=$HUB_PORT TACC_PORT=$SVC_PORT"

# ------------------------------------------------------------------ first half: start, a task, stop
phase "start.sh (bootstrap, then the hub)"
inside "cd /srv/tacc_hub && $PORTS && { setsid ./scripts/start.sh </dev/null >/root/start.log 2>&1 & echo \$! >/root/start.pid; }"
start_pid=$(cat "$DIR/root/start.pid")
health="import json, urllib.request as u; json.load(u.urlopen('http://127.0.0.1:$HUB_PORT/services/tacc/api/health', timeout=3))"
ready=0
for ((i = 0; i < 3600; i++)); do
  if grep -q 'TACC_TOKEN=' "$DIR/root/start.log" && inside "python3 -c \"$health\"" >/dev/null 2>&1; then
    ready=1; break
  fi
  [ -d "/proc/$start_pid" ] || break
  sleep 1
done
if [ "$ready" != 1 ]; then
  tail -40 "$DIR/root/start.log" >&2
  lib_die "the hub did not come up (log: $DIR/root/start.log)"
fi
du -sh "$DIR/srv/tacc_hub/.venv" 2>/dev/null | sed 's/^/fresh-check: venv size /' >&2

phase "tcloud submit examples/ddp -f"
token=$(sed -n 's/.*TACC_TOKEN=\([^ ]*\).*/\1/p' "$DIR/root/start.log" | head -1)
inside "cd /srv/tacc_hub && export TACC_URL=http://127.0.0.1:$HUB_PORT/services/tacc TACC_TOKEN=$token \
  && .venv/bin/tcloud submit examples/ddp -f" 2>&1 | tee "$DIR/root/ddp.log"
[ "${PIPESTATUS[0]}" = 0 ] || lib_die "the DDP example did not succeed (log: $DIR/root/ddp.log)"

phase "start.sh stop"
inside "cd /srv/tacc_hub && $PORTS && ./scripts/start.sh stop" 2>&1 | tee "$DIR/root/stop.log"
[ "${PIPESTATUS[0]}" = 0 ] || lib_die "./scripts/start.sh stop failed"
left=$(chroot_pids)
if [ -n "$left" ]; then
  # shellcheck disable=SC2086
  ps -o pid,args -p $left >&2 || true
  lib_die "processes are left running after ./scripts/start.sh stop"
fi

# ------------------------------------------------------------------ second half: the test suite
if [ "$mode" = full ]; then
  phase "test.sh"
  inside "cd /srv/tacc_hub && ./scripts/test.sh" 2>&1 | tee "$DIR/root/test.log" | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || lib_die "./scripts/test.sh failed in the chroot (log: $DIR/root/test.log)"
fi
phase ""
echo "fresh-check: OK ($mode)" >&2
