"""A hub restart keeps a running server: the spawner's state (the task id) comes back and polls the task."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Api, ServiceProcess
from tests.hub.conftest import FaultProxy, SpawnerHub

pytestmark = pytest.mark.timeout(300)


def test_a_restarted_hub_keeps_the_server_and_can_still_stop_it(tmp_path: Path, tacc_service: ServiceProcess,
                                                               fault_proxy: FaultProxy) -> None:
    hub = SpawnerHub(tmp_path / "hub", fault_proxy.url, {"rita": tacc_service.token("rita")},
              extra_config="c.JupyterHub.cleanup_servers = False\n").start()
    try:
        assert hub.api.post(f"{hub.url}/hub/api/users/rita", timeout=10).status_code == 201
        assert hub.api.post(f"{hub.url}/hub/api/users/rita/server", json={}, timeout=30).status_code == 202
        hub.wait_ready("rita")
        task_id = int(hub.user("rita")["servers"][""]["state"]["task_id"])
        hub.stop()
        hub.start()
        server = hub.user("rita")["servers"].get("")
        assert server and server["ready"] and server["state"]["task_id"] == task_id, server
        time.sleep(2.5)  # two of the hub's polls (every second) of the task, through the reloaded state
        assert hub.user("rita")["servers"][""]["ready"]
        assert hub.api.get(f"{hub.url}/user/rita/api", timeout=10).status_code == 200
        assert hub.api.delete(f"{hub.url}/hub/api/users/rita/server", timeout=60).status_code in (202, 204)
        api = Api(tacc_service.url, tacc_service.token("rita"))
        assert api.wait_status(task_id, {"cancelled"}, timeout=60)["status"] == "cancelled"
    finally:
        hub.stop()
