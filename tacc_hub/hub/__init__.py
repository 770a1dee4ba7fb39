"""JupyterHub integration: the hub's configuration for tacc_hub (see docs/hub.md)."""
