"""/etc/jupyterhub/jupyterhub_config.py: JupyterHub in production, with the tacc service as an external service.

The hub's environment has JupyterHub and the spawner package only (spawner/: ``pip install
/opt/tacc-hub/src/spawner``), not tacc_hub: nothing here imports it. The tacc service runs on its own
(deploy/systemd/tacc-hub.service, its own account); the hub knows it by URL and token. The scopes and
roles are those of the README's hub (tacc_hub/hub/config.py), which tests/unit/test_deploy_files.py
checks this file against.
"""

# ruff: noqa: F821  (``get_config`` is injected by traitlets when JupyterHub loads this file)

import os

from tacc_spawner.culler import idle_culler

c = get_config()  # type: ignore[name-defined]

PUBLIC_URL = "https://hub.example.edu"  # what users' browsers open (TLS ends at a reverse proxy in front)
TACC_URL = "http://127.0.0.1:8765"  # the tacc service (c.TaccHub.ip / port in /etc/tacc-hub/tacc_hub_config.py)
TASKS_SCOPE = "custom:tacc:tasks"
ADMIN_SCOPE = "custom:tacc:admin"
METRICS_SCOPE = "custom:tacc:metrics"  # read /services/tacc/metrics (docs/metrics.md)
ADMINS = {"admin"}  # hub admins, and cluster admins (quotas, everyone's tasks)

c.JupyterHub.bind_url = "http://127.0.0.1:8000"  # behind the TLS proxy
c.JupyterHub.hub_bind_url = "http://127.0.0.1:8081"  # the service's JUPYTERHUB_API_URL points here
# Users' servers run on the compute nodes as tacc tasks: the address where they reach the hub's API.
# c.JupyterHub.hub_bind_url = "http://0.0.0.0:8081"
# c.JupyterHub.hub_connect_url = "http://hub.cluster.internal:8081"
c.JupyterHub.db_url = "sqlite:////var/lib/jupyterhub/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "/var/lib/jupyterhub/jupyterhub_cookie_secret"  # noqa: S105 (a path)
c.ConfigurableHTTPProxy.command = ["/opt/jupyterhub/node/node_modules/.bin/configurable-http-proxy"]
c.ConfigurableHTTPProxy.pid_file = "/var/lib/jupyterhub/proxy.pid"

# Hub users are Unix accounts on the cluster (same name, or c.TaccHub.username_map). The hub runs as its own
# unprivileged account: an authenticator that needs no root (not PAM), e.g.
# c.JupyterHub.authenticator_class = "generic-oauth"
c.Authenticator.admin_users = ADMINS

# Users' servers are tacc tasks (entry point `tacc` of the spawner package), run as their owners.
c.JupyterHub.spawner_class = "tacc"
c.TaccSpawner.tacc_url = f"{TACC_URL}/services/tacc"  # the service directly: one hop less per poll
# Servers outlive a hub restart (the hub finds them again from each spawner's saved task id).
c.JupyterHub.cleanup_servers = False
c.Spawner.default_url = "/lab"
# What a server's $JUPYTERHUB_API_TOKEN may do: the hub's defaults plus tacc's tasks (tcloud, %tacc and the
# Lab panel inside the server).
c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", TASKS_SCOPE,
                                 "access:services!service=tacc"]
c.Spawner.environment = {"TACC_URL": f"{PUBLIC_URL}/services/tacc"}

c.JupyterHub.custom_scopes = {
    TASKS_SCOPE: {"description": "Submit tasks to the GPU cluster, and read and cancel one's own."},
    ADMIN_SCOPE: {"description": "Administer the GPU cluster: everyone's tasks, quotas and groups."},
    METRICS_SCOPE: {"description": "Read the GPU cluster's Prometheus metrics (/services/tacc/metrics)."},
}
c.JupyterHub.services = [{
    "name": "tacc",
    "display": True,
    "info": {"description": "GPU cluster tasks, queue and quotas"},
    "url": TACC_URL,  # external: the hub proxies /services/tacc/ there and starts nothing
    "api_token": os.environ["TACC_SERVICE_API_TOKEN"],  # /etc/jupyterhub/jupyterhub.env (0600)
    "oauth_no_confirm": True,
    "oauth_client_allowed_scopes": [TASKS_SCOPE, ADMIN_SCOPE],
}]
c.JupyterHub.load_roles = [
    {"name": "user", "description": "Every user: their own server and tasks.",
     "scopes": ["self", TASKS_SCOPE, "access:services!service=tacc"]},
    {"name": "tacc-admins", "description": "Cluster admins (the hub's admins are given this role too).",
     "scopes": [ADMIN_SCOPE, TASKS_SCOPE, METRICS_SCOPE, "access:services!service=tacc"], "users": sorted(ADMINS)},
]
# Prometheus scrapes /services/tacc/metrics (and the hub's /hub/metrics) as the hub service "prometheus", with
# this token in its credentials_file (deploy/prometheus/prometheus.yml, docs/metrics.md).
if os.environ.get("TACC_PROMETHEUS_TOKEN"):
    c.JupyterHub.services.append({"name": "prometheus", "api_token": os.environ["TACC_PROMETHEUS_TOKEN"]})
    c.JupyterHub.load_roles.append({"name": "prometheus", "description": "Prometheus: reads the metrics.",
                                    "scopes": [METRICS_SCOPE, "read:metrics"], "services": ["prometheus"]})

# TACC's rule: a server idle for 8 hours is stopped (jupyterhub-idle-culler, a hub-managed service).
culler, culler_role = idle_culler(8 * 3600)
c.JupyterHub.services.append(culler)
c.JupyterHub.load_roles.append(culler_role)
