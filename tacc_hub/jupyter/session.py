"""Which Jupyter server runs this kernel, its root directory, and the notebook the kernel serves now.

The kernel's own hints (``__session__``, ``JPY_SESSION_NAME``) are set when it starts and go stale
when the notebook is renamed (Lab's rename-on-first-save of ``Untitled.ipynb``). The server's
sessions API (``GET /api/sessions``: kernel id -> path, which Lab updates on a rename) is asked
instead. Servers are found from their info files in the Jupyter runtime directory
(``jpserver-PID.json``: url, token, root_dir), the kernel's parent (``JPY_PARENT_PID``) first;
requests carry the server's token, then JUPYTERHUB_API_TOKEN (a JupyterHub single-user server).
Nothing here raises: an unreachable server is simply not found.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT = 3.0


@dataclass(frozen=True)
class ServerSession:
    url: str
    root_dir: Path
    path: str | None  # the notebook's path relative to root_dir; None when no session holds this kernel

    @property
    def notebook(self) -> Path | None:
        return self.root_dir / self.path if self.path else None


def kernel_id() -> str | None:
    """This kernel's id (from its connection file ``kernel-ID.json``), or None outside a Jupyter kernel."""
    try:
        from ipykernel.connect import get_connection_file

        name = Path(get_connection_file()).name
    except Exception:  # not in an ipykernel (plain IPython), or no connection file
        return None
    m = re.fullmatch(r"kernel-(.+)\.json", name)
    return m.group(1) if m else None


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, TypeError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def running_servers() -> list[dict[str, Any]]:
    """The info of each running Jupyter server of this user, the kernel's parent first."""
    from jupyter_core.paths import jupyter_runtime_dir

    found = []
    try:
        names = sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json"))
    except OSError:
        return []
    for path in names:
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and _alive(info.get("pid")) and str(info.get("url", "")).startswith("http"):
            found.append(info)
    parent = os.environ.get("JPY_PARENT_PID", "")
    return sorted(found, key=lambda i: str(i.get("pid")) != parent)


def _get(url: str, token: str) -> Any:
    """GET url as JSON with ``token``; None where refused or unreachable."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server: never via a proxy
    req = urllib.request.Request(  # noqa: S310 - http(s) only: running_servers keeps those
        url, headers={"Authorization": f"token {token}", "Accept": "application/json"})
    try:
        with opener.open(req, timeout=TIMEOUT) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):  # HTTPError and URLError are OSErrors
        return None


def _sessions(info: dict[str, Any]) -> list[dict[str, Any]] | None:
    url = str(info["url"]).rstrip("/") + "/api/sessions"
    tokens = [t for t in (info.get("token"), os.environ.get("JUPYTERHUB_API_TOKEN")) if t]
    for token in dict.fromkeys(tokens):
        got = _get(url, str(token))
        if isinstance(got, list):
            return [s for s in got if isinstance(s, dict)]
    return None


def find_server(kid: str | None = None) -> ServerSession | None:
    """The server that holds kernel ``kid`` (default: this kernel) and the path of its notebook now.

    A server whose sessions do not list the kernel is still returned, with ``path`` None, when it is
    the kernel's parent process (a kernel started without a notebook, a console).
    """
    kid = kid or kernel_id()
    parent = os.environ.get("JPY_PARENT_PID", "")
    fallback = None
    for info in running_servers():
        root = Path(str(info.get("root_dir") or ".")).expanduser()
        sessions = _sessions(info) if kid else None
        for s in sessions or []:
            kernel = s.get("kernel") or {}
            if isinstance(kernel, dict) and kernel.get("id") == kid:
                path = s.get("path")
                return ServerSession(str(info["url"]), root, str(path) if path else None)
        if fallback is None and parent and str(info.get("pid")) == parent:
            fallback = ServerSession(str(info["url"]), root, None)
    return fallback
