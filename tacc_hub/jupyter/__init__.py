"""tacc_hub in Jupyter: the server extension (``/tacc/api/...``), the ``%tacc`` magic and its monitor.

Enabled by ``jupyter-config/jupyter_server_config.d/tacc_hub.json`` (installed with the package);
by hand: ``jupyter server extension enable tacc_hub``. The routes are listed in ``handlers``.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "tacc_hub.jupyter"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .handlers import setup_handlers

    setup_handlers(serverapp.web_app)
    serverapp.log.info("tacc_hub: server extension loaded at %s", serverapp.web_app.settings["base_url"] + "tacc/api")


def load_ipython_extension(ipython: Any) -> None:
    from .magic import load_ipython_extension as load

    load(ipython)
