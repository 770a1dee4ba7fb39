"""The settings of a JupyterHub that runs tacc_hub: what ``jupyterhub_config.py`` applies.

One function, so the README's hub, the tests' hubs and a site's own config build the same thing:
the tacc service as the hub-managed service ``tacc`` (hub-mode auth), our custom scopes and who
holds them, demo users for the embedded default, and users' servers as tacc tasks.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tacc_hub.service.scopes import ADMIN_SCOPE, METRICS_SCOPE, TASKS_SCOPE
from tacc_spawner.culler import idle_culler

SERVICE = "tacc"
CUSTOM_SCOPES = {
    TASKS_SCOPE: {"description": "Submit tasks to the GPU cluster, and read and cancel one's own."},
    ADMIN_SCOPE: {"description": "Administer the GPU cluster: everyone's tasks, quotas and groups."},
    METRICS_SCOPE: {"description": "Read the GPU cluster's Prometheus metrics (/services/tacc/metrics)."},
}
PROMETHEUS = "prometheus"  # the hub service whose token Prometheus scrapes with (TACC_PROMETHEUS_TOKEN)
# What a user server's $JUPYTERHUB_API_TOKEN may do: the hub's defaults plus our tasks scope, so
# that tcloud, %tacc and the Lab panel work inside a server with no set-up.
SERVER_TOKEN_SCOPES = ["users:activity!user", "access:servers!server", TASKS_SCOPE,
                       f"access:services!service={SERVICE}"]


def _names(csv: str) -> set[str]:
    return {n.strip() for n in csv.split(",") if n.strip()}


# --- the demo's identity and data dir ---------------------------------------------------------------
# Run as root from a checkout every account can read, the demo runs each user's tasks and Jupyter server as
# that user's Unix account (TaccHub.task_identity = 'owner'); otherwise as the one account it runs as
# ('service', one person only), saying why. See docs/security.md.

DEMO_ROOT = Path("/var/lib/tacc-hub/demo")  # the demo's data dirs when root runs it from a checkout's ./.tacc
PROBE_ACCOUNT = "nobody"  # who tries the checkout's Python to see that other accounts can run it
PROBE = ("import importlib.util as u\nfor m in ('tacc_hub', 'tacc_spawner', 'jupyterhub'):\n"
         "    s = u.find_spec(m)\n    assert s and s.origin, m + ' is not found'\n    open(s.origin, 'rb').close()")


def _blocked(path: Path, need: int) -> str | None:
    """Why other users cannot use ``path`` (``need``: the 'other' bits wanted on it, 0o5 or 0o1), or None."""
    try:
        real = path.resolve(strict=True)
    except OSError as exc:
        return f"{path} cannot be found ({exc.strerror or exc})"
    for d in [*reversed(real.parents), real][:-1]:
        mode = d.stat().st_mode
        if not mode & 0o001:
            return f"{d} (mode {mode & 0o777:04o}) is not searchable by other users"
    mode = real.stat().st_mode
    if mode & need != need:
        return f"{real} (mode {mode & 0o777:04o}) is not {'readable' if need & 0o4 else 'searchable'} by other users"
    return None


def shared_problem(repo: Path, python: str, *, probe: bool = True) -> str | None:
    """Why accounts other than this one cannot run the checkout's Python and import tacc_hub (None: they can).

    Tasks and users' servers run as their owners and start this checkout's interpreter (its venv) and its
    editable tacc_hub: every directory on the way must be searchable by them, the checkout and the venv
    readable. Checked from the modes first (a message naming the directory), then, as root, for real: the
    ``nobody`` account runs the interpreter and reads tacc_hub's and tacc_spawner's modules (found, not imported:
    importing them takes seconds on a busy machine).
    """
    venv = Path(python).parent.parent
    for path, need in ((repo, 0o5), (repo / "tacc_hub", 0o5), (venv, 0o5), (Path(python), 0o5),
                       (Path(os.path.realpath(python)), 0o5), (Path(sys.base_prefix), 0o5)):
        why = _blocked(path, need)
        if why:
            return why
    runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
    if not probe or os.geteuid() != 0 or not runuser:
        return None
    try:
        pwd.getpwnam(PROBE_ACCOUNT)
    except KeyError:
        return None
    try:
        got = subprocess.run([runuser, "-u", PROBE_ACCOUNT, "--", python, "-c", PROBE],
                             capture_output=True, text=True, timeout=60, cwd="/", check=False,
                             env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the account {PROBE_ACCOUNT} could not run {python}: {exc}"
    if got.returncode != 0:
        last = (got.stderr.strip().splitlines() or [f"exit status {got.returncode}"])[-1]
        return f"the account {PROBE_ACCOUNT} cannot run {python} and import tacc_hub: {last[:300]}"
    return None


def demo_identity(repo: Path, python: str, env: Mapping[str, str]) -> tuple[str, str | None]:
    """(task identity, why 'service') of the demo: 'owner' as root from a checkout others can use.

    ``$TACC_TASK_IDENTITY`` (owner or service) decides when set (scripts/start.sh sets it, once decided).
    """
    forced = env.get("TACC_TASK_IDENTITY", "").strip()
    if forced in ("owner", "service"):
        return forced, (None if forced == "owner" else "TACC_TASK_IDENTITY=service")
    if forced:
        raise ValueError(f"TACC_TASK_IDENTITY must be owner or service, not {forced!r}")
    if os.geteuid() != 0:
        who = pwd.getpwuid(os.geteuid()).pw_name if _has_uid(os.geteuid()) else f"uid {os.geteuid()}"
        return "service", f"it runs as {who}, not as root, and only root can start tasks as other accounts"
    problem = shared_problem(repo.resolve(), python)
    if problem:
        return "service", (f"other accounts cannot run this checkout's Python: {problem}; their tasks and "
                           "servers could not start")
    return "owner", None


def _has_uid(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def service_warning(reason: str | None, who: str | None = None) -> str:
    """What the demo prints when it runs every task as its own account."""
    who = who or (pwd.getpwuid(os.geteuid()).pw_name if _has_uid(os.geteuid()) else f"uid {os.geteuid()}")
    return (f"WARNING: every user's tasks and Jupyter server run as {who}, this demo's own account "
            f"(TaccHub.task_identity=service), because {reason or 'it was asked to'}. Users' tasks can then read "
            "each other's files and the service's: this is for one person only. For per-user tasks (each "
            "user's tasks and server run as their own Unix account, created by start.sh): clone the repository "
            "outside /root, e.g. under /srv or /opt (every directory on the way searchable by other users), "
            "and run ./scripts/start.sh as root.")


def identity_flags(task_identity: str, python: str) -> list[str]:
    """The service's command-line settings for ``task_identity``: 'service' run by an ordinary account starts
    tacc-launcher itself, as that account (no sudo: there is no one else to become)."""
    flags = [f"--TaccHub.task_identity={task_identity}"]
    if task_identity == "service" and os.geteuid() != 0:
        flags += [f"--TaccHub.launcher_command={a}" for a in (python, "-I", "-m", "tacc_hub.launcher")]
    return flags


def _tag(repo: Path, state: Path) -> str:
    digest = hashlib.sha256(str(state).encode()).hexdigest()[:10]
    return f"{repo.name}-{state.name.lstrip('.')}-{digest}"


def demo_data_dir(repo: Path, state_dir: Path, env: Mapping[str, str], identity: str = "service") -> Path:
    """The demo's ``TaccHub.data_dir`` (tasks' and users' folders): never inside the checkout ``repo``.

    ``$TACC_DATA_DIR`` when set. Else the service's default, ``<state_dir>-data``, when it is outside the
    checkout and (``identity`` 'owner') every account can reach it. Else, for 'owner',
    ``/var/lib/tacc-hub/demo/<checkout>-<state>-<hash>`` (every account can reach it; root's own
    ``~/.local/share`` they cannot), and for 'service' ``${XDG_DATA_HOME:-~/.local/share}/tacc-hub/demo/...``.
    A capture from a user's folder must not see the project's git repository or its editable install.
    """
    if env.get("TACC_DATA_DIR"):
        return Path(env["TACC_DATA_DIR"]).expanduser().resolve()
    state, root = state_dir.resolve(), repo.resolve()
    default = Path(f"{state}-data")
    if not default.is_relative_to(root):
        reachable = next((d for d in reversed(default.parents) if d.exists() and not d.stat().st_mode & 0o001),
                         None) is None
        if identity != "owner" or reachable:
            return default
    if identity == "owner":
        return DEMO_ROOT / _tag(root, state)
    data = Path(env.get("XDG_DATA_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "share")
    return (data / "tacc-hub" / "demo" / _tag(root, state)).resolve()


def make_data_dir(data_dir: Path, identity: str) -> None:
    """Create ``data_dir`` (0711) and, for 'owner', make sure every account can reach it (o+x on the way)."""
    new_parents = [d for d in reversed(data_dir.parents) if not d.exists()]
    data_dir.mkdir(parents=True, exist_ok=True)
    for d in new_parents:
        d.chmod(0o755)  # a directory on the way: searchable by the users (the umask may be 077)
    data_dir.chmod(0o711)
    if identity == "owner":
        blocked = next((d for d in data_dir.parents if not d.stat().st_mode & 0o001), None)
        if blocked is not None:
            raise ValueError(f"the demo's data dir {data_dir}: other users cannot search {blocked}; set "
                             "TACC_DATA_DIR to a directory they can reach")


def adopt_old_homes(state_dir: Path, data_dir: Path, identity: str) -> list[str]:
    """Move an earlier demo's users' folders (``state_dir/users``, a dir or a link) to ``data_dir/users``.

    Earlier demos kept them there, as the service's account. Entries already in ``data_dir/users`` are
    kept as they are (the old ones are left behind, in ``users.old-PID``). For 'owner', a moved folder of
    a user with a Unix account of the same name is handed to that account (no link followed, mode 0700),
    since its tasks and server run as it now. Returns the names moved.
    """
    old = state_dir / "users"
    if not old.is_symlink() and not old.is_dir():
        return []
    src = old.resolve() if old.is_symlink() else old
    users = data_dir / "users"
    users.mkdir(parents=True, exist_ok=True)
    users.chmod(0o711)
    moved = []
    if src.is_dir():
        for entry in sorted(src.iterdir()):
            if entry.is_symlink() or (users / entry.name).exists():
                continue
            shutil.move(str(entry), str(users / entry.name))
            moved.append(entry.name)
            if identity == "owner" and os.geteuid() == 0:
                _give(users / entry.name, entry.name)
    if old.is_symlink():
        old.unlink()
    elif any(old.iterdir()):
        old.rename(old.with_name(f"users.old-{os.getpid()}"))
    else:
        old.rmdir()
    return moved


def _give(path: Path, name: str) -> None:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return
    if pw.pw_uid < 1000:
        return
    os.lchown(path, pw.pw_uid, pw.pw_gid)
    path.chmod(0o700)
    for top, dirs, files in os.walk(path, followlinks=False):
        for n in dirs + files:
            os.lchown(os.path.join(top, n), pw.pw_uid, pw.pw_gid)


def hub_settings(*, repo: Path, python: str, hub_port: int, service_port: int, state_dir: Path, users: str,
                 admins: str, password: str | None, executor: str, spawner: str,
                 slurm_conf: str | None = None, local_gpus: int = 4, cull_idle_after: int = 8 * 3600,
                 data_dir: Path | None = None, task_identity: str = "owner",
                 prometheus_token: str | None = None) -> dict[str, dict[str, Any]]:
    """``{section: {setting: value}}`` for JupyterHub's config object.

    Ports: the hub's public ``hub_port`` (the proxy), the proxy's API at ``hub_port + 1``, the hub's
    own API at ``hub_port + 81`` (8000, 8001, 8081 by default: JupyterHub's), the service at
    ``service_port``. Everything the hub writes lives in ``state_dir/hub``. The local executor hands
    out ``local_gpus`` GPU slots (fake ones on a machine without GPUs: each task sees its own
    ``CUDA_VISIBLE_DEVICES``), so quotas and the queue behave as on a GPU node. Servers idle for
    ``cull_idle_after`` seconds (TACC's rule: 8 hours; 0: never) are stopped by
    jupyterhub-idle-culler, which runs as the hub-managed service ``idle-culler``. ``data_dir``: the
    service's ``TaccHub.data_dir`` (tasks' folders and users' folders, ``users/<name>``: each server's root
    folder), made here; None: the service's default. ``task_identity``: 'owner' (each user's tasks and
    server run as their Unix account) or 'service' (as the service's own, one person only).
    ``prometheus_token``: when given, the hub service ``prometheus`` with that API token and the scopes
    ``custom:tacc:metrics`` and ``read:metrics`` (this service's and the hub's own metrics; see docs/metrics.md).
    """
    if task_identity not in ("owner", "service"):
        raise ValueError(f"task_identity must be owner or service, not {task_identity!r}")
    if executor not in ("local", "slurm"):
        raise ValueError(f"TACC_EXECUTOR must be local or slurm, not {executor!r}")
    hub_dir = (state_dir / "hub").resolve()
    hub_dir.mkdir(parents=True, exist_ok=True)
    state_dir.resolve().chmod(0o700)  # the service's: the store, tokens, the hub's secrets
    public = f"http://127.0.0.1:{hub_port}"
    bin_dir = Path(python).parent
    serve = [str(bin_dir / "tacc-hub"), "serve", f"--port={service_port}", f"--state-dir={state_dir.resolve()}",
             "--TaccHub.auth=hub", *identity_flags(task_identity, python)]
    if data_dir is not None:
        data_dir = data_dir.resolve()
        make_data_dir(data_dir, task_identity)
        adopt_old_homes(state_dir, data_dir, task_identity)
        serve.append(f"--TaccHub.data_dir={data_dir}")
    if executor == "slurm":
        conf = slurm_conf or str(repo / ".slurm-dev" / "etc" / "slurm.conf")
        serve += ["--TaccHub.executor=slurm", f"--TaccHub.slurm_conf={conf}"]
    else:
        serve.append(f"--gpus={int(local_gpus)}")
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
             "scopes": [ADMIN_SCOPE, TASKS_SCOPE, METRICS_SCOPE, f"access:services!service={SERVICE}"],
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
    if prometheus_token:  # Prometheus scrapes /services/tacc/metrics (and the hub's /hub/metrics) with it
        hub["services"].append({"name": PROMETHEUS, "api_token": prometheus_token})
        hub["load_roles"].append({"name": PROMETHEUS, "description": "Prometheus: reads the metrics.",
                                  "scopes": [METRICS_SCOPE, "read:metrics"], "services": [PROMETHEUS]})
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
        # servers run as their owners; in 'service' identity as the service's account: root needs jupyter's consent
        "allow_root": os.geteuid() == 0 and task_identity == "service",
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
        home_root = (data_dir or Path(f"{state_dir.resolve()}-data")) / "users"
        out["SimpleLocalProcessSpawner"] = {"home_dir_template": str(home_root / "{username}")}
    if password:
        out["DummyAuthenticator"] = {"password": password}
    return out


def main(argv: list[str] | None = None) -> int:
    """What scripts/start.sh and scripts/test.sh ask (``python -m tacc_hub.hub.config VERB ...``).

    ``demo-env REPO STATE_DIR``: shell assignments of the demo's ``TACC_TASK_IDENTITY``, ``TACC_DATA_DIR``
    and ``TACC_IDENTITY_WARNING`` (empty for 'owner'), decided as jupyterhub_config.py would, and the bash
    array ``identity_flags`` (the service's settings for that identity, see :func:`identity_flags`).
    ``check-shared REPO``: exit 1, saying why, when other accounts cannot run the checkout's Python.
    """
    import shlex

    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "demo-env":
        repo, state = Path(args[1]).resolve(), Path(args[2]).resolve()
        identity, why = demo_identity(repo, sys.executable, os.environ)
        values = {"TACC_TASK_IDENTITY": identity,
                  "TACC_DATA_DIR": str(demo_data_dir(repo, state, os.environ, identity)),
                  "TACC_IDENTITY_WARNING": service_warning(why) if identity == "service" else ""}
        print("\n".join(f"{k}={shlex.quote(v)}" for k, v in values.items()))
        print(f"identity_flags=({' '.join(shlex.quote(a) for a in identity_flags(identity, sys.executable))})")
        return 0
    if len(args) == 2 and args[0] == "check-shared":
        problem = shared_problem(Path(args[1]).resolve(), sys.executable)
        if problem:
            print(f"tasks run as the test accounts, and they cannot use this checkout: {problem}. Clone the "
                  "repository outside /root, e.g. under /srv or /opt (every directory on the way searchable "
                  "by other users: chmod o+x), and run it from there.", file=sys.stderr)
            return 1
        return 0
    print("usage: python -m tacc_hub.hub.config demo-env REPO STATE_DIR | check-shared REPO", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
