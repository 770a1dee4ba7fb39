#!/usr/bin/env bash
# Start tacc_hub on the embedded default: JupyterHub (jupyterhub_config.py) with the tacc service
# as its managed service, the local executor and SQLite, state in ./.tacc. Installs what it needs
# first. Demo users alice and bob, admin "admin"; the password is printed.
#
#   ./scripts/start.sh                      the hub on http://127.0.0.1:$TACC_HUB_PORT (8000)
#   TACC_EXECUTOR=slurm ./scripts/start.sh  tasks and servers on the Slurm dev cluster (scripts/slurm-dev.sh up)
#   ./scripts/start.sh --service [SETTINGS] the service alone on $TACC_PORT (8765), no hub: tacc-hub serve SETTINGS
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
export TACC_STATE_DIR="${TACC_STATE_DIR:-$PWD/.tacc}"
mkdir -p "$TACC_STATE_DIR"
user="${USER:-$(id -un)}"

if [ "${1:-}" = "--service" ]; then
  shift
  port="${TACC_PORT:-8765}"
  token=$(tacc-hub token "$user" --note "scripts/start.sh")
  admin=$(tacc-hub token admin --admin --note "scripts/start.sh")
  cat <<MSG
tacc_hub (service only) is starting (state in $TACC_STATE_DIR). In another shell:

  export PATH="$PWD/.venv/bin:\$PATH" TACC_URL=http://127.0.0.1:$port
  export TACC_TOKEN=$token      # you ($user)
  # admin token: $admin
  tcloud submit examples/ddp -f

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

MSG
exec jupyterhub -f jupyterhub_config.py
