"""The settings of a JupyterHub that runs tacc_hub: what ``jupyterhub_config.py`` applies.

One function, so the README's hub, the tests' hubs and a site's own config build the same thing:
the tacc service as the hub-managed service ``tacc`` (hub-mode auth), our custom scopes and who
holds them, demo users for the embedded default, and users' servers as tacc tasks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tacc_hub.service.scopes import ADMIN_SCOPE, TASKS_SCOPE
from tacc_spawner.culler import idle_culler

SERVICE = "tacc"
CUSTOM_SCOPES = {
    TASKS_SCOPE: {"description": "Submit tasks to the GPU cluster, and read and cancel one's own."},
    ADMIN_SCOPE: {"description": "Administer the GPU cluster: everyone's tasks, quotas and groups."},
}
# What a user server's $JUPYTERHUB_API_TOKEN may do: the hub's defaults plus our tasks scope, so
# that tcloud, %tacc and the Lab panel work inside a server with no set-up.
SERVER_TOKEN_SCOPES = ["users:activity!user", "access:servers!server", TASKS_SCOPE,
                       f"access:services!service={SERVICE}"]


def _names(csv: str) -> set[str]:
    return {n.strip() for n in csv.split(",") if n.strip()}


def demo_homes(repo: Path, state_dir: Path, env: Mapping[str, str]) -> Path | None:
    """Where the demo users' homes live, when not in ``state_dir/users``: never inside the checkout.

    ``$TACC_DEMO_HOMES`` when set; else, when the state dir is inside the checkout ``repo`` (``./.tacc``),
    ``${XDG_DATA_HOME:-~/.local/share}/tacc-hub/demo/<state dir's name>-<hash of its path>``: a capture
    from a user's folder must not see the project's git repository or its editable install. ``None``:
    the state dir is elsewhere, its ``users/`` is outside the checkout already.
    """
    if env.get("TACC_DEMO_HOMES"):
        return Path(env["TACC_DEMO_HOMES"]).expanduser().resolve()
    state, root = state_dir.resolve(), repo.resolve()
    if not state.is_relative_to(root):
        return None
    data = Path(env.get("XDG_DATA_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "share")
    tag = hashlib.sha256(str(state).encode()).hexdigest()[:10]
    return (data / "tacc-hub" / "demo" / f"{root.name}-{state.name.lstrip('.')}-{tag}").resolve()


def link_homes(state_dir: Path, homes: Path) -> None:
    """Make ``state_dir/users`` (the executors' users' directories) a link to ``homes``.

    What an earlier demo left in ``state_dir/users`` is moved there first (entries already in ``homes``
    are kept as they are and left behind).
    """
    users = state_dir / "users"
    homes.mkdir(parents=True, exist_ok=True)
    if users.is_symlink():
        if users.resolve() == homes:
            return
        users.unlink()
    elif users.is_dir():
        for entry in users.iterdir():
            if not (homes / entry.name).exists():
                shutil.move(str(entry), str(homes / entry.name))
        if any(users.iterdir()):
            users.rename(users.with_name(f"users.old-{os.getpid()}"))
        else:
            users.rmdir()
    state_dir.mkdir(parents=True, exist_ok=True)
    users.symlink_to(homes, target_is_directory=True)


def hub_settings(*, repo: Path, python: str, hub_port: int, service_port: int, state_dir: Path, users: str,
                 admins: str, password: str | None, executor: str, spawner: str,
                 slurm_conf: str | None = None, local_gpus: int = 4,
                 cull_idle_after: int = 8 * 3600, homes: Path | None = None) -> dict[str, dict[str, Any]]:
    """``{section: {setting: value}}`` for JupyterHub's config object.

    Ports: the hub's public ``hub_port`` (the proxy), the proxy's API at ``hub_port + 1``, the hub's
    own API at ``hub_port + 81`` (8000, 8001, 8081 by default: JupyterHub's), the service at
    ``service_port``. Everything the hub writes lives in ``state_dir/hub``. The local executor hands
    out ``local_gpus`` GPU slots (fake ones on a machine without GPUs: each task sees its own
    ``CUDA_VISIBLE_DEVICES``), so quotas and the queue behave as on a GPU node. Servers idle for
    ``cull_idle_after`` seconds (TACC's rule: 8 hours; 0: never) are stopped by
    jupyterhub-idle-culler, which runs as the hub-managed service ``idle-culler``. ``homes``: where the
    users' homes live (``state_dir/users`` becomes a link to it, see :func:`demo_homes`).
    """
    hub_dir = (state_dir / "hub").resolve()
    hub_dir.mkdir(parents=True, exist_ok=True)
    if homes is not None:
        link_homes(state_dir, homes)
    public = f"http://127.0.0.1:{hub_port}"
    bin_dir = Path(python).parent
    serve = [str(bin_dir / "tacc-hub"), "serve", f"--port={service_port}", f"--state-dir={state_dir.resolve()}",
             "--TaccHub.auth=hub"]
    if executor == "slurm":
        conf = slurm_conf or str(repo / ".slurm-dev" / "etc" / "slurm.conf")
        serve += ["--TaccHub.executor=slurm", f"--TaccHub.slurm_conf={conf}"]
    elif executor == "local":
        serve.append(f"--gpus={int(local_gpus)}")
    else:
        raise ValueError(f"TACC_EXECUTOR must be local or slurm, not {executor!r}")
    all_admins = _names(admins)
    hub: dict[str, Any] = {
        "ip": "127.0.0.1",
        "port": hub_port,
        "hub_ip": "127.0.0.1",
        "hub_port": hub_port + 81,
        "db_url": f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}",
        "cookie_secret_file": str(hub_dir / "jupyterhub_cookie_secret"),
        "authenticator_class": "dummy",
        "spawner_class": spawner,
        # Servers outlive a hub restart (the hub finds them again from each spawner's saved task id).
        # JupyterHub stops its managed services before users' servers, so with cleanup the tacc service
        # would already be gone when TaccSpawner cancels a server's task: the task would run on, forgotten.
        "cleanup_servers": False,
        "custom_scopes": CUSTOM_SCOPES,
        "load_roles": [
            {"name": "user", "description": "Every user: their own server and tasks.",
             "scopes": ["self", TASKS_SCOPE, f"access:services!service={SERVICE}"]},
            {"name": "tacc-admins", "description": "Cluster admins (the hub's admins are given this role too).",
             "scopes": [ADMIN_SCOPE, TASKS_SCOPE, f"access:services!service={SERVICE}"],
             "users": sorted(all_admins)},
        ],
        "services": [{
            "name": SERVICE,
            "display": True,
            "info": {"description": "GPU cluster tasks, queue and quotas"},
            "url": f"http://127.0.0.1:{service_port}",
            "command": serve,
            "oauth_no_confirm": True,
            "oauth_client_allowed_scopes": [TASKS_SCOPE, ADMIN_SCOPE],
            "environment": {"TACC_STATE_DIR": str(state_dir.resolve())},
        }],
    }
    if cull_idle_after > 0:
        culler, role = idle_culler(int(cull_idle_after), cull_every=max(30, min(300, int(cull_idle_after) // 4)),
                                   python=python)
        hub["services"].append(culler)
        hub["load_roles"].append(role)
    auth: dict[str, Any] = {"allowed_users": _names(users) | all_admins, "admin_users": all_admins}
    spawn: dict[str, Any] = {
        "server_token_scopes": SERVER_TOKEN_SCOPES,
        "environment": {"TACC_URL": f"{public}/services/{SERVICE}"},
        "default_url": "/lab",
    }
    spawner_settings: dict[str, Any] = {
        # the service directly (same machine), not through the proxy: one hop less per poll
        "tacc_url": f"http://127.0.0.1:{service_port}/services/{SERVICE}",
        "allow_root": os.geteuid() == 0,  # servers run as the service's user here; root needs jupyter's consent
    }
    out: dict[str, dict[str, Any]] = {
        "JupyterHub": hub,
        "Authenticator": auth,
        "Spawner": spawn,
        "TaccSpawner": spawner_settings,
        "ConfigurableHTTPProxy": {"api_url": f"http://127.0.0.1:{hub_port + 1}",
                                  "pid_file": str(hub_dir / "proxy.pid")},
    }
    chp = bin_dir.parent / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
    if chp.exists():  # npm's proxy, installed by scripts/bootstrap.sh: it streams (the PyPI one buffers)
        out["ConfigurableHTTPProxy"]["command"] = [str(chp)]
    if spawner == "simple":
        # Local servers keep their users' files (and Jupyter settings) under the state directory,
        # not in /tmp/NAME where every hub on the machine would share them.
        home_root = homes if homes is not None else state_dir.resolve() / "home"
        out["SimpleLocalProcessSpawner"] = {"home_dir_template": str(home_root / "{username}")}
    if password:
        out["DummyAuthenticator"] = {"password": password}
    return out
