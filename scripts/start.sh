#!/usr/bin/env bash
# Start tacc_hub on the embedded default: JupyterHub (jupyterhub_config.py) with the tacc service
# as its managed service, the local executor and SQLite, state in ./.tacc. Installs what it needs
# first. Demo users alice and bob, admin "admin"; the password is printed.
#
# Run as root from a checkout every account can read (not under /root: e.g. /srv or /opt), each
# user's tasks and Jupyter server run as that user's Unix account (TaccHub.task_identity=owner): the
# demo users' accounts are created (useradd --create-home) when missing. Otherwise every task runs as
# the account that runs this script (task_identity=service, one person only), with a warning saying
# why. TACC_TASK_IDENTITY=owner|service decides instead; TACC_DATA_DIR: the tasks' and users' folders
# (default: outside the checkout, /var/lib/tacc-hub/demo/... for owner; see jupyterhub_config.py).
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
chmod 700 "$TACC_STATE_DIR"  # the store, tokens, secrets: this account's alone
TACC_STATE_DIR=$(cd "$TACC_STATE_DIR" && pwd -P)
user="${USER:-$(id -un)}"

# Who tasks run as, and where their folders live (tacc_hub/hub/config.py decides, as jupyterhub_config.py).
demo_env=$(python -m tacc_hub.hub.config demo-env "$PWD" "$TACC_STATE_DIR")
eval "$demo_env"
export TACC_TASK_IDENTITY TACC_DATA_DIR
demo_users=$(echo "${TACC_DEMO_USERS:-alice,bob},${TACC_DEMO_ADMINS:-admin}" | tr ',' '\n' | tr -d ' ' | awk 'NF && !seen[$0]++')
first_user=$(echo "${TACC_DEMO_USERS:-alice,bob}" | cut -d, -f1 | tr -d ' ')
if [ "$TACC_TASK_IDENTITY" = owner ]; then
  for u in $demo_users; do
    id -u "$u" >/dev/null 2>&1 && continue
    [ "$(id -u)" = 0 ] || { echo "start.sh: error: hub user $u has no Unix account, and only root can create it" >&2; exit 1; }
    useradd --create-home --shell /bin/bash "$u"
    echo "start.sh: created the Unix account $u (useradd --create-home): hub user $u's tasks and Jupyter server run as it" >&2
  done
  echo "start.sh: each user's tasks and Jupyter server run as their own Unix account (TaccHub.task_identity=owner); users' folders: $TACC_DATA_DIR/users/<name>" >&2
  token_user=${first_user:-$user}
  token_note="$token_user (tasks run as the Unix account $token_user; $user's own would be refused)"
  [ "$token_user" != "$user" ] || token_note="you ($user)"
else
  echo "start.sh: $TACC_IDENTITY_WARNING" >&2
  token_user=$user
  token_note="you ($user)"
fi
(umask 022 && mkdir -p "$TACC_DATA_DIR")

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
  python - "$TACC_STATE_DIR/running.json" "$$" "$1" "$2" "${3:-}" "${4:-}" "$PWD" "$TACC_DATA_DIR" <<'PY'
import json, sys
path, pid, mode, url, hub_api, admin, repo, data_dir = sys.argv[1:]
rec = {"pid": int(pid), "mode": mode, "tacc_url": url, "hub_api": hub_api, "admin": admin, "repo": repo,
       "config": f"{repo}/jupyterhub_config.py", "data_dir": data_dir}
open(path, "w").write(json.dumps(rec) + "\n")
PY
}

if [ "${1:-}" = "--service" ]; then
  shift
  port="${TACC_PORT:-8765}"
  token=$(tacc-hub token "$token_user" --note "scripts/start.sh")
  admin=$(tacc-hub token admin --admin --note "scripts/start.sh")
  record_running service "http://127.0.0.1:$port"
  cat <<MSG
tacc_hub (service only) is starting (state in $TACC_STATE_DIR). In another shell:

  export PATH="$PWD/.venv/bin:\$PATH" TACC_URL=http://127.0.0.1:$port
  export TACC_TOKEN=$token      # $token_note
  # admin token: $admin
  tcloud submit examples/ddp -f

Stop it with: ./scripts/start.sh stop
${TACC_IDENTITY_WARNING:+
$TACC_IDENTITY_WARNING
}
MSG
  exec tacc-hub serve --port="$port" "${identity_flags[@]}" --TaccHub.data_dir="$TACC_DATA_DIR" "$@"
fi

hub_port="${TACC_HUB_PORT:-8000}"
pwfile="$TACC_STATE_DIR/demo-password"
if [ -z "${TACC_DEMO_PASSWORD:-}" ]; then
  [ -s "$pwfile" ] || (umask 077 && python -c 'import secrets; print(secrets.token_urlsafe(9))' > "$pwfile")
  TACC_DEMO_PASSWORD=$(cat "$pwfile")
fi
export TACC_DEMO_PASSWORD
token=$(tacc-hub token "$token_user" --note "scripts/start.sh")
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
  export TACC_TOKEN=$token      # $token_note
  tcloud submit examples/ddp -f

Stop everything (users' servers, tasks, the hub) with: ./scripts/start.sh stop
${TACC_IDENTITY_WARNING:+
$TACC_IDENTITY_WARNING
}
MSG
exec jupyterhub -f jupyterhub_config.py
