"""/etc/tacc-hub/tacc_hub_config.py: the tacc service in production (deploy/systemd/tacc-hub.service loads it).

Every setting is TaccHub's (``tacc-hub config-doc`` prints them all, docs/config.md). The service runs as
its own account ``tacc`` behind JupyterHub, which knows it as the external service ``tacc``
(deploy/jupyterhub_config.py). The paths below are the ones deploy/systemd/tacc-hub.service and
deploy/sudoers.d/tacc-hub name: change them together (tests/unit/test_deploy_files.py checks that
they agree).
"""

# ruff: noqa: F821  (``get_config`` is injected by traitlets when the service loads this file)

c = get_config()  # type: ignore[name-defined]

# Callers are identified by JupyterHub (its tokens and OAuth); the unit's environment says where the hub is.
c.TaccHub.auth = "hub"
# Where the hub and its proxy reach the service (the hub's config has the same URL). A hub on another
# host: 0.0.0.0, with the port open to the hub's host only.
c.TaccHub.ip = "127.0.0.1"
c.TaccHub.port = 8765

# The service's own files (0700, tacc's): the database (SQLite only), tokens, cookie secret, code store and
# run/, the control files tacc-launcher reads (the sudoers rule names /var/lib/tacc-hub/state/run).
c.TaccHub.state_dir = "/var/lib/tacc-hub/state"
# What tasks see (0711): tasks/<id>/ (each owned by the task's user, 0700), users/<account>/, envs/<account>/.
# On Slurm: a shared filesystem that the nodes see at the same path, e.g. /shared/tacc-hub/data.
c.TaccHub.data_dir = "/var/lib/tacc-hub/data"

# PostgreSQL (the postgres extra: psycopg) over the local socket with peer authentication: the Unix account
# tacc is the database role tacc, no password to keep.
#     createuser tacc && createdb --owner=tacc tacc        (as postgres)
c.TaccHub.db_url = "postgresql+psycopg://tacc@/tacc?host=/var/run/postgresql"

# Every task (and every user's Jupyter server) runs as its owner's Unix account: hub user -> account by
# name, or through username_map. Accounts below min_task_uid never run tasks.
c.TaccHub.task_identity = "owner"
c.TaccHub.username_map = {}
c.TaccHub.min_task_uid = 1000
# launcher_command: left to its default, ["sudo", "-n", "/opt/tacc-hub/venv/bin/tacc-launcher"] (the venv's,
# as the sudoers rule has it).

# The local executor: the GPUs of this machine.
c.TaccHub.local_gpus = 8

# Slurm instead (jobs submitted and cancelled as their owners through sudo: deploy/sudoers.d/tacc-hub):
# c.TaccHub.executor = "slurm"
# c.TaccHub.slurm_conf = "/etc/slurm/slurm.conf"
# c.TaccHub.slurm_partition = "gpu"
# c.TaccHub.slurm_account_map = {"*": "{group}"}     # tacc group -> sbatch --account (sacct, sreport)
# c.TaccHub.slurm_qos_map = {}                        # tacc group -> sbatch --qos
# c.TaccHub.slurm_node_python = "/opt/tacc-hub/venv/bin/python"   # the same path on every node
# c.TaccHub.data_dir = "/shared/tacc-hub/data"
