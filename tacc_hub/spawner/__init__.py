"""JupyterHub integration: TaccSpawner (single-user servers as tacc tasks) and the idle-culler config.

Entry point ``tacc`` in ``jupyterhub.spawners``: ``c.JupyterHub.spawner_class = "tacc"``.
"""

from .spawner import TaccSpawner

__all__ = ["TaccSpawner"]
