"""Arrays on the Slurm dev cluster (issue 20): the real service with the Slurm executor.

A 16-element array with ``max_running: 4``: never more than 4 running (GET /api/arrays/ID polled all
along, and the elements' own monotonic timestamps: the dev cluster's nodes are one machine, one
clock), all succeed as Slurm jobs, each saw its index and the array id. Cancelling another array
midway ends every element not yet ended as cancelled, and leaves no job of it in Slurm's queue.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Api, ServiceProcess
from tests.e2e.groups_util import (
    TERMINAL,
    array_of,
    cancel_and_wait,
    max_overlap,
    record_from_log,
    upload_code,
    wait_array,
    wait_ended,
)

pytestmark = pytest.mark.timeout(900)


def _submit(api: Api, spec: dict) -> dict:
    status, body = api.call("POST", "/api/tasks", spec)
    assert status == 201, (status, body)
    return body["array"]


def test_a_16_element_array_with_max_running_4_on_slurm(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    api = Api(slurm_service.url, slurm_service.token("alice"))
    code = upload_code(api)
    arr = _submit(api, {"name": "slurm-sweep", "code": code,
                        "entrypoint": {"argv": ["python3", "rec.py", "--sleep=3", "i={index}", "{seed}"]},
                        "resources": {"gpus_per_node": 0, "time_limit": "10m"},
                        "array": {"values": list(range(100, 116)), "param": "seed", "max_running": 4}})
    aid = arr["id"]
    assert arr["size"] == 16 and arr["max_running"] == 4, arr
    peak = 0
    try:
        deadline = time.monotonic() + 600
        while True:
            now = array_of(api, aid)
            peak = max(peak, int(now["running"]),
                       sum(t["status"] in ("starting", "running", "cancelling") for t in now["tasks"]))
            if all(t["status"] in TERMINAL for t in now["tasks"]):
                break
            assert time.monotonic() < deadline, now["counts"]
            time.sleep(0.2)
    finally:
        cancel_and_wait(api, [], [aid], timeout=300)
    assert peak <= 4, f"{peak} elements running at once (max_running 4)"
    assert now["status"] == "succeeded" and now["counts"] == {"succeeded": 16}, now["counts"]
    intervals = []
    for t in now["tasks"]:
        i = t["array_index"]
        _, logs = api.call("GET", f"/api/tasks/{t['id']}/logs")
        rec = record_from_log(logs["data"])
        assert rec["argv"] == ["--sleep=3", f"i={i}", str(100 + i)], rec["argv"]
        assert rec["env"]["TACC_ARRAY_INDEX"] == str(i) and rec["env"]["TACC_ARRAY_ID"] == str(aid), rec["env"]
        assert rec["env"]["TACC_PARAM_SEED"] == str(100 + i), rec["env"]
        assert rec["params"] == {"index": i, "size": 16, "params": {"seed": 100 + i}}, rec["params"]
        intervals.append((rec["start"], rec["end"]))
    assert [t["array_index"] for t in now["tasks"]] == list(range(16))
    overlap = max_overlap(intervals)
    assert 2 <= overlap <= 4, f"{overlap} elements ran at once by their own clocks (max_running 4)"
    # they were Slurm jobs
    _, t0 = api.call("GET", f"/api/tasks/{now['tasks'][0]['id']}")
    fields = subprocess.run(["sacct", "-n", "-X", "-o", "JobName%30,State", "--name", f"tacc-{t0['id']}"],
                            capture_output=True, text=True, timeout=60, check=False).stdout
    assert f"tacc-{t0['id']}" in fields and "COMPLETED" in fields, fields


def test_cancelling_the_rest_of_an_array_on_slurm(slurm_service: ServiceProcess) -> None:
    api = Api(slurm_service.url, slurm_service.token("alice"))
    code = upload_code(api)
    arr = _submit(api, {"name": "slurm-cancel", "code": code,
                        "entrypoint": {"argv": ["python3", "rec.py", "--sleep=300", "{index}"]},
                        "resources": {"gpus_per_node": 0}, "array": "0-7%2"})
    aid = arr["id"]
    try:
        wait_array(api, aid, lambda a: sum(t["status"] == "running" for t in a["tasks"]) == 2, timeout=180,
                   what="2 running")
        status, out = api.call("POST", f"/api/arrays/{aid}/cancel")
        assert status == 200, (status, out)
        ids = [t["id"] for t in array_of(api, aid)["tasks"]]
        ended = wait_ended(api, ids, timeout=180)
    finally:
        cancel_and_wait(api, [], [aid], timeout=300)
    assert {t["status"] for t in ended.values()} == {"cancelled"}, {k: v["status"] for k, v in ended.items()}
    final = array_of(api, aid)
    assert final["counts"] == {"cancelled": 8} and final["running"] == 0, final["counts"]
    names = subprocess.run(["squeue", "-h", "-o", "%j %T"], capture_output=True, text=True, timeout=60,
                           check=True).stdout
    leftover = [ln for ln in names.splitlines() if ln.split()[0] in {f"tacc-{i}" for i in ids}]
    assert not leftover, leftover
