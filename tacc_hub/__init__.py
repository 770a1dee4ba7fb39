"""tacc_hub: a shared GPU cluster run from JupyterHub (schema, compiler, scheduler, executors, service, clients)."""

__version__ = "0.1.0"
