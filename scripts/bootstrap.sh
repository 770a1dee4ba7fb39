#!/usr/bin/env bash
# Install tacc_hub and everything its tests and examples need into ./.venv (idempotent).
#
# Python: $PYTHON when set, else Debian's /usr/bin/python3 when it is 3.11 or newer, else the first
# python3.11 / python3 / python on PATH that is. On Debian the missing pieces are installed with apt
# (python3.X-venv for ensurepip, gcc and python3.X-dev to compile the scheduler, nodejs and npm for the
# hub's proxy and the Lab panel): as root directly, through sudo where it is installed; otherwise the
# script stops and prints the apt-get command to run as root.
#
# torch (the DDP example, examples/ddp), pinned to 2.13.0, is chosen with TACC_TORCH (remembered in
# .venv for later runs):
#   TACC_TORCH=pypi  (default) PyPI's torch==2.13.0: on Linux the CUDA build (about 5 GB installed)
#   TACC_TORCH=cpu   the CPU-only build from https://download.pytorch.org/whl/cpu (about 1.5 GB): for
#                    machines without NVIDIA GPUs
#   TACC_TORCH=none  no torch: everything but the DDP example works
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
say() { echo "bootstrap: $*" >&2; }
took() { [ $((SECONDS - t_step)) -lt 2 ] || say "$1 took $((SECONDS - t_step)) s"; t_step=$SECONDS; }  # slow steps' times
t_step=$SECONDS

TORCH_VERSION=2.13.0  # as pinned by pyproject.toml's examples extra
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
torch_file=.venv/.tacc-torch
torch=${TACC_TORCH:-$(cat "$torch_file" 2>/dev/null || echo pypi)}
case "$torch" in
  pypi | cpu | none) ;;
  *) lib_die "TACC_TORCH must be pypi, cpu or none, not '$torch'" ;;
esac

ok_python() { "$1" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' 2>/dev/null; }

pick_python() {
  local cand
  if [ -n "${PYTHON:-}" ]; then
    ok_python "$PYTHON" || lib_die "PYTHON=$PYTHON is not Python 3.11 or newer"
    command -v "$PYTHON"; return 0
  fi
  for cand in /usr/bin/python3 python3.11 python3 python; do
    if command -v "$cand" >/dev/null 2>&1 && ok_python "$cand"; then
      command -v "$cand"; return 0
    fi
  done
  lib_die "Python 3.11 or newer is required (on Debian 12: apt-get install python3; or set PYTHON=...)"
}

# A venv is usable when its interpreter runs pip; anything else (a venv left half-made by a failed
# `python -m venv`, an interpreter that went away) is removed and made again.
venv_ok() { [ -x .venv/bin/python ] && .venv/bin/python -m pip --version >/dev/null 2>&1; }

make_venv() {
  local py real ver
  py=$(pick_python)
  # Resolve pyenv shims to the real interpreter: tasks must not go through a shell shim.
  real=$("$py" -c 'import sys; print(sys.executable)')
  ver=$("$real" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "${real#/usr/bin/}" != "$real" ] && command -v dpkg-query >/dev/null 2>&1; then
    # Debian's Python: ensurepip (which venv needs) is the separate package python3.X-venv.
    apt_install "(ensurepip, which python3 -m venv needs)" "python$ver-venv"
  elif ! "$real" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    lib_die "$real has no ensurepip/venv module: install it, or set PYTHON to a Python that has it"
  fi
  say "creating .venv with $real (Python $("$real" -c 'import platform; print(platform.python_version())'))"
  if ! "$real" -m venv .venv; then
    rm -rf .venv
    lib_die "$real -m venv failed (see above); the half-made .venv was removed"
  fi
}

if ! venv_ok; then
  [ -e .venv ] && { say ".venv is not usable (no working pip): making it again"; rm -rf .venv; }
  make_venv
  took "making .venv"
fi

stamp=.venv/.tacc-installed
extras=test,jupyter,hub
[ "$torch" = none ] || extras=$extras,examples  # examples: torch (pinned in pyproject.toml) and numpy
want="extras=$extras torch=$torch"
# (an empty stamp: made before TACC_TORCH, with PyPI's torch)
[ -f "$stamp" ] && [ ! -s "$stamp" ] && [ "$torch" = pypi ] && [ ! pyproject.toml -nt "$stamp" ] && echo "$want" > "$stamp"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ spawner/pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  pip_install() { .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@"; }
  pip_install --upgrade pip
  case "$torch" in
    pypi) say "installing torch==$TORCH_VERSION from PyPI (on Linux the CUDA build, several GB; TACC_TORCH=cpu or none to avoid it)" ;;
    cpu)  say "installing torch==$TORCH_VERSION+cpu from $TORCH_CPU_INDEX"
          # the examples extra's torch==$TORCH_VERSION is then satisfied by this build
          pip_install --extra-index-url "$TORCH_CPU_INDEX" "torch==$TORCH_VERSION+cpu"
          took "torch (cpu)" ;;
    none) say "TACC_TORCH=none: not installing torch (the DDP example, examples/ddp, needs it)" ;;
  esac
  # TaccSpawner is a package of its own (spawner/: what a hub elsewhere installs), installed beside tacc_hub
  pip_install -e ".[$extras]" -e ./spawner
  took "pip install -e .[$extras] -e ./spawner"
  echo "$torch" > "$torch_file"
  echo "$want" > "$stamp"
fi

# The scheduler's hot modules, compiled with mypyc (1.4-1.6x faster replays; same decisions).
# Rebuilt only when their sources change; without a compiler they run as Python.
# Needs a C compiler and Python's headers (Debian's python3.X-dev for Debian's Python; pyenv builds have them).
if command -v apt-get >/dev/null 2>&1; then
  pkgs=()
  command -v cc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev)
  inc=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  if [ ! -f "$inc/Python.h" ] && [ "${inc#/usr/include/}" != "$inc" ]; then
    pkgs+=("python$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev")
  fi
  [ ${#pkgs[@]} -eq 0 ] || apt_try_install "to compile the scheduler (it runs as Python without them)" "${pkgs[@]}" || true
fi
./scripts/build-native.sh --if-stale
took "the compiled scheduler"

# The hub's proxy: npm's configurable-http-proxy (JupyterHub's own). The pure-Python one on PyPI
# holds whole responses, so live logs (server-sent events) would arrive only at the end.
chp=.venv/node/node_modules/.bin/configurable-http-proxy
if [ ! -x "$chp" ]; then
  command -v npm >/dev/null 2>&1 || apt_install "for the hub's proxy and the Lab panel" nodejs npm
  npm install --prefix .venv/node --no-audit --no-fund --silent configurable-http-proxy@5.3
  took "the proxy (npm)"
fi

# The JupyterLab side panel: rebuilt only when labextension/'s sources differ from the committed
# bundle's (needs Node then; the script installs Debian's nodejs and npm when node is missing).
./scripts/build-labextension.sh --if-stale
took "the Lab panel"
# An editable install copies the bundle into the venv's share/jupyter; link it to the checkout's build
# instead, so that a rebuild is what Lab loads (`jupyter labextension list` shows it enabled).
labext=.venv/share/jupyter/labextensions/tacc-hub-labextension
if [ "$(readlink "$labext" 2>/dev/null)" != "$PWD/tacc_hub/labextension" ]; then
  mkdir -p "$(dirname "$labext")"
  rm -rf "$labext"
  ln -s "$PWD/tacc_hub/labextension" "$labext"
fi
