#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and demos; never for real data (fsync is off).
#
#   scripts/postgres.sh start DIR PORT   initialise DIR (if needed), start the server on
#                                        127.0.0.1:PORT with trust auth, create database
#                                        "tacc", print its SQLAlchemy URL on stdout:
#                                        postgresql+psycopg://postgres@127.0.0.1:PORT/tacc
#   scripts/postgres.sh stop DIR         stop the server in DIR (no-op when not running)
#
# Both are idempotent. The server runs as the "postgres" OS user when called as root (initdb
# refuses root), as the caller otherwise. The newest /usr/lib/postgresql/*/bin is used; when
# none is installed, the script installs Debian's "postgresql" package with apt-get (as root, or
# through sudo; otherwise it stops and prints the command to run as root).
# Everything but the URL goes to stderr; the server log is DIR/postgres.log.
set -euo pipefail

die() { echo "postgres.sh: $*" >&2; exit 1; }
usage() { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }

pg_bin() { { ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true; } | sort -V | tail -1; }

ensure_installed() {
  BIN=$(pg_bin)
  if [[ -n "$BIN" && -x "$BIN/initdb" ]]; then return; fi
  LIB_NAME=postgres.sh
  # shellcheck source=scripts/lib.sh
  . "$(dirname "$0")/lib.sh"
  apt_install --no-recommends "(PostgreSQL was not found)" postgresql
  BIN=$(pg_bin)
  [[ -n "$BIN" && -x "$BIN/initdb" ]] || die "PostgreSQL is still missing after apt-get install"
}

# Run a command as the server's OS user.
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ensure_pg_user() {
  [[ $(id -u) -eq 0 ]] || return 0
  id -u postgres >/dev/null 2>&1 && return 0
  useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
}

# Absolute path of DIR, created if missing.
resolve_dir() {
  mkdir -p "$1"
  (cd "$1" && pwd -P)
}

is_running() { as_pg "$BIN/pg_ctl" status -D "$1" >/dev/null 2>&1; }

start() {
  local dir port data log running_port
  [[ $# -eq 2 ]] || usage
  port=$2
  [[ "$port" =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "PORT must be a TCP port number, not '$port'"
  dir=$(resolve_dir "$1")
  data="$dir/data"
  log="$dir/postgres.log"
  ensure_installed
  ensure_pg_user
  cd "$dir"  # the server user may not be able to read the caller's working directory
  if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$dir"
    chmod 700 "$dir"
  fi
  as_pg test -w "$dir" || die "user postgres cannot write $dir (is a parent directory private? use one under /tmp)"

  if [[ ! -s "$data/PG_VERSION" ]]; then
    as_pg "$BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  fi

  if is_running "$data"; then
    running_port=$(sed -n 4p "$data/postmaster.pid")
    [[ "$running_port" == "$port" ]] || die "a server already runs in $dir on port $running_port, not $port"
  else
    # Throwaway: durability off for speed. No Unix socket (its default directory may not exist).
    as_pg "$BIN/pg_ctl" start -D "$data" -l "$log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $port \
-c unix_socket_directories='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null \
      || { tail -n 30 "$log" >&2 || true; die "the server did not start (port $port taken?)"; }
  fi

  local psql=("$BIN/psql" -X -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA)
  if [[ "$(as_pg "${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'tacc'")" != 1 ]]; then
    as_pg "${psql[@]}" -c "CREATE DATABASE tacc" >/dev/null
  fi
  echo "postgresql+psycopg://postgres@127.0.0.1:$port/tacc"
}

stop() {
  local dir data
  [[ $# -eq 1 ]] || usage
  [[ -d "$1" ]] || return 0
  dir=$(resolve_dir "$1")
  data="$dir/data"
  [[ -f "$data/postmaster.pid" ]] || return 0
  BIN=$(pg_bin)
  [[ -n "$BIN" ]] || return 0
  cd "$dir"
  if is_running "$data"; then
    as_pg "$BIN/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null
  fi
}

[[ $# -ge 1 ]] || usage
cmd=$1
shift
case "$cmd" in
  start) start "$@" ;;
  stop) stop "$@" ;;
  *) usage ;;
esac
