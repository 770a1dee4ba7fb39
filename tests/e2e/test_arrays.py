"""Arrays and sweeps on the local executor (issue 20), through the real service, as real Unix accounts.

A 100-element grid sweep with ``max_running: 4``: never more than 4 at once (from the elements' own
monotonic timestamps and from GET /api/arrays/ID polled all along), each element saw its index, its
parameters (environment, params.json, substituted argv items) and all succeed. Cancelling an array
(REST, and ``tcloud cancel ARRAY_ID``) ends every element not yet ended as cancelled and leaves
nothing running. Hostile parameter values reach the program literally, through argv and the
environment, and nothing of them runs. Another user's array is 404.

The service is this module's own (no per-user cap below the array's ``max_running``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import ROOT, Api, ServiceProcess, tcloud, write_task
from .groups_util import (
    RECORDER,
    TERMINAL,
    array_of,
    cancel_and_wait,
    max_overlap,
    param_text,
    record,
    upload_code,
    wait_array,
    wait_ended,
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    s = ServiceProcess(tmp_path_factory.mktemp("arrays"), "--gpus=2", "--TaccHub.grace_period=2",
                       "--TaccHub.max_running_per_user=16").start()
    yield s
    s.stop()


def submit(api: Api, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    status, body = api.call("POST", "/api/tasks", spec)
    assert status == 201, (status, body)
    assert "array" in body, body
    return body, body["array"]


def element_ids(arr: dict[str, Any]) -> list[int]:
    return [t["id"] for t in arr["tasks"]]


class Poller(threading.Thread):
    """GET /api/arrays/ID as often as it can until stopped: the largest running count and the reasons seen."""

    def __init__(self, url: str, token: str, array_id: int) -> None:
        super().__init__(daemon=True)
        self.api = Api(url, token)
        self.array_id = array_id
        self.stop_flag = threading.Event()
        self.max_running = 0
        self.samples = 0
        self.reasons: set[str] = set()
        self.task_reasons: set[str] = set()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop_flag.is_set():
            status, body = self.api.call("GET", f"/api/arrays/{self.array_id}")
            if status != 200:
                self.errors.append(f"{status} {body}")
                time.sleep(0.1)
                continue
            self.samples += 1
            running = sum(1 for t in body["tasks"] if t["status"] in ("starting", "running", "cancelling"))
            self.max_running = max(self.max_running, running, int(body["running"]))
            if body.get("reason"):
                self.reasons.add(body["reason"])
            for t in body["tasks"]:
                if t["status"] == "pending" and t.get("reason"):
                    self.task_reasons.add(t["reason"])
            time.sleep(0.05)


LRS = [0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4, 3e-5, 1e-5, 1e-6]
BSS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def test_a_100_element_sweep_holds_max_running_and_every_element_sees_its_parameters(svc, tmp_path):
    api = Api(svc.url, svc.token("alice"))
    code = upload_code(api)
    spec = {
        "name": "sweep100", "code": code,
        "entrypoint": {"argv": ["python3", "rec.py", "--index={index}", "--lr", "{lr}", "bs={bs}", "{{literal}}"]},
        "resources": {"gpus_per_node": 0, "time_limit": "10m"},
        "array": {"grid": {"lr": LRS, "bs": BSS}, "max_running": 4},
    }
    first, arr = submit(api, spec)
    aid = arr["id"]
    poller = Poller(svc.url, svc.token("alice"), aid)
    poller.start()
    try:
        assert arr["size"] == 100 and arr["max_running"] == 4 and arr["owner"] == "alice", arr
        assert first["array_id"] == aid and first["array_index"] == 0, first
        done = wait_array(api, aid, lambda a: a["status"] in TERMINAL or a["counts"].get("succeeded", 0) == 100,
                          timeout=400, what="ended", every=0.5)
    finally:
        poller.stop_flag.set()
        poller.join(10)
        cancel_and_wait(api, [], [aid])
    assert not poller.errors, poller.errors[:3]
    assert poller.samples > 20, poller.samples
    assert poller.max_running <= 4, f"{poller.max_running} elements running at once (max_running 4)"
    assert poller.max_running >= 2, "the elements never ran side by side"
    assert done["status"] == "succeeded", done
    assert done["counts"] == {"succeeded": 100}, done["counts"]
    assert done["done"] == 100 and done["failed"] == 0 and done["running"] == 0 and done["waiting"] == 0, done
    # the queue explanation spoke of the array while elements waited
    assert any(re.search(r"\b\d+ of 100 running, \d+ waiting", r) for r in poller.reasons | poller.task_reasons), \
        (sorted(poller.reasons)[:5], sorted(poller.task_reasons)[:5])

    tasks = done["tasks"]
    assert [t["array_index"] for t in tasks] == list(range(100)), [t["array_index"] for t in tasks][:10]
    assert len({t["id"] for t in tasks}) == 100 and all(t["array_id"] == aid for t in tasks)
    assert len({t["digest"] for t in tasks}) == 100, "two elements share a digest"
    assert aid == tasks[0]["id"]  # the array's id is its first element's (Slurm's array job id)

    intervals = []
    for t in tasks:
        i = t["array_index"]
        lr, bs = LRS[i // len(BSS)], BSS[i % len(BSS)]
        rec = record(svc.data_dir, t["id"])
        intervals.append((rec["start"], rec["end"]))
        assert rec["argv"] == [f"--index={i}", "--lr", param_text(lr), f"bs={bs}", "{literal}"], (i, rec["argv"])
        env = rec["env"]
        assert env["TACC_ARRAY_ID"] == str(aid) and env["TACC_ARRAY_INDEX"] == str(i), (i, env)
        assert env["TACC_ARRAY_SIZE"] == "100", env
        assert env["TACC_PARAM_LR"] == param_text(lr) and env["TACC_PARAM_BS"] == str(bs), (i, env)
        assert rec["params"] == {"index": i, "size": 100, "params": {"bs": bs, "lr": lr}}, (i, rec["params"])
    peak = max_overlap(intervals)
    assert peak <= 4, f"{peak} elements ran at once by their own clocks (max_running 4)"
    assert peak >= 2, "the elements never ran side by side"
    # each element has its own log
    _, logs = api.call("GET", f"/api/tasks/{tasks[37]['id']}/logs")
    assert "element 37 done" in logs["data"], logs


def test_cancelling_an_array_midway_cancels_every_element_not_yet_ended(svc):
    api = Api(svc.url, svc.token("alice"))
    code = upload_code(api)
    _, arr = submit(api, {
        "name": "to-cancel", "code": code, "entrypoint": {"argv": ["python3", "rec.py", "--sleep=300", "{index}"]},
        "resources": {"gpus_per_node": 0}, "array": "0-11%3"})
    aid = arr["id"]
    try:
        assert arr["size"] == 12 and arr["max_running"] == 3, arr
        wait_array(api, aid, lambda a: sum(t["status"] == "running" for t in a["tasks"]) == 3, timeout=60,
                   what="3 running")
        running = [t["id"] for t in array_of(api, aid)["tasks"] if t["status"] == "running"]
        pids = {}
        for tid in running:
            pidfile = svc.data_dir / "tasks" / str(tid) / "work" / "pid"
            deadline = time.monotonic() + 10
            while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.05)
            pids[tid] = int(pidfile.read_text())
        # bob cannot see nor cancel it
        bob = Api(svc.url, svc.token("bob"))
        assert bob.call("GET", f"/api/arrays/{aid}")[0] == 404
        assert bob.call("POST", f"/api/arrays/{aid}/cancel")[0] == 404
        assert array_of(api, aid)["counts"].get("cancelled", 0) == 0

        status, out = api.call("POST", f"/api/arrays/{aid}/cancel")
        assert status == 200, (status, out)
        assert out["id"] == aid
        ended = wait_ended(api, element_ids(array_of(api, aid)), timeout=60)
    finally:
        cancel_and_wait(api, [], [aid])
    assert {t["status"] for t in ended.values()} == {"cancelled"}, {k: v["status"] for k, v in ended.items()}
    final = array_of(api, aid)
    assert final["status"] == "cancelled" and final["counts"] == {"cancelled": 12}, final["counts"]
    assert final["running"] == 0 and final["waiting"] == 0
    for tid, pid in pids.items():  # the processes of the running ones are gone too
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pid}"), f"task {tid}'s process {pid} still runs"


def test_tcloud_cancel_array_id_leaves_ended_elements_as_they_ended(svc, tmp_path):
    """``tcloud cancel ARRAY_ID``: elements that already succeeded stay succeeded; the rest end cancelled."""
    d = write_task(tmp_path / "arr", "name: partly-done\ncode: .\n"
                   "entrypoint: {argv: [python3, rec.py, '--sleep={value}']}\n"
                   "resources: {gpus_per_node: 0}\n"
                   "array: {values: [0, 0, 300, 300, 300, 300], max_running: 2}\n", {"rec.py": RECORDER})
    res = tcloud(svc, "alice", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    out = json.loads(res.stdout)
    aid = out["array"]["id"] if "array" in out else out["array_id"]
    api = Api(svc.url, svc.token("alice"))
    try:
        wait_array(api, aid, lambda a: a["counts"].get("succeeded", 0) == 2 and a["counts"].get("running", 0) == 2,
                   timeout=90, what="2 succeeded and 2 running")
        res = tcloud(svc, "alice", "cancel", str(aid))
        assert res.returncode == 0, res.stderr + res.stdout
        ended = wait_ended(api, element_ids(array_of(api, aid)), timeout=60)
    finally:
        cancel_and_wait(api, [], [aid])
    by_index = {t["array_index"]: ended[t["id"]]["status"] for t in array_of(api, aid)["tasks"]}
    assert by_index == {0: "succeeded", 1: "succeeded", 2: "cancelled", 3: "cancelled", 4: "cancelled",
                        5: "cancelled"}, by_index


def test_hostile_parameter_values_reach_the_program_literally(svc):
    api = Api(svc.url, svc.token("alice"))
    code = upload_code(api)
    tag = uuid.uuid4().hex[:10]
    pwned = [f"/tmp/pwned-{tag}-{k}" for k in range(4)]
    values = [
        f"$(touch {pwned[0]})",
        f"`touch {pwned[1]}`",
        f"; touch {pwned[2]}; id",
        f"' \" && touch {pwned[3]} #",
        "line one\nline two",
        "{index}",
        "{value}",
        "$TACC_ARRAY_INDEX ${HOME} %s %n \\",
        "-rf",
    ]
    _, arr = submit(api, {
        "name": "hostile", "code": code,
        "entrypoint": {"argv": ["python3", "rec.py", "--sleep=0", "{value}", "x{value}y", "{index}"]},
        "resources": {"gpus_per_node": 0}, "array": {"values": values}})
    aid = arr["id"]
    # the same values through a shell entrypoint: only ever as "$TACC_PARAM_VALUE", quoted by the user
    _, sharr = submit(api, {
        "name": "hostile-shell", "code": code,
        "entrypoint": {"shell": ['printf "%s" "$TACC_PARAM_VALUE" > shell.txt']},
        "resources": {"gpus_per_node": 0}, "array": {"values": values}})
    try:
        final = wait_array(api, aid, lambda a: a["status"] in TERMINAL, timeout=120, what="ended")
        shfinal = wait_array(api, sharr["id"], lambda a: a["status"] in TERMINAL, timeout=120, what="ended")
    finally:
        cancel_and_wait(api, [], [aid, sharr["id"]])
    assert final["counts"] == {"succeeded": len(values)}, final["counts"]
    assert shfinal["counts"] == {"succeeded": len(values)}, shfinal["counts"]
    for t in final["tasks"]:
        i = t["array_index"]
        rec = record(svc.data_dir, t["id"])
        v = values[i]
        assert rec["argv"] == ["--sleep=0", v, f"x{v}y", str(i)], (i, rec["argv"])
        assert rec["env"]["TACC_PARAM_VALUE"] == v, (i, rec["env"])
        assert rec["params"]["params"] == {"value": v}, rec["params"]
    for t in shfinal["tasks"]:
        got = (svc.data_dir / "tasks" / str(t["id"]) / "work" / "shell.txt").read_text()
        assert got == values[t["array_index"]], (t["array_index"], got)
    for p in pwned:
        assert not os.path.exists(p), f"{p} exists: a parameter value ran"


def test_a_shell_entrypoint_with_a_placeholder_is_refused_naming_the_variable(svc):
    api = Api(svc.url, svc.token("alice"))
    code = upload_code(api)
    status, body = api.call("POST", "/api/tasks", {
        "name": "bad", "code": code, "entrypoint": {"shell": ["echo {lr}"]},
        "resources": {"gpus_per_node": 0}, "array": {"grid": {"lr": [1, 2]}}})
    assert status == 422, (status, body)
    assert "TACC_PARAM_LR" in json.dumps(body), body
    status, body = api.call("POST", "/api/tasks", {
        "name": "typo", "code": code, "entrypoint": {"argv": ["python3", "rec.py", "{lrr}"]},
        "resources": {"gpus_per_node": 0}, "array": {"grid": {"lr": [1, 2]}}})
    assert status == 422 and "entrypoint.argv[2]" in json.dumps(body), (status, body)
    _, mine = api.call("GET", "/api/arrays")
    assert not any(a["name"] in ("bad", "typo") for a in mine["arrays"]), mine


def test_the_sweep_example_through_tcloud(svc):
    """examples/sweep: 6 elements (3 lr x 2 batch sizes), one row in tcloud ps, each element's log by ID:INDEX."""
    res = tcloud(svc, "alice", "submit", str(ROOT / "examples" / "sweep"), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    out = json.loads(res.stdout)
    aid = out["array"]["id"]
    api = Api(svc.url, svc.token("alice"))
    try:
        assert out["array"]["size"] == 6 and out["array"]["max_running"] == 4, out["array"]
        final = wait_array(api, aid, lambda a: a["status"] in TERMINAL, timeout=120, what="ended")
    finally:
        cancel_and_wait(api, [], [aid])
    assert final["counts"] == {"succeeded": 6}, final["counts"]
    ps = tcloud(svc, "alice", "ps")
    assert ps.returncode == 0, ps.stderr
    rows = [ln for ln in ps.stdout.splitlines() if "sweep-example" in ln]
    assert len(rows) == 1 and "sweep-example[6]" in rows[0], ps.stdout
    logs = tcloud(svc, "alice", "logs", f"{aid}:3")
    assert logs.returncode == 0, logs.stderr
    assert "element 3: lr 0.1 batch 64 -> loss" in logs.stdout, logs.stdout
    for t in final["tasks"]:
        result = json.loads((svc.data_dir / "tasks" / str(t["id"]) / "work" / "outputs" / "result.json").read_text())
        assert result["index"] == str(t["array_index"]) and 0 <= result["loss"] < 1, result


def test_a_tuxiv_conf_array_and_afterok_dependency_through_tcloud(svc, tmp_path):
    """tuxiv.conf's ``array=1-4%2`` is an array (index = the number, at most 2 at once), and
    ``dependency=afterok:ID`` waits for that task: as on TACC, submitted with ``tcloud submit FILE``."""
    d = tmp_path / "tuxiv"
    d.mkdir()
    (d / "tuxiv.conf").write_text("entrypoint:\n  - echo idx-$TACC_ARRAY_INDEX-of-$TACC_ARRAY_SIZE; sleep 1\n"
                                  "job:\n  name: tuxiv-array\n  general:\n    - nodes=1\n    - ntasks-per-node=1\n"
                                  "    - array=1-4%2\n")
    res = tcloud(svc, "alice", "submit", str(d / "tuxiv.conf"), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    arr = json.loads(res.stdout)["array"]
    aid = arr["id"]
    assert arr["size"] == 4 and arr["max_running"] == 2, arr
    last = array_of(Api(svc.url, svc.token("alice")), aid)["tasks"][-1]["id"]
    (d / "after.conf").write_text(f"entrypoint:\n  - echo after-ok\njob:\n  name: tuxiv-after\n  general:\n"
                                  f"    - nodes=1\n    - dependency=afterok:{last}\n")
    res = tcloud(svc, "alice", "submit", str(d / "after.conf"), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    after = json.loads(res.stdout)["id"]
    api = Api(svc.url, svc.token("alice"))
    try:
        final = wait_array(api, aid, lambda a: a["status"] in TERMINAL, timeout=120, what="ended")
        t_after = api.wait_status(after, TERMINAL, timeout=60)
    finally:
        cancel_and_wait(api, [after], [aid])
    assert final["counts"] == {"succeeded": 4}, final["counts"]
    assert [t["array_index"] for t in final["tasks"]] == [1, 2, 3, 4]
    for t in final["tasks"]:
        _, logs = api.call("GET", f"/api/tasks/{t['id']}/logs")
        assert f"idx-{t['array_index']}-of-4" in logs["data"], logs
    _, t_last = api.call("GET", f"/api/tasks/{last}")
    assert t_after["status"] == "succeeded" and t_after["started_at"] >= t_last["finished_at"], (t_after, t_last)
