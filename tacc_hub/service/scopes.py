"""The JupyterHub custom scopes that are tacc_hub's permissions (see docs/hub.md)."""

TASKS_SCOPE = "custom:tacc:tasks"  # submit tasks; read and cancel one's own; one's quota; the cluster view
ADMIN_SCOPE = "custom:tacc:admin"  # everything: everyone's tasks, quotas and groups
METRICS_SCOPE = "custom:tacc:metrics"  # read /metrics (Prometheus); ADMIN_SCOPE holders may read it too
