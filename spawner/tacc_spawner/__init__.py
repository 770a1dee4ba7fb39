"""tacc_spawner: JupyterHub's side of tacc_hub, TaccSpawner (single-user servers as tacc tasks) and the idle culler.

A package of its own (distribution ``tacc-hub-spawner``, in ``spawner/`` of the tacc_hub repository),
installed into the hub's environment: it needs JupyterHub (and tornado, which JupyterHub brings) and
talks to the tacc service over its REST API only, so the hub needs none of the service's code.

Entry point ``tacc`` in ``jupyterhub.spawners``: ``c.JupyterHub.spawner_class = "tacc"``.
"""

from .spawner import TaccSpawner

__all__ = ["TaccSpawner"]
