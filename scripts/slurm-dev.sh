#!/usr/bin/env bash
# A throwaway Slurm cluster on this one machine, for development and tests; never for real work.
#
#   scripts/slurm-dev.sh up     [--state-dir DIR]   start whatever is not running, wait until the
#                                                   4 nodes are up, print "export SLURM_CONF=..."
#   scripts/slurm-dev.sh down   [--state-dir DIR]   stop what `up` started (no-op when not up)
#   scripts/slurm-dev.sh status [--state-dir DIR]   print daemons, sinfo and the env line;
#                                                   exit 0 only when everything is up
# Faults, for the recovery tests (jobs keep running on the nodes meanwhile):
#   scripts/slurm-dev.sh stop-ctld    [--state-dir DIR]   stop slurmctld (SIGTERM: it saves its state)
#   scripts/slurm-dev.sh start-ctld   [--state-dir DIR]   start it again (recovers its jobs), wait for it
#                                                   and for the nodes to be up again
#   scripts/slurm-dev.sh restart-ctld [--state-dir DIR]   both
#   scripts/slurm-dev.sh kill-node NAME [--state-dir DIR] kill -9 the slurmd of node NAME (its jobs'
#                                                   processes live on; Slurm marks the node down
#                                                   after SlurmdTimeout and fails its jobs: NODE_FAIL)
#   scripts/slurm-dev.sh start-node NAME [--state-dir DIR] start that slurmd again and wait until every
#                                                   node is up (ReturnToService=2 brings it back)
#
# DIR defaults to $TACC_SLURM_DIR, else <repo>/.slurm-dev. Everything lives in DIR: configs
# (DIR/etc/slurm.conf, slurmdbd.conf, gres.conf, topology.conf), a munge key and socket, a
# MariaDB data directory, spool/state/pid/log files. What `up` brings up:
#   munged       own key and socket in DIR/munge, run as user munge
#   mariadbd     own datadir and socket in DIR/mysql, 127.0.0.1 only, run as user mysql
#   slurmdbd     accounting (sacct) in MariaDB; the cluster "taccdev" is registered
#   slurmctld    SlurmUser=root (the service submits as root in tests)
#   slurmd x4    virtual nodes n1..n4 on this machine (MULTIPLE_SLURMD), 4 CPUs and 2 fake GPUs
#                each (gres files are symlinks to /dev/null), partition "gpu" (default),
#                topology/tree with switches s1 (n1,n2) and s2 (n3,n4) under "root";
#                ProctrackType=proctrack/cgroup where cgroups are mounted (see PROCTRACK below)
# Ports are fixed so that a restart keeps them, away from Slurm's defaults (6817-6819):
# base = $TACC_SLURM_PORT_BASE (default 16810; a state dir remembers the base it was first
# brought up with): MariaDB base+6, slurmctld base+7, slurmdbd base+9, slurmd n1..n4
# base+11..base+14.
#
# Idempotent: `up` on a running cluster only checks it (running jobs are kept); `down` stops
# only processes whose pid file is in DIR and that name DIR in their command line or
# environment, so it never kills what it did not start. Missing Debian packages (slurm-wlm,
# munge, slurmdbd, mariadb-server) are installed with apt-get. Needs root (re-runs itself
# with sudo otherwise). Progress goes to stderr; stdout carries only the env line (and, for
# status, the report). $TACC_SLURM_UP_TIMEOUT (seconds, default 180) bounds each wait.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd -P)
CLUSTER=taccdev
NODES=(n1 n2 n3 n4)
GPUS_PER_NODE=2
TIMEOUT=${TACC_SLURM_UP_TIMEOUT:-180}
PACKAGES=(slurm-wlm munge slurmdbd mariadb-server)
# Process tracking: proctrack/cgroup (the freezer cgroup: every process of a job step, setsid and
# double-forked ones included, is found and killed when the step ends or is cancelled) where
# cgroup v1's freezer is mounted (measured here); proctrack/linuxproc (parent pids: an escaped
# process lives on, and holds its step open) otherwise. TACC_SLURM_PROCTRACK=cgroup|linuxproc
# chooses (cgroup v2 needs a slurmd whose cgroup has its controllers delegated, e.g. by systemd).
if [[ -d /sys/fs/cgroup/freezer ]]; then
  PROCTRACK=${TACC_SLURM_PROCTRACK:-cgroup}
