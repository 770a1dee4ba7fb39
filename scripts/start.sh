#!/usr/bin/env bash
# Start tacc_hub on the embedded default: JupyterHub (jupyterhub_config.py) with the tacc service
# as its managed service, the local executor and SQLite, state in ./.tacc. Installs what it needs
# first. Demo users alice and bob, admin "admin"; the password is printed.
#
#   ./scripts/start.sh                      the hub on http://127.0.0.1:$TACC_HUB_PORT (8000)
#   TACC_EXECUTOR=slurm ./scripts/start.sh  tasks and servers on the Slurm dev cluster (scripts/slurm-dev.sh up)
#   ./scripts/start.sh --service [SETTINGS] the service alone on $TACC_PORT (8765), no hub: tacc-hub serve SETTINGS
#   ./scripts/start.sh stop                 stop what one of the above started (same $TACC_STATE_DIR): every
#                                           user's server and every active task (cancelled), then the hub or
#                                           the service; nothing of it is left running (scripts/stop.py)
set -euo pipefail
cd "$(dirname "$0")/.."
export TACC_STATE_DIR="${TACC_STATE_DIR:-$PWD/.tacc}"

if [ "${1:-}" = "stop" ]; then
  [ -x .venv/bin/python ] || { echo "start.sh stop: no .venv here: nothing was started from this checkout" >&2; exit 0; }
  exec .venv/bin/python scripts/stop.py
fi

[ -n "${TACC_NO_BOOTSTRAP:-}" ] || ./scripts/bootstrap.sh  # TACC_NO_BOOTSTRAP=1: the venv is made already (tests)
export PATH="$PWD/.venv/bin:$PATH"
mkdir -p "$TACC_STATE_DIR"
TACC_STATE_DIR=$(cd "$TACC_STATE_DIR" && pwd -P)
user="${USER:-$(id -un)}"

# What `start.sh stop` needs: what runs (this shell's pid: it execs the hub or the service), where,
# and a token of the service's own that may cancel every task.
record_running() {  # record_running MODE TACC_URL [HUB_API ADMIN]
  if [ -f "$TACC_STATE_DIR/running.json" ]; then
    old=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$TACC_STATE_DIR/running.json" 2>/dev/null || true)
    if [ -n "$old" ] && [ -d "/proc/$old" ] && tr '\0' ' ' <"/proc/$old/cmdline" | grep -qE 'jupyterhub|tacc-hub'; then
      echo "start.sh: tacc_hub already runs from $TACC_STATE_DIR (pid $old); ./scripts/start.sh stop first" >&2
      exit 1
    fi
  fi
  # a new one at each start: the store may have been reset since the last
  (umask 077 && tacc-hub token admin --admin --note "scripts/start.sh stop" > "$TACC_STATE_DIR/stop-token")
  python - "$TACC_STATE_DIR/running.json" "$$" "$1" "$2" "${3:-}" "${4:-}" "$PWD" <<'PY'
import json, sys
path, pid, mode, url, hub_api, admin, repo = sys.argv[1:]
rec = {"pid": int(pid), "mode": mode, "tacc_url": url, "hub_api": hub_api, "admin": admin, "repo": repo,
       "config": f"{repo}/jupyterhub_config.py"}
open(path, "w").write(json.dumps(rec) + "\n")
PY
}

if [ "${1:-}" = "--service" ]; then
  shift
  port="${TACC_PORT:-8765}"
  token=$(tacc-hub token "$user" --note "scripts/start.sh")
  admin=$(tacc-hub token admin --admin --note "scripts/start.sh")
  record_running service "http://127.0.0.1:$port"
  cat <<MSG
tacc_hub (service only) is starting (state in $TACC_STATE_DIR). In another shell:

  export PATH="$PWD/.venv/bin:\$PATH" TACC_URL=http://127.0.0.1:$port
  export TACC_TOKEN=$token      # you ($user)
  # admin token: $admin
  tcloud submit examples/ddp -f

Stop it with: ./scripts/start.sh stop

MSG
  exec tacc-hub serve --port="$port" "$@"
fi

hub_port="${TACC_HUB_PORT:-8000}"
pwfile="$TACC_STATE_DIR/demo-password"
if [ -z "${TACC_DEMO_PASSWORD:-}" ]; then
  [ -s "$pwfile" ] || (umask 077 && python -c 'import secrets; print(secrets.token_urlsafe(9))' > "$pwfile")
  TACC_DEMO_PASSWORD=$(cat "$pwfile")
fi
export TACC_DEMO_PASSWORD
token=$(tacc-hub token "$user" --note "scripts/start.sh")
admin_user=$(echo "${TACC_DEMO_ADMINS:-admin}" | cut -d, -f1 | tr -d ' ')
record_running hub "http://127.0.0.1:${TACC_PORT:-8765}/services/tacc" "http://127.0.0.1:$((hub_port + 81))" "$admin_user"
cat <<MSG
tacc_hub is starting under JupyterHub (state in $TACC_STATE_DIR).

  Open http://127.0.0.1:$hub_port/ and log in as alice or bob (admin: admin),
  password: $TACC_DEMO_PASSWORD
  Services menu -> tacc: the service in your browser.

From a shell (a token of the service's own; tokens made on the hub's token page with the
scope custom:tacc:tasks work too):

  export PATH="$PWD/.venv/bin:\$PATH" TACC_URL=http://127.0.0.1:$hub_port/services/tacc
  export TACC_TOKEN=$token      # you ($user)
  tcloud submit examples/ddp -f

Stop everything (users' servers, tasks, the hub) with: ./scripts/start.sh stop

MSG
exec jupyterhub -f jupyterhub_config.py
