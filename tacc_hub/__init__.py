"""tacc_hub: a shared GPU cluster run from JupyterHub (schema, compiler, scheduler, executors, service, clients).

Also a Jupyter server extension (``tacc_hub.jupyter``: REST under ``/tacc/api``) and an IPython
extension (``%load_ext tacc_hub``: the ``%tacc`` magic). Both import their modules lazily, so
``tcloud`` does not pay for Jupyter.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "tacc_hub.jupyter"}]


def load_ipython_extension(ipython: Any) -> None:
    from tacc_hub.jupyter.magic import load_ipython_extension as load

    load(ipython)
