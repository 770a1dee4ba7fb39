#!/usr/bin/env bash
# Build the JupyterLab 4 side panel (labextension/ -> tacc_hub/labextension/, shipped in the wheel).
#
#   scripts/build-labextension.sh              build (tsc && jupyter labextension build .)
#   scripts/build-labextension.sh --if-stale   build only when the sources' hash differs from the one
#                                              recorded with the committed bundle (no Node needed otherwise)
#   scripts/build-labextension.sh --test       install the JS dependencies and run the jest suite
#   scripts/build-labextension.sh --check      exit 1 when the committed bundle is not built from these sources
#
# Installs Debian's nodejs and npm with apt when `node` is missing (as root, or through sudo;
# otherwise it stops and prints the command to run as root). jlpm (JupyterLab's yarn) comes
# with the jupyterlab Python package (.venv/bin after scripts/bootstrap.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EXT=labextension
OUT=tacc_hub/labextension
HASH_FILE=$OUT/source-hash.txt
[ -d .venv/bin ] && export PATH="$ROOT/.venv/bin:$PATH"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

source_hash() {
  (cd "$EXT" && find package.json .yarnrc.yml tsconfig.json install.json src style -type f | LC_ALL=C sort \
     | xargs sha256sum | sha256sum | cut -d' ' -f1)
}

ensure_node() {
  command -v node >/dev/null 2>&1 || apt_install "(Node.js, to build the Lab panel)" nodejs npm
  command -v jlpm >/dev/null 2>&1 || { echo "build-labextension: jlpm not found (pip install jupyterlab)" >&2; exit 1; }
}

ensure_deps() {
  ensure_node
  local state=$EXT/node_modules/.yarn-state.yml
  if [ ! -f "$state" ] || [ "$EXT/package.json" -nt "$state" ] || [ "$EXT/yarn.lock" -nt "$state" ]; then
    echo "build-labextension: installing JS dependencies (jlpm install)"
    (cd "$EXT" && jlpm install --mode=skip-build >/dev/null) || (cd "$EXT" && jlpm install)
  fi
}

build() {
  ensure_deps
  echo "build-labextension: building $OUT"
  (cd "$EXT" && jlpm tsc && jupyter labextension build . >/dev/null)
  cp "$EXT/install.json" "$OUT/install.json"
  source_hash > "$HASH_FILE"
}

case "${1:-}" in
  --if-stale)
    if [ -f "$HASH_FILE" ] && [ -f "$OUT/package.json" ] && [ "$(cat "$HASH_FILE")" = "$(source_hash)" ]; then
      exit 0
    fi
    build ;;
  --check)
    [ -f "$HASH_FILE" ] && [ "$(cat "$HASH_FILE")" = "$(source_hash)" ] || {
      echo "build-labextension: $OUT is not built from the current sources: run scripts/build-labextension.sh" >&2
      exit 1; } ;;
  --test)
    ensure_deps
    (cd "$EXT" && jlpm test --ci) ;;
  "") build ;;
  *) echo "usage: $0 [--if-stale|--check|--test]" >&2; exit 2 ;;
esac
