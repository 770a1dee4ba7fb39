"""Where tcloud finds the service URL and its token.

Order (first wins): command-line option; environment (``TACC_URL``,
``TACC_TOKEN``; inside JupyterHub, ``JUPYTERHUB_API_TOKEN``); the config file
(``$TACC_CONFIG`` or ``~/.config/tacc/config.yaml`` with keys ``url`` and
``token``); the default URL ``http://127.0.0.1:8765``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8765"


def config_path() -> Path:
    env = os.environ.get("TACC_CONFIG")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tacc" / "config.yaml"


def _file_settings() -> dict[str, Any]:
    path = config_path()
    if not path.is_file():
        return {}
    import yaml

    data = yaml.safe_load(path.read_text()) or {}
    return data if isinstance(data, dict) else {}


def resolve(url: str | None, token: str | None) -> tuple[str, str | None]:
    f: dict[str, Any] | None = None
    if not url:
        url = os.environ.get("TACC_URL")
    if not url:
        f = _file_settings()
        url = str(f.get("url") or DEFAULT_URL)
    if not token:
        token = os.environ.get("TACC_TOKEN")
    if not token:
        f = f if f is not None else _file_settings()
        token = f.get("token") or os.environ.get("JUPYTERHUB_API_TOKEN")
    return url, token
