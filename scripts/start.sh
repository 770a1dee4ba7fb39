#!/usr/bin/env bash
# Start tacc_hub on the embedded default: the service with the local executor and SQLite,
# state in ./.tacc. Installs what it needs first. Prints an API token for you and one for
# an admin. Port from $TACC_PORT (8765); extra arguments are settings: ./scripts/start.sh --gpus 2
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
export TACC_STATE_DIR="${TACC_STATE_DIR:-$PWD/.tacc}"
user="${USER:-$(id -un)}"
token=$(tacc-hub token "$user" --note "scripts/start.sh")
admin=$(tacc-hub token admin --admin --note "scripts/start.sh")
port="${TACC_PORT:-8765}"
cat <<MSG
tacc_hub is starting (state in $TACC_STATE_DIR). In another shell:

  export PATH="$PWD/.venv/bin:\$PATH" TACC_URL=http://127.0.0.1:$port
  export TACC_TOKEN=$token      # you ($user)
  # admin token: $admin
  tcloud submit examples/ddp -f

MSG
exec tacc-hub serve --port="$port" "$@"
