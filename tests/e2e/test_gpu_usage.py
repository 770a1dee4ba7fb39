"""GPU use, shown: a real service samples a real task's GPU slots with a fake nvidia-smi (GET /api/tasks/ID/usage).

This module starts its own service (not the shared one): the sampler's command and interval are service
settings, ``--TaccHub.gpu_query_command`` pointing at ``tests/fake_nvidia_smi.py`` (fixed readings for
slots 0 and 1; a control file switches it to garbage, hanging and failing runs) and
``--TaccHub.gpu_sample_interval=0.5``. The fake appends a line per run to a file, so the test waits for
runs, not for time.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Api, ServiceProcess, tcloud, write_task

FAKE = str(Path(__file__).resolve().parents[1] / "fake_nvidia_smi.py")
READINGS = {0: (37.0, 1000.0), 1: (91.0, 2000.0)}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceProcess, Path]]:
    root = tmp_path_factory.mktemp("gpu-usage")
    control = root / "control"
    control.write_text("ok")
    command = [sys.executable, FAKE, "--control", str(control), "--runs", str(root / "runs"),
               *(f"{i}={u:g},{m:g}" for i, (u, m) in READINGS.items())]
    svc = ServiceProcess(root / "svc", "--gpus=2", "--TaccHub.grace_period=1", "--TaccHub.gpu_sample_interval=0.5",
                         *(f"--TaccHub.gpu_query_command={arg}" for arg in command)).start()
    yield svc, control
    svc.stop()


def runs(control: Path) -> list[str]:
    path = control.parent / "runs"
    return path.read_text().split() if path.exists() else []


def wait_for(pred, what: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not reached: {what}")


def test_a_task_with_one_gpu_gets_its_slots_samples_only(sampled: tuple[ServiceProcess, Path],
                                                         tmp_path: Path) -> None:
    svc = sampled[0]
    tids = {}
    for user in ("alice", "bob"):  # one GPU each: one gets slot 0, the other slot 1
        d = write_task(tmp_path / user, "name: gpu-user\ncode: .\nentrypoint: sleep 300\n"
                       "resources: {gpus_per_node: 1}\n")
        res = tcloud(svc, user, "submit", str(d), "--json")
        assert res.returncode == 0, res.stderr
        tids[user] = json.loads(res.stdout)["id"]
    api = {u: Api(svc.url, svc.token(u)) for u in tids}
    try:
        slots = {}
        for user, tid in tids.items():
            (slots[user],) = api[user].wait_status(tid, {"running"})["placement"]["nodes"][0]["gpus"]
        assert sorted(slots.values()) == [0, 1]
        for user, tid in tids.items():
            util, memory = READINGS[slots[user]]
            body = wait_for(lambda user=user, tid=tid: (lambda b: b if len(b.get("samples", [])) >= 2 else None)(
                api[user].call("GET", f"/api/tasks/{tid}/usage")[1]), "two samples")
            assert set(body) == {"task_id", "interval", "gpus", "samples", "mean_util", "peak_util"}
            assert body["task_id"] == tid and body["interval"] == 0.5 and body["gpus"] == 1
            assert body["mean_util"] == util and body["peak_util"] == util  # its slot's reading, not the other's
            for s in body["samples"]:
                assert set(s) == {"at", "util", "memory_mib", "gpus"}
                assert (s["util"], s["memory_mib"], s["gpus"]) == (util, memory, 1), s
            ats = [s["at"] for s in body["samples"]]
            assert ats == sorted(ats) and abs(ats[-1] - time.time()) < 120
            status, later = api[user].call("GET", f"/api/tasks/{tid}/usage?since={ats[-1]}")
            assert status == 200 and [s["at"] for s in later["samples"]][:1] == [ats[-1]]

        # Others see nothing of a task, as for a task that does not exist; an admin does.
        alice, bob = tids["alice"], tids["bob"]
        for who, other in (("bob", alice), ("alice", bob)):
            status, err = api[who].call("GET", f"/api/tasks/{other}/usage")
            assert status == 404 and err["message"] == f"no task {other}", (who, status, err)
        assert api["bob"].call("GET", "/api/tasks/999999/usage")[0] == 404
        status, seen = Api(svc.url, svc.token("root", admin=True)).call("GET", f"/api/tasks/{alice}/usage")
        assert status == 200 and seen["mean_util"] == READINGS[slots["alice"]][0]
        for bad in ("abc", "1e9", "-5", "nan", "1" * 40, "1.5.5", ""):
            status, err = api["alice"].call("GET", f"/api/tasks/{alice}/usage?since={bad}")
            assert status == 400 and err["errors"][0]["field"] == "since", (bad, status, err)

        # The Python client (tcloud show's efficiency line) reads the same payload.
        from tacc_hub.client import TaccClient

        usage = TaccClient(svc.url, svc.token("alice")).usage(alice)
        assert usage["mean_util"] == READINGS[slots["alice"]][0] and usage["gpus"] == 1
    finally:
        for user, tid in tids.items():
            tcloud(svc, user, "cancel", str(tid))
            api[user].wait_status(tid, {"cancelled"})
    # Samples stay after the run: the efficiency of a finished task can still be shown.
    assert api["alice"].call("GET", f"/api/tasks/{tids['alice']}/usage")[1]["mean_util"] == READINGS[slots["alice"]][0]


def test_garbage_and_hanging_readings_leave_the_service_answering(sampled: tuple[ServiceProcess, Path],
                                                                  tmp_path: Path) -> None:
    svc, control = sampled
    d = write_task(tmp_path / "t", "name: gpu-two\ncode: .\nentrypoint: sleep 300\nresources: {gpus_per_node: 2}\n")
    res = tcloud(svc, "alice", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["id"]
    alice = Api(svc.url, svc.token("alice"))
    alice.wait_status(tid, {"running"})
    both = sum(u for u, _ in READINGS.values()) / 2

    def samples() -> list[dict]:
        status, body = alice.call("GET", f"/api/tasks/{tid}/usage")
        assert status == 200, body
        return list(body["samples"])

    try:
        wait_for(samples, "a first sample")
        for mode in ("garbage", "huge", "fail"):
            control.write_text(mode)
            n = runs(control).count(mode)
            wait_for(lambda mode=mode, n=n: runs(control).count(mode) >= n + 2, f"two {mode} runs")
        # A reading that hangs: the service answers meanwhile; the run is killed at its 5 s limit.
        hang_pid = Path(f"{control}.hang-pid")
        hang_pid.unlink(missing_ok=True)
        control.write_text("hang")
        wait_for(lambda: hang_pid.exists() and hang_pid.read_text(), "a hanging run")
        pid = int(hang_pid.read_text())
        for path in ("/api/health", f"/api/tasks/{tid}/usage", f"/api/tasks/{tid}"):
            assert alice.call("GET", path)[0] == 200
        assert _alive(pid), "the answers above came while the reading hung"
        wait_for(lambda: not _alive(pid), "the hanging run killed")
        control.write_text("ok")
        before = len(samples())
        wait_for(lambda: len(samples()) >= before + 2, "samples again after the faults")
        # Nothing the hostile runs printed became a sample.
        assert {(s["util"], s["memory_mib"], s["gpus"]) for s in samples()} == {(both, 3000.0, 2)}
    finally:
        control.write_text("ok")
        tcloud(svc, "alice", "cancel", str(tid))
        alice.wait_status(tid, {"cancelled"})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