else
  PROCTRACK=${TACC_SLURM_PROCTRACK:-linuxproc}
fi
[[ "$PROCTRACK" == cgroup || "$PROCTRACK" == linuxproc ]] || { echo "slurm-dev: TACC_SLURM_PROCTRACK must be cgroup or linuxproc" >&2; exit 2; }

say() { echo "slurm-dev: $*" >&2; }
die() { echo "slurm-dev: error: $*" >&2; exit 1; }
usage() {
  echo "usage: $0 up|down|status|stop-ctld|start-ctld|restart-ctld [--state-dir DIR]" >&2
  echo "       $0 kill-node|start-node NAME [--state-dir DIR]" >&2
  exit 2
}

# ---------------------------------------------------------------- arguments, root, packages

[[ $# -ge 1 ]] || usage
CMD=$1
shift
DIR=${TACC_SLURM_DIR:-$REPO/.slurm-dev}
NODE_ARG=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --state-dir) [[ $# -ge 2 ]] || usage; DIR=$2; shift 2 ;;
    --state-dir=*) DIR=${1#*=}; shift ;;
    -*) usage ;;
    *) [[ ${#NODE_ARG[@]} -eq 0 ]] || usage; NODE_ARG=("$1"); shift ;;
  esac
done
case "$CMD" in
  up | down | status | stop-ctld | start-ctld | restart-ctld) [[ ${#NODE_ARG[@]} -eq 0 ]] || usage ;;
  kill-node | start-node) [[ ${#NODE_ARG[@]} -eq 1 ]] || usage ;;
  *) usage ;;
esac

if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || die "must run as root (slurmd runs jobs as their users; missing Debian packages
  ${PACKAGES[*]} are installed with apt-get), and sudo is not installed. As root, run:
    $0 $CMD ${NODE_ARG[*]:+${NODE_ARG[*]} }--state-dir $DIR"
  exec sudo --preserve-env=TACC_SLURM_DIR,TACC_SLURM_PORT_BASE,TACC_SLURM_UP_TIMEOUT "$0" "$CMD" ${NODE_ARG[@]+"${NODE_ARG[@]}"} --state-dir "$DIR"
fi

if [[ "$CMD" == up ]]; then
  mkdir -p "$DIR"
elif [[ ! -d "$DIR" ]]; then
  [[ "$CMD" == down ]] && exit 0
  [[ "$CMD" == status ]] || die "state dir $DIR does not exist: the cluster is not up"
  echo "state dir $DIR does not exist: the cluster is not up"
  exit 1
fi
DIR=$(cd "$DIR" && pwd -P)
[[ "$DIR" != *[[:space:]]* ]] || die "the state dir may not contain white space (Slurm's config files cannot quote it): '$DIR'"
if [[ "$CMD" != status ]]; then
  # One up/down at a time per state dir (two test sessions may share one).
  exec 9>"$DIR/.lock"
  flock 9
fi
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF
ENV_LINE="export SLURM_CONF=$CONF"

# The port base a state dir was first brought up with is kept (DIR/etc/port-base), so later
# commands need no environment; an explicit TACC_SLURM_PORT_BASE wins (checked below).
PORT_BASE=${TACC_SLURM_PORT_BASE:-$(cat "$DIR/etc/port-base" 2>/dev/null || echo 16810)}
[[ "$PORT_BASE" =~ ^[0-9]+$ ]] && ((PORT_BASE >= 1024 && PORT_BASE <= 65500)) \
  || die "TACC_SLURM_PORT_BASE must be a port number in 1024..65500, not '$PORT_BASE'"
MYSQL_PORT=$((PORT_BASE + 6))
CTLD_PORT=$((PORT_BASE + 7))
DBD_PORT=$((PORT_BASE + 9))
node_port() { echo $((PORT_BASE + 10 + ${1#n})); }

ensure_installed() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq "${missing[@]}" >"$DIR/apt.log" 2>&1; then
    apt-get update -qq >>"$DIR/apt.log" 2>&1
    apt-get install -y -qq "${missing[@]}" >>"$DIR/apt.log" 2>&1 \
      || { tail -n 20 "$DIR/apt.log" >&2; die "apt-get install ${missing[*]} failed (log: $DIR/apt.log)"; }
  fi
}

# ---------------------------------------------------------------- processes we started

# ours PIDFILE: the pid in PIDFILE is alive and names $DIR in its command line or environment.
ours() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  cat "/proc/$pid/cmdline" "/proc/$pid/environ" 2>/dev/null | tr '\0' '\n' | grep -qF "$DIR/"
}

pid_of() { cat "$1"; }

# stop_pidfile NAME PIDFILE: TERM the process if it is ours, wait for it, KILL after 30 s.
stop_pidfile() {
  local name=$1 pidfile=$2 pid i
  if ! ours "$pidfile"; then rm -f "$pidfile"; return 0; fi
  pid=$(pid_of "$pidfile")
  say "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do
    [[ -d /proc/$pid ]] || break
    # a zombie child of ours would never go away on its own
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && break
    sleep 0.1
  done
  if [[ -d /proc/$pid ]] && ours "$pidfile"; then
    say "$name did not stop on TERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# wait_for WHAT LOG CMD...: run CMD until it succeeds; after $TIMEOUT s fail with LOG's tail.
wait_for() {
  local what=$1 log=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - start >= TIMEOUT)); then
      say "timed out after ${TIMEOUT}s waiting for $what; last lines of $log:"
      tail -n 25 "$log" >&2 2>/dev/null || true
      die "$what did not come up (state dir $DIR)"
    fi
    sleep 0.2
  done
}

# need_port NAME PORT: fail at once when something already listens on 127.0.0.1:PORT.
need_port() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
    die "port $2 for $1 is taken (another dev cluster?); bring that one down or pick another block with TACC_SLURM_PORT_BASE=N (ports N+6..N+14) and a new state dir"
  fi
}

# start_daemon LOGFILE CMD...: start CMD detached from us (own session, no inherited fds).
start_daemon() {
  local log=$1
  shift
  setsid "$@" </dev/null >>"$log" 2>&1 9>&- &
  disown || true
}

# ---------------------------------------------------------------- state directory and configs

MUNGE_DIR=$DIR/munge
MUNGE_SOCK=$MUNGE_DIR/munge.socket.2
MYSQL_DIR=$DIR/mysql
MYSQL_SOCK=$MYSQL_DIR/mysqld.sock

make_layout() {
  mkdir -p "$DIR"/{etc,log,run,state,dev} "$MUNGE_DIR" "$MYSQL_DIR"
  local n g
  for n in "${NODES[@]}"; do
    mkdir -p "$DIR/spool/$n"
    for ((g = 0; g < GPUS_PER_NODE; g++)); do
      ln -sfn /dev/null "$DIR/dev/${n}gpu$g"
    done
  done
  # munged and mariadbd run as their own users: they must reach their directories.
  chmod 755 "$DIR"
  chown munge:munge "$MUNGE_DIR"
  chmod 755 "$MUNGE_DIR"  # clients need to reach the socket; the key itself is 600
  chown mysql:mysql "$MYSQL_DIR"
  chmod 700 "$MYSQL_DIR"
  runuser -u munge -- test -w "$MUNGE_DIR" \
    || die "user munge cannot write $MUNGE_DIR (is a parent directory private? use a state dir under /tmp)"
  runuser -u mysql -- test -w "$MYSQL_DIR" \
    || die "user mysql cannot write $MYSQL_DIR (is a parent directory private? use a state dir under /tmp)"
  if [[ ! -s "$DIR/etc/db.pass" ]]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$DIR/etc/db.pass")
  fi
}

render_slurm_conf() {
  local n
  cat <<EOF
# Written by scripts/slurm-dev.sh; edits are overwritten on the next "up".
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/$PROCTRACK
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
MailProg=/bin/true
KillWait=5
InactiveLimit=0
# A node whose slurmd stops answering is marked down (and its jobs NODE_FAIL) after this many
# seconds, not the default 300: the fault tests kill a slurmd and wait for that.
SlurmdTimeout=6
TopologyPlugin=topology/tree
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu
# Connections to slurmdbd take their munge options from here, not from AuthInfo.
AccountingStoragePass=socket=$MUNGE_SOCK
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.log
EOF
  for n in "${NODES[@]}"; do
    echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(node_port "$n") CPUs=4 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:$GPUS_PER_NODE State=UNKNOWN"
  done
  echo "PartitionName=gpu Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
}

render_gres_conf() {
  local n
  echo "AutoDetect=off"
  for n in "${NODES[@]}"; do
    echo "NodeName=$n Name=gpu File=$DIR/dev/${n}gpu[0-$((GPUS_PER_NODE - 1))]"
  done
}

# Used with ProctrackType=proctrack/cgroup. No constraint (device cgroups do not work in every
# sandbox, and the fake GPUs are /dev/null): only the tracking of a job's processes.
render_cgroup_conf() {
  cat <<EOF
CgroupPlugin=autodetect
CgroupMountpoint=/sys/fs/cgroup
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainSwapSpace=no
ConstrainDevices=no
EOF
}

render_topology_conf() {
  cat <<EOF
SwitchName=s1 Nodes=n1,n2
SwitchName=s2 Nodes=n3,n4
SwitchName=root Switches=s1,s2
EOF
}

render_slurmdbd_conf() {
  cat <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$(cat "$DIR/etc/db.pass")
StorageLoc=slurm_acct_db
EOF
}

any_running() {
  local f
  for f in "$DIR"/run/*.pid "$MUNGE_DIR/munged.pid" "$MYSQL_DIR/mysqld.pid"; do
    ours "$f" && return 0
  done
  return 1
}

# write_conf FILE RENDER_FUNCTION MODE: rewrite FILE when its content changes; refuse to
# change the configuration under running daemons.
write_conf() {
  local file=$1 render=$2 mode=$3 new
  new=$("$render")
  if [[ -f "$file" && "$(cat "$file")" == "$new" ]]; then return 0; fi
  if [[ -f "$file" ]] && any_running; then
    die "$file would change (other ports or state dir?) while the cluster runs; run '$0 down --state-dir $DIR' first"
  fi
  (umask 077 && printf '%s\n' "$new" >"$file.tmp")
  chmod "$mode" "$file.tmp"
  mv "$file.tmp" "$file"
}

write_configs() {
  write_conf "$CONF" render_slurm_conf 644
  write_conf "$DIR/etc/gres.conf" render_gres_conf 644
  write_conf "$DIR/etc/topology.conf" render_topology_conf 644
  write_conf "$DIR/etc/cgroup.conf" render_cgroup_conf 644
  write_conf "$DIR/etc/slurmdbd.conf" render_slurmdbd_conf 600
  echo "$PORT_BASE" >"$DIR/etc/port-base"
}

# ---------------------------------------------------------------- the daemons, in start order

munge_ok() { munge -n -S "$MUNGE_SOCK" | unmunge -S "$MUNGE_SOCK"; }

start_munge() {
  if ours "$MUNGE_DIR/munged.pid" && munge_ok >/dev/null 2>&1; then return 0; fi
  if [[ ! -s "$MUNGE_DIR/munge.key" ]]; then
    mungekey --create --keyfile="$MUNGE_DIR/munge.key"
    chown munge:munge "$MUNGE_DIR/munge.key"
    chmod 600 "$MUNGE_DIR/munge.key"
  fi
  say "starting munged"
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
  runuser -u munge -- munged --socket="$MUNGE_SOCK" --key-file="$MUNGE_DIR/munge.key" \
    --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
    --seed-file="$MUNGE_DIR/munged.seed" --num-threads=10 </dev/null >>"$DIR/log/munged.out" 2>&1 9>&- \
    || { tail -n 20 "$DIR/log/munged.out" "$MUNGE_DIR/munged.log" >&2 2>/dev/null || true; die "munged did not start"; }
  wait_for munged "$MUNGE_DIR/munged.log" munge_ok
}

mysql_root() { mariadb --no-defaults --socket="$MYSQL_SOCK" -u root "$@"; }
mysql_ok() { mariadb-admin --no-defaults --socket="$MYSQL_SOCK" -u root ping; }

start_mariadb() {
  if ! ours "$MYSQL_DIR/mysqld.pid" || ! mysql_ok >/dev/null 2>&1; then
    if [[ ! -d "$MYSQL_DIR/data/mysql" ]]; then
      say "initialising MariaDB in $MYSQL_DIR/data"
      rm -rf "$MYSQL_DIR/data"
      mariadb-install-db --no-defaults --datadir="$MYSQL_DIR/data" --user=mysql --skip-test-db \
        --auth-root-authentication-method=socket >"$DIR/log/mariadb-install.log" 2>&1 \
        || { tail -n 20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    need_port mariadbd "$MYSQL_PORT"
    say "starting mariadbd on 127.0.0.1:$MYSQL_PORT"
    rm -f "$MYSQL_SOCK"
    start_daemon "$DIR/log/mariadbd.out" runuser -u mysql -- mariadbd --no-defaults \
      --datadir="$MYSQL_DIR/data" --socket="$MYSQL_SOCK" --port="$MYSQL_PORT" --bind-address=127.0.0.1 \
      --pid-file="$MYSQL_DIR/mysqld.pid" --log-error="$MYSQL_DIR/mysqld.log" --skip-name-resolve \
      --skip-log-bin --innodb-buffer-pool-size=128M --innodb-log-file-size=48M \
      --innodb-lock-wait-timeout=900 --innodb-flush-log-at-trx-commit=0 --max-connections=100
    wait_for mariadbd "$MYSQL_DIR/mysqld.log" mysql_ok
  fi
  local pass
  pass=$(cat "$DIR/etc/db.pass")
  mysql_root <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

dbd_ok() { sacctmgr -n -P list cluster format=cluster; }

start_slurmdbd() {
  if ! ours "$DIR/run/slurmdbd.pid"; then
    need_port slurmdbd "$DBD_PORT"
    say "starting slurmdbd on 127.0.0.1:$DBD_PORT"
    start_daemon "$DIR/log/slurmdbd.out" slurmdbd
  fi
  wait_for slurmdbd "$DIR/log/slurmdbd.log" dbd_ok
  if ! dbd_ok 2>/dev/null | grep -qx "$CLUSTER"; then
    say "registering cluster $CLUSTER in accounting"
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
}

start_slurmctld() {
  if ! ours "$DIR/run/slurmctld.pid"; then
    need_port slurmctld "$CTLD_PORT"
    say "starting slurmctld on 127.0.0.1:$CTLD_PORT"
    start_daemon "$DIR/log/slurmctld.out" slurmctld -i
  fi
  wait_for slurmctld "$DIR/log/slurmctld.log" scontrol ping
}

start_slurmds() {
  local n
  for n in "${NODES[@]}"; do
    if ! ours "$DIR/run/slurmd-$n.pid"; then
      need_port "slurmd $n" "$(node_port "$n")"
      say "starting slurmd $n on 127.0.0.1:$(node_port "$n")"
      start_daemon "$DIR/log/slurmd-$n.out" slurmd -N "$n"
    fi
  done
}

# Node states that count as up: idle, or busy with jobs.
nodes_up() {
  local states
  states=$(sinfo -h -N -p gpu -o '%N %t') || return 1
  [[ $(wc -l <<<"$states") -eq ${#NODES[@]} ]] || return 1
  ! grep -qvE ' (idle|alloc|mix|comp)$' <<<"$states"
}

wait_nodes() {
  local start=$SECONDS n
  until nodes_up 2>/dev/null; do
    if ((SECONDS - start >= TIMEOUT)); then
      say "timed out after ${TIMEOUT}s waiting for the nodes to be idle:"
      sinfo -N -o '%N %t %E' >&2 || true
      for n in slurmctld "slurmd-${NODES[0]}"; do
        say "last lines of $DIR/log/$n.log:"
        tail -n 15 "$DIR/log/$n.log" >&2 2>/dev/null || true
      done
      die "the nodes did not become idle (state dir $DIR)"
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- commands

up() {
  local t0=$SECONDS
  ensure_installed
  make_layout
  write_configs
  start_munge
  start_mariadb
  start_slurmdbd
  start_slurmctld
  start_slurmds
  wait_nodes
  say "up in $((SECONDS - t0)) s: ${#NODES[@]} nodes x $GPUS_PER_NODE GPUs, partition gpu (state dir $DIR)"
  echo "$ENV_LINE"
}

down() {
  [[ -d "$DIR/run" || -d "$MUNGE_DIR" ]] || return 0
  local n i
  if ours "$DIR/run/slurmctld.pid" && command -v scancel >/dev/null; then
    # Jobs would outlive their slurmd (slurmstepd keeps running): cancel them first.
    if [[ -n "$(squeue -h -o %i 2>/dev/null)" ]]; then
      say "cancelling the cluster's jobs"
      scancel --full --quiet $(squeue -h -o %i) 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do
        [[ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ]] && break
        sleep 0.1
      done
    fi
  fi
  for n in "${NODES[@]}"; do stop_pidfile "slurmd $n" "$DIR/run/slurmd-$n.pid"; done
  stop_pidfile slurmctld "$DIR/run/slurmctld.pid"
  stop_pidfile slurmdbd "$DIR/run/slurmdbd.pid"
  stop_pidfile mariadbd "$MYSQL_DIR/mysqld.pid"
  stop_pidfile munged "$MUNGE_DIR/munged.pid"
  say "down (state dir $DIR kept; remove it to start from scratch)"
}

status() {
  local ok=0 name f n
  local -a checks=("munged:$MUNGE_DIR/munged.pid" "mariadbd:$MYSQL_DIR/mysqld.pid"
    "slurmdbd:$DIR/run/slurmdbd.pid" "slurmctld:$DIR/run/slurmctld.pid")
  for n in "${NODES[@]}"; do checks+=("slurmd-$n:$DIR/run/slurmd-$n.pid"); done
  echo "state dir: $DIR"
  for f in "${checks[@]}"; do
    name=${f%%:*}
    if ours "${f#*:}"; then
      echo "  $name: running (pid $(pid_of "${f#*:}"))"
    else
      echo "  $name: not running"
      ok=1
    fi
  done
  if ((ok == 0)); then
    sinfo -N -o '%N %P %t %G %E' || ok=1
    nodes_up 2>/dev/null || { echo "  some nodes are not up"; ok=1; }
  fi
  echo "$ENV_LINE"
  return $ok
}

# ---------------------------------------------------------------- faults

running_here() { ours "$DIR/run/slurmctld.pid" || die "the cluster in $DIR is not up"; }

stop_ctld() {
  running_here
  stop_pidfile slurmctld "$DIR/run/slurmctld.pid"
}

start_ctld() {
  ours "$MUNGE_DIR/munged.pid" || die "the cluster in $DIR is not up (munged is not running)"
  start_slurmctld
  wait_nodes  # the nodes are "unknown" until their slurmd registers again
}

kill_node() {
  local n=$1 pidfile=$DIR/run/slurmd-$1.pid pid
  [[ " ${NODES[*]} " == *" $n "* ]] || die "no node '$n' (nodes: ${NODES[*]})"
  ours "$pidfile" || die "slurmd $n is not running"
  pid=$(pid_of "$pidfile")
  say "killing slurmd $n (pid $pid) with SIGKILL"
  kill -KILL "$pid"
  while [[ -d /proc/$pid && "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]]; do sleep 0.05; done
  rm -f "$pidfile"
}

start_node() {
  local n=$1
  [[ " ${NODES[*]} " == *" $n "* ]] || die "no node '$n' (nodes: ${NODES[*]})"
  running_here
  if ! ours "$DIR/run/slurmd-$n.pid"; then
    need_port "slurmd $n" "$(node_port "$n")"
    say "starting slurmd $n on 127.0.0.1:$(node_port "$n")"
    start_daemon "$DIR/log/slurmd-$n.out" slurmd -N "$n"
  fi
  wait_nodes
}

case "$CMD" in
  up) up ;;
  down) down ;;
  status) status ;;
  stop-ctld) stop_ctld ;;
  start-ctld) start_ctld ;;
  restart-ctld) stop_ctld; start_ctld ;;
  kill-node) kill_node "${NODE_ARG[0]}" ;;
  start-node) start_node "${NODE_ARG[0]}" ;;
esac
