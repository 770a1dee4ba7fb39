"""A dependency chain and an array survive a kill -9 of the service mid-run (issue 20).

A -> B -> C (each ``depends_on`` the one before, succeeded) and an 8-element array with
``max_running: 2`` are submitted to a private service; while A and two elements run, the service is
killed with SIGKILL and started again on the same state. Afterwards everything completes: the chain
in order (each started after the one before ended), every element succeeded exactly once, and at no
instant, before, across or after the restart, did more than 2 elements run (their own monotonic
timestamps; GET /api/arrays/ID polled after the restart). Nothing was lost.
"""

from __future__ import annotations

import signal
import time

import pytest

from .conftest import Api, ServiceProcess
from .groups_util import TERMINAL, array_of, cancel_and_wait, max_overlap, record, upload_code, wait_ended

pytestmark = pytest.mark.timeout(600)

ARGS = ("--TaccHub.grace_period=2", "--TaccHub.max_running_per_user=16")


def test_a_dependency_chain_and_an_array_survive_kill_9(tmp_path):
    svc = ServiceProcess(tmp_path / "state", *ARGS).start()
    svc2: ServiceProcess | None = None
    api = Api(svc.url, svc.token("alice"))
    ids: list[int] = []
    aid = 0
    try:
        code = upload_code(api)

        def post(spec: dict) -> dict:
            status, body = api.call("POST", "/api/tasks", {"code": code, "resources": {"gpus_per_node": 0}, **spec})
            assert status == 201, (status, body)
            return body

        a = post({"name": "chain-a", "entrypoint": {"argv": ["python3", "rec.py", "--sleep=6"]}})
        b = post({"name": "chain-b", "entrypoint": {"argv": ["python3", "rec.py", "--sleep=1"]},
                  "depends_on": [{"task": a["id"]}]})
        c = post({"name": "chain-c", "entrypoint": {"argv": ["python3", "rec.py", "--sleep=0"]},
                  "depends_on": [{"task": b["id"], "when": "succeeded"}]})
        ids = [a["id"], b["id"], c["id"]]
        arr = post({"name": "survivor-array", "entrypoint": {"argv": ["python3", "rec.py", "--sleep=3", "{index}"]},
                    "array": {"range": "0-7", "max_running": 2}})["array"]
        aid = arr["id"]
        api.wait_status(a["id"], {"running"}, timeout=30)
        deadline = time.monotonic() + 30
        while sum(t["status"] == "running" for t in array_of(api, aid)["tasks"]) < 2:
            assert time.monotonic() < deadline, array_of(api, aid)
            time.sleep(0.1)
        before = array_of(api, aid)
        assert before["running"] <= 2 and before["counts"].get("pending", 0) >= 4, before["counts"]

        svc.stop(signal.SIGKILL)  # no chance to clean up: the running ones keep running meanwhile
        time.sleep(2)
        svc2 = ServiceProcess(svc.state_dir, *ARGS, port=svc.port)
        svc2.tokens = svc.tokens
        svc2.start()

        # after the restart: max_running still held while the rest run, all the way to the end
        peak = 0
        deadline = time.monotonic() + 180
        while True:
            now = array_of(api, aid)
            peak = max(peak, sum(t["status"] in ("starting", "running", "cancelling") for t in now["tasks"]),
                       int(now["running"]))
            if all(t["status"] in TERMINAL for t in now["tasks"]) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert peak <= 2, f"{peak} elements running at once after the restart (max_running 2)"
        chain = wait_ended(api, ids, timeout=60)
    finally:
        up = svc2 or svc
        try:
            if up.proc is not None and up.proc.poll() is None:
                cancel_and_wait(api, ids, [aid] if aid else [])
        finally:
            if svc2 is not None:
                svc2.stop()
            svc.stop()
    assert [chain[i]["status"] for i in ids] == ["succeeded"] * 3, {i: chain[i]["status"] for i in ids}
    ta, tb, tc = (chain[i] for i in ids)
    assert tb["started_at"] >= ta["finished_at"] and tc["started_at"] >= tb["finished_at"], (ta, tb, tc)
    assert ta["attempt"] == 0 and tb["attempt"] == 0, "the chain's tasks ran once each"
    final = now
    assert final["status"] == "succeeded" and final["counts"] == {"succeeded": 8}, final["counts"]
    assert [t["array_index"] for t in final["tasks"]] == list(range(8))
    recs = [record(svc.data_dir, t["id"]) for t in final["tasks"]]
    assert [r["argv"][-1] for r in recs] == [str(i) for i in range(8)]
    assert all(t["attempt"] == 0 for t in final["tasks"]), [t["attempt"] for t in final["tasks"]]
    overlap = max_overlap([(r["start"], r["end"]) for r in recs])
    assert overlap <= 2, f"{overlap} elements ran at once by their own clocks (max_running 2), across a restart"
    # B and C ran after A by their own clocks as well
    ra, rb, rc = (record(svc.data_dir, i) for i in ids)
    assert ra["end"] <= rb["start"] and rb["end"] <= rc["start"], (ra, rb, rc)
