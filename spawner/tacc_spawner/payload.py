"""What a server task is made of: its code snapshot (wrapper + hub environment) and its TaskSpec.

How the secrets travel: the hub's environment for the server (``JUPYTERHUB_API_TOKEN`` and
the OAuth client settings) is *not* put in the spec's ``environment.variables``, which the
service stores in its database and shows to the task's owner and to admins (``GET
/api/tasks/ID``), nor on any command line. It goes in ``.tacc-server.json`` (mode 0600) inside
the task's code snapshot, a tar.gz uploaded with ``PUT /api/code/SHA256``: the API has no
route that reads a snapshot back, the spec carries only its sha256 (the file holds a 256-bit
token, so the digest reveals nothing), and the wrapper (``server.py``) deletes the file from
the task's working copy as soon as it has read it. The archive itself stays in the service's
code store, like every task's code, readable only on the service's machine.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from typing import Any

from . import server

WRAPPER_NAME = "tacc_server.py"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def server_snapshot(config: dict[str, Any]) -> tuple[str, bytes]:
    """(sha256, tar.gz) of the server's code: the wrapper and its config (secrets included, mode 0600)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, WRAPPER_NAME, Path(server.__file__).read_bytes(), 0o644)
        _add(tar, server.CONFIG_FILE, json.dumps(config, sort_keys=True).encode(), 0o600)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    data = out.getvalue()
    return hashlib.sha256(data).hexdigest(), data


def task_name(template: str, username: str, server_name: str) -> str:
    """A task name the schema accepts (letters, digits, '.', '_', '-'), from the template."""
    text = template.format(username=username, servername=server_name or "default")
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "jupyter"
    return text[:63]


def server_spec(*, name: str, digest: str, size: int, opts: dict[str, Any], qos_class: str = "interactive",
                python: str = "python3") -> dict[str, Any]:
    """The TaskSpec (as JSON) of a server task with checked ``opts`` (see ``form.normalize_options``)."""
    resources: dict[str, Any] = {"nodes": 1, "gpus_per_node": int(opts.get("gpus", 0)),
                                 "time_limit": int(opts["time_limit_s"])}
    if opts.get("gpu_type"):
        resources["gpu_type"] = opts["gpu_type"]
    if opts.get("memory_mib"):
        resources["memory"] = int(opts["memory_mib"])
    if opts.get("partition"):
        resources["partition"] = opts["partition"]
    environment: dict[str, Any] = {}
    if opts.get("python"):
        environment["python"] = opts["python"]
    if opts.get("requirements"):
        environment["requirements"] = list(opts["requirements"])
    return {
        "name": name,
        "code": {"kind": "snapshot", "digest": digest, "size": size},
        "entrypoint": {"argv": [python, WRAPPER_NAME]},
        "environment": environment,
        "resources": resources,
        "qos": {"class": qos_class},
    }
