#!/usr/bin/env bash
# Install tacc_hub and everything its tests and examples need into ./.venv (idempotent).
# Needs Python >= 3.11 as $PYTHON or python3. torch is pinned to 2.13.0 (a CPU wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for cand in "${PYTHON:-}" python3.11 python3 python; do
    [ -n "$cand" ] || continue
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$cand"; return 0
    fi
  done
  echo "bootstrap: Python 3.11 or newer is required (set PYTHON=...)" >&2
  return 1
}

if [ ! -x .venv/bin/python ]; then
  py=$(pick_python)
  # Resolve pyenv shims to the real interpreter: tasks must not go through a shell shim.
  real=$("$py" -c 'import sys; print(sys.executable)')
  echo "bootstrap: creating .venv with $real"
  "$real" -m venv .venv
fi
stamp=.venv/.tacc-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,examples,jupyter,hub]'
  touch "$stamp"
fi

# The scheduler's hot modules, compiled with mypyc (1.4-1.6x faster replays; same decisions).
# Rebuilt only when their sources change; without a compiler they run as Python.
# Needs a C compiler and Python's headers (Debian's python3.X-dev for Debian's Python; pyenv builds have them).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  pkgs=""
  command -v cc >/dev/null 2>&1 || pkgs="gcc libc6-dev"
  inc=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  if [ ! -f "$inc/Python.h" ] && [ "${inc#/usr/include/}" != "$inc" ]; then
    pkgs="$pkgs python$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev"
  fi
  if [ -n "$pkgs" ]; then
    echo "bootstrap: installing $pkgs (Debian packages) to compile the scheduler"
    apt-get update -qq && apt-get install -y -qq $pkgs >/dev/null
  fi
fi
./scripts/build-native.sh --if-stale

# The hub's proxy: npm's configurable-http-proxy (JupyterHub's own). The pure-Python one on PyPI
# holds whole responses, so live logs (server-sent events) would arrive only at the end.
chp=.venv/node/node_modules/.bin/configurable-http-proxy
if [ ! -x "$chp" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "bootstrap: installing Node.js and npm (Debian packages) for the hub's proxy and the Lab panel"
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    else sudo apt-get update -qq && sudo apt-get install -y -qq nodejs npm >/dev/null; fi
  fi
  npm install --prefix .venv/node --no-audit --no-fund --silent configurable-http-proxy@5.3
fi

# The JupyterLab side panel: rebuilt only when labextension/'s sources differ from the committed
# bundle's (needs Node then; the script installs Debian's nodejs and npm when node is missing).
./scripts/build-labextension.sh --if-stale
# An editable install copies the bundle into the venv's share/jupyter; link it to the checkout's build
# instead, so that a rebuild is what Lab loads (`jupyter labextension list` shows it enabled).
labext=.venv/share/jupyter/labextensions/tacc-hub-labextension
if [ "$(readlink "$labext" 2>/dev/null)" != "$PWD/tacc_hub/labextension" ]; then
  mkdir -p "$(dirname "$labext")"
  rm -rf "$labext"
  ln -s "$PWD/tacc_hub/labextension" "$labext"
fi
