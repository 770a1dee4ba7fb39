"""Where tcloud finds the service URL and its token.

Order (first wins): command-line option; environment (``TACC_URL``,
``TACC_TOKEN``; inside JupyterHub, ``JUPYTERHUB_API_TOKEN``); the config file
(``$TACC_CONFIG`` or ``~/.config/tacc/config.yaml`` with keys ``url`` and
``token``); the default URL ``http://127.0.0.1:8765``. ``url_origin`` says
which of these gave the URL, for error messages about a wrong one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8765"


class SettingsError(ValueError):
    """The config file cannot be read (the message names it)."""


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

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SettingsError(f"cannot read tcloud's config file {path}: {' '.join(str(exc).split())}") from None
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


def url_origin(given_as: str | None) -> str:
    """Where the URL in use came from, as an error message names it.

    ``given_as`` is how the caller got it ("--url", "TACC_URL"), or None when
    ``resolve`` fell back to the config file or the default.
    """
    if given_as:
        return given_as
    if os.environ.get("TACC_URL"):
        return "TACC_URL"
    path = config_path()
    if _file_settings().get("url"):
        return f"`url` in {path}"
    return f"the default ({DEFAULT_URL}: TACC_URL is not set, nor `url` in {path})"
