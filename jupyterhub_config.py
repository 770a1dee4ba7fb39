"""JupyterHub with tacc_hub: the hub that ``scripts/start.sh`` starts (see docs/hub.md).

The embedded default needs nothing but this repository: the tacc service runs under the hub
as the managed service ``tacc`` (local executor, SQLite, state in ``$TACC_STATE_DIR``), users'
servers are tacc tasks (TaccSpawner), and demo users log in with the demo password.

Environment (all optional):
  TACC_HUB_PORT       the hub's public port (8000)
  TACC_PORT           the service's own port behind the proxy (8765)
  TACC_STATE_DIR      tacc's state (0700, the service's alone); the hub keeps its own files in
                      $TACC_STATE_DIR/hub (./.tacc)
  TACC_TASK_IDENTITY  owner: each user's tasks and Jupyter server run as their Unix account (the default
                      when run as root from a checkout every account can read); service: all of them as
                      this hub's own account, one person only (the default otherwise, with a warning)
  TACC_DATA_DIR       the service's data_dir: tasks' folders and users' folders (users/<name>, each one's
                      TACC_USERDIR and server root). Default: $TACC_STATE_DIR-data, except when that is in
                      this checkout (or, for owner, out of other accounts' reach): then
                      /var/lib/tacc-hub/demo/<checkout>-<state>-<hash> (owner) or
                      ${XDG_DATA_HOME:-~/.local/share}/tacc-hub/demo/<checkout>-<state>-<hash> (service)
  TACC_DEMO_USERS     demo users, comma separated (alice,bob); admins: TACC_DEMO_ADMINS (admin)
  TACC_DEMO_PASSWORD  the demo users' password (unset: any password, as DummyAuthenticator)
  TACC_GPUS           GPU slots of the local executor (4; fake ones where the machine has none)
  TACC_EXECUTOR       local (default) or slurm: the Slurm dev cluster of scripts/slurm-dev.sh,
                      whose slurm.conf is $SLURM_CONF (default ./.slurm-dev/etc/slurm.conf)
  TACC_CULL_IDLE_AFTER  seconds after which an idle server is stopped (28800: TACC's 8 hours; 0: never)
  TACC_HUB_SPAWNER      spawner of users' servers: tacc (TaccSpawner: servers are tacc tasks), or
                        another JupyterHub spawner (simple: plain local processes)
  TACC_PROMETHEUS_TOKEN the API token of a hub service 'prometheus' that may read the metrics
                        (custom:tacc:metrics, read:metrics); unset: no such service (docs/metrics.md)
"""

# ruff: noqa: F821  (``get_config`` is injected by traitlets when JupyterHub loads this file)
from __future__ import annotations

import os
import sys
from pathlib import Path

from tacc_hub.hub.config import demo_data_dir, demo_identity, hub_settings, service_warning

c = get_config()  # type: ignore[name-defined]

here = Path(__file__).resolve().parent
state_dir = Path(os.environ.get("TACC_STATE_DIR") or here / ".tacc")
identity, why = demo_identity(here, sys.executable, os.environ)  # scripts/start.sh decided it already
if identity == "service" and not os.environ.get("TACC_TASK_IDENTITY"):
    print(service_warning(why), file=sys.stderr)
settings = hub_settings(
    repo=here,
    python=sys.executable,
    hub_port=int(os.environ.get("TACC_HUB_PORT", "8000")),
    service_port=int(os.environ.get("TACC_PORT", "8765")),
    state_dir=state_dir,
    data_dir=demo_data_dir(here, state_dir, os.environ, identity),
    task_identity=identity,
    users=os.environ.get("TACC_DEMO_USERS", "alice,bob"),
    admins=os.environ.get("TACC_DEMO_ADMINS", "admin"),
    password=os.environ.get("TACC_DEMO_PASSWORD"),
    executor=os.environ.get("TACC_EXECUTOR", "local"),
    spawner=os.environ.get("TACC_HUB_SPAWNER", "tacc"),
    slurm_conf=os.environ.get("SLURM_CONF"),
    local_gpus=int(os.environ.get("TACC_GPUS", "4")),
    cull_idle_after=int(os.environ.get("TACC_CULL_IDLE_AFTER", str(8 * 3600))),
    prometheus_token=os.environ.get("TACC_PROMETHEUS_TOKEN") or None,
)
for section, values in settings.items():
    for key, value in values.items():
        setattr(getattr(c, section), key, value)
