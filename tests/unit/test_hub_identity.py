"""Hub mode's mapping of a JupyterHub user model to our identity, and the hub's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tacc_hub.hub.config import hub_settings
from tacc_hub.service.auth import Denied
from tacc_hub.service.hubauth import identity_of


def model(name="alice", admin=False, scopes=(), kind="user"):
    return {"name": name, "admin": admin, "kind": kind, "scopes": list(scopes)}


def test_our_scopes_decide_and_hub_admins_are_admins():
    assert identity_of(model(scopes=["custom:tacc:tasks"]), "hub-token").admin is False
    assert identity_of(model(scopes=["custom:tacc:admin"]), "hub-token").admin is True
    who = identity_of(model(admin=True, scopes=["custom:tacc:tasks", "read:users:name!user=alice"]), "hub-cookie")
    assert (who.user, who.admin, who.via) == ("alice", True, "hub-cookie")


@pytest.mark.parametrize("m", [model(scopes=["read:users:name!user=alice"]), model(admin=True, scopes=[]),
                               model(scopes=["custom:tacc:tasksX", "custom:tacc"]),
                               model(kind="service", name="cull", scopes=["custom:tacc:admin"])])
def test_without_our_scopes_or_not_a_user_is_403(m):
    with pytest.raises(Denied) as err:
        identity_of(m, "hub-token")
    assert err.value.status == 403


def test_hub_settings_run_the_service_under_the_hub(tmp_path: Path):
    s = hub_settings(repo=tmp_path, python="/venv/bin/python", hub_port=8000, service_port=8765,
                     state_dir=tmp_path / "st", users="alice, bob", admins="admin", password=None,
                     executor="local", spawner="tacc")
    svc, culler = s["JupyterHub"]["services"]
    assert culler["name"] == "idle-culler" and "--timeout=28800" in culler["command"]
    assert svc["command"][:2] == ["/venv/bin/tacc-hub", "serve"] and "--TaccHub.auth=hub" in svc["command"]
    assert s["Authenticator"]["allowed_users"] == {"alice", "bob", "admin"}
    assert s["Authenticator"]["admin_users"] == {"admin"}
    assert "custom:tacc:tasks" in s["Spawner"]["server_token_scopes"]
    assert s["Spawner"]["environment"]["TACC_URL"] == "http://127.0.0.1:8000/services/tacc"
    assert s["JupyterHub"]["cleanup_servers"] is False  # servers (tasks) outlive a hub restart
    assert "DummyAuthenticator" not in s  # no password: DummyAuthenticator's own default
    # tasks and servers run as their owners by default: no --allow-root for servers that are not root's
    assert "--TaccHub.task_identity=owner" in svc["command"] and s["TaccSpawner"]["allow_root"] is False
    assert not any(a.startswith("--TaccHub.data_dir=") for a in svc["command"])  # None: the service's default
    one = hub_settings(repo=tmp_path, python="/venv/bin/python", hub_port=8000, service_port=8765,
                       state_dir=tmp_path / "st", users="alice", admins="admin", password=None, executor="local",
                       spawner="tacc", data_dir=tmp_path / "d", task_identity="service")
    cmd = one["JupyterHub"]["services"][0]["command"]
    assert "--TaccHub.task_identity=service" in cmd and f"--TaccHub.data_dir={(tmp_path / 'd').resolve()}" in cmd
    assert one["TaccSpawner"]["allow_root"] is True  # this test runs as root: servers as root need the flag
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o711
    with pytest.raises(ValueError, match="owner or service"):
        hub_settings(repo=tmp_path, python="p", hub_port=1, service_port=2, state_dir=tmp_path, users="",
                     admins="", password=None, executor="local", spawner="tacc", task_identity="root")
    slurm = hub_settings(repo=tmp_path, python="/p/python", hub_port=9000, service_port=9001, state_dir=tmp_path,
                         users="", admins="", password="pw", executor="slurm", spawner="tacc",
                         slurm_conf="/etc/slurm/slurm.conf")
    assert "--TaccHub.slurm_conf=/etc/slurm/slurm.conf" in slurm["JupyterHub"]["services"][0]["command"]
    never = hub_settings(repo=tmp_path, python="p", hub_port=1, service_port=2, state_dir=tmp_path, users="",
                         admins="", password=None, executor="local", spawner="tacc", cull_idle_after=0)
    assert [svc["name"] for svc in never["JupyterHub"]["services"]] == ["tacc"]
    with pytest.raises(ValueError, match="local or slurm"):
        hub_settings(repo=tmp_path, python="p", hub_port=1, service_port=2, state_dir=tmp_path, users="",
                     admins="", password=None, executor="k8s; rm -rf /", spawner="tacc")
