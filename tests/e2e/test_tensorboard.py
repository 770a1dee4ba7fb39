"""A real TensorBoard beside a task (spec ``tensorboard``), on the local executor of a real ``tacc-hub serve``.

The task is the DDP example (its train.py, its environment, its ``tensorboard: {logdir: runs}``), held up
after training so that its TensorBoard can be looked at; TensorBoard (PyPI ``tensorboard``, the site's
default command) reads the event files the training loop wrote. Checked: through the service's proxy
(``/tasks/ID/proxy/PORT/``, prefix stripped, TensorBoard without --path_prefix) the run and its scalar tags
come back, with every step's value; TensorBoard runs as the owner, on the loopback only, its output apart
from the task's log; bob gets 404 on alice's TensorBoard; it is gone when the task ends.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import urllib3
import yaml

from tests import accounts

from .conftest import ROOT, Api, ServiceProcess, tcloud

EPOCHS, STEPS = 3, 5


def example_task_dir(tmp_path: Path) -> Path:
    """The example, as is but for its entrypoint: train (2 ranks), then stay up until cancelled (also used by
    tests/hub/test_tensorboard_browser.py)."""
    src = ROOT / "examples" / "ddp"
    spec = yaml.safe_load((src / "tacc.yaml").read_text())
    assert spec["tensorboard"] == {"logdir": "runs"}  # the example asks for it; this test relies on that
    spec["resources"].update(tasks_per_node=1, cpus_per_task=2)  # the shell starts the two ranks itself
    spec.update(name="tb-e2e", runtime={"kind": "plain"}, entrypoint={"shell": [
        f"python -m torch.distributed.run --standalone --nproc-per-node=2 train.py --epochs {EPOCHS} "
        f"--steps {STEPS}",
        "echo trained",
        "exec sleep 600",
    ]})
    dest = tmp_path / "tb-task"
    dest.mkdir()
    shutil.copy(src / "train.py", dest / "train.py")
    (dest / "tacc.yaml").write_text(yaml.safe_dump(spec))
    return dest


def _listeners(port: int) -> list[tuple[str, int]]:
    """(local address, uid) of every TCP socket listening on ``port`` on this machine (/proc/net/tcp{,6})."""
    out = []
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            f = line.split()
            addr, hexport = f[1].rsplit(":", 1)
            if f[3] == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                out.append((addr, int(f[7])))
    return out


def wait_for(what: str, probe, timeout: float = 120):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout:g} s (last: {last!r})")


def test_tensorboard_beside_the_example_through_the_proxy(service: ServiceProcess, tmp_path: Path) -> None:
    res = tcloud(service, "alice", "submit", str(example_task_dir(tmp_path)))
    assert res.returncode == 0, res.stderr + res.stdout
    task_id = int(re.search(r"submitted task (\d+)", res.stdout + res.stderr).group(1))
    alice, bob = Api(service.url, service.token("alice")), Api(service.url, service.token("bob"))
    try:
        alice.wait_status(task_id, {"running"}, timeout=300)
        log = wait_for("the training ends", lambda: (t := alice.call("GET", f"/api/tasks/{task_id}/logs")[1]
                                                    .get("data", "")) and "trained" in t and t, timeout=300)
        m = re.search(r"tacc: TensorBoard on port (\d+), reading runs \(its output: tensorboard\.log\)", log)
        assert m, log
        port = int(m.group(1))
        assert "rank 0/2 done: weights in sync across ranks: True" in log
        assert "TensorBoard 2." not in log  # TensorBoard's own output is in tensorboard.log, not in the task's log

        # the port is the task's TensorBoard in the ports listing
        status, ports = alice.call("GET", f"/api/tasks/{task_id}/ports")
        assert status == 200, ports
        [entry] = [p for p in ports["ports"] if p["port"] == port]
        assert entry["label"] == "TensorBoard" and entry["url"] == f"/tasks/{task_id}/proxy/{port}/"

        # TensorBoard runs as alice, on the loopback only
        listeners = wait_for("TensorBoard listens", lambda: _listeners(port))
        assert listeners == [("0100007F", accounts.uid("alice"))], listeners

        # through the proxy: the run, its scalar tags, every step of the loss
        base = f"/tasks/{task_id}/proxy/{port}"
        # (TensorBoard started before runs/ existed; it reloads its log directory every few seconds)
        runs = wait_for("TensorBoard finds the run", lambda: (r := alice.call("GET", f"{base}/data/runs"))[0] == 200
                     and r[1])
        assert runs == ["."], runs  # the event files lie in runs/ itself
        tags = wait_for("TensorBoard has read the event files", lambda: (
            (r := alice.call("GET", f"{base}/data/plugin/scalars/tags"))[0] == 200
            and {"train/loss", "train/lr"} <= set(r[1].get(".", {})) and r[1]))
        assert set(tags["."]) == {"train/loss", "train/lr"}, tags
        http = urllib3.PoolManager()
        auth = {"Authorization": f"token {service.token('alice')}"}
        r = http.request("GET", f"{service.url}{base}/data/plugin/scalars/scalars?run=.&tag=train/loss",
                         headers=auth, retries=False, timeout=30)
        assert r.status == 200, r.data[:300]
        points = json.loads(r.data)
        assert [p[1] for p in points] == list(range(EPOCHS * STEPS))
        assert points[-1][2] < points[0][2]  # the loss went down
        page = http.request("GET", f"{service.url}{base}/", headers=auth, retries=False, timeout=30)
        assert page.status == 200 and b"<title>TensorBoard</title>" in page.data
        assert b'name="tb-relative-root" content="./"' in page.data  # relative URLs: no --path_prefix needed

        # bob: as if there were no such task; nobody without a token
        status, body = bob.call("GET", f"{base}/data/runs")
        assert status == 404, body
        assert Api(service.url, None).call("GET", f"{base}/data/runs")[0] in (401, 403)

        tb_log = service.data_dir / "tasks" / str(task_id) / "tensorboard.log"
        assert "TensorBoard 2." in tb_log.read_text()
    finally:
        tcloud(service, "alice", "cancel", str(task_id))
    alice.wait_status(task_id, {"cancelled"}, timeout=60)
    wait_for("TensorBoard ends with its task", lambda: not _listeners(port), timeout=30)
