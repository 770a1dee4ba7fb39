"""A real TensorBoard beside a task (spec ``tensorboard``), on the local executor of a real ``tacc-hub serve``.

The task is the DDP example (its train.py, its environment, its ``tensorboard: {logdir: runs}``), held up
after training so that its TensorBoard can be looked at; TensorBoard (PyPI ``tensorboard``, the site's
default command) reads the event files the training loop wrote. Checked: through the service's proxy
(``/tasks/ID/proxy/PORT/``, prefix stripped; the proxy adds TensorBoard's secret path prefix) the run and its
scalar tags come back, with every step's value, and TensorBoard's own redirect comes back without the secret;
TensorBoard runs as the owner, on the loopback only, its output apart from the task's log; bob gets 404 on
alice's TensorBoard through the proxy, and, attacking from his own account on this machine (``runuser``), 404
at 127.0.0.1:PORT itself, and finds the secret in no command line, environment or file he can read; it is
gone when the task ends.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
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


# bob's view of alice's TensorBoard from this machine: the port itself, every command line and environment of
# the machine, TensorBoard's info files and alice's task dir, as far as he can read them (printed as JSON)
BOB_PROBE = r"""
import glob, json, os, sys, urllib.error, urllib.request
port, taskdir = int(sys.argv[1]), sys.argv[2]
out = {"uid": os.getuid(), "http": {}, "cmdlines": {}, "environ": {}, "files": {}}
for path in ("/", "/data/runs", "/data/plugin/scalars/tags", "/data/environment", "/index.html"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=20) as r:
            out["http"][path] = [r.status, r.read(65536).decode("latin-1")]
    except urllib.error.HTTPError as e:
        out["http"][path] = [e.code, e.read(65536).decode("latin-1")]
for d in glob.glob("/proc/[0-9]*"):
    for name in ("cmdline", "environ"):
        try:
            with open(f"{d}/{name}", "rb") as f:
                out["cmdlines" if name == "cmdline" else "environ"][d] = f.read().decode("latin-1")
        except OSError:
            pass
for path in glob.glob("/tmp/.tensorboard-info/*") + glob.glob(taskdir + "/**", recursive=True):
    try:
        with open(path, "rb") as f:
            out["files"][path] = f.read(1 << 20).decode("latin-1")
    except OSError:
        pass
print(json.dumps(out))
"""


def _secret(service: ServiceProcess, task_id: int) -> str:
    """The task's TensorBoard secret, from the service's database (no task and no other user can read it)."""
    from tacc_hub.store import Store

    store = Store(f"sqlite:///{service.state_dir.resolve() / 'tacc.sqlite'}")
    try:
        rec = store.get(task_id)
        assert rec is not None
        return str((rec.executor_state or {})["tensorboard_secret"])
    finally:
        store.close()


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

        # the secret: the proxy sends it, the caller never sees it (not in the page; TensorBoard's redirect
        # /<secret>/experiment/e -> /<secret>/experiment/e/ comes back under the proxy's path)
        secret = _secret(service, task_id)
        assert len(secret) >= 32 and secret.encode() not in page.data and page.data.rstrip().endswith(b"</html>")
        r = http.request("GET", f"{service.url}{base}/experiment/e", headers=auth, retries=False, redirect=False,
                         timeout=30)
        assert r.status == 301 and r.headers["Location"] == f"{base}/experiment/e/", (r.status, r.headers)
        assert secret not in json.dumps(dict(r.headers)) and secret.encode() not in r.data
        # TensorBoard names its own absolute paths in two JSON answers: given back under the proxy's prefix
        for encoding in ("identity", "gzip"):
            got = {}
            for what in ("environment", "plugins_listing"):
                r = http.request("GET", f"{service.url}{base}/data/{what}", retries=False, timeout=30,
                                 headers={**auth, "Accept-Encoding": encoding})
                assert r.status == 200 and secret.encode() not in r.data, (r.status, r.data[:300])
                got[what] = json.loads(r.data)
            flags = got["environment"]["debug"]["flags"]  # its flags, --path_prefix among them
            assert flags["path_prefix"] == base and flags["port"] == port, flags
            iframes = [p["loading_mechanism"]["module_path"] for p in got["plugins_listing"].values()
                       if p.get("loading_mechanism", {}).get("type") == "IFRAME"]
            assert iframes and all(m.startswith(f"{base}/data/plugin/") for m in iframes), iframes

        # the raw TCP tunnel (tcloud port-forward) cannot carry the secret: refused, naming the proxy
        status, body = alice.call("GET", f"/api/tasks/{task_id}/ports/{port}/tunnel")
        assert status == 409 and f"tcloud open {task_id}" in body["message"], body

        # bob: as if there were no such task; nobody without a token
        status, body = bob.call("GET", f"{base}/data/runs")
        assert status == 404, body
        assert Api(service.url, None).call("GET", f"{base}/data/runs")[0] in (401, 403)

        # bob on this machine, straight at the port: TensorBoard answers 404 to all he can ask, and the secret
        # is in nothing he can read (ps, /proc/*/cmdline and environ, TensorBoard's info files, alice's files)
        taskdir = service.data_dir / "tasks" / str(task_id)
        probe = subprocess.run(["runuser", "-u", "bob", "--", "/usr/bin/python3", "-c", BOB_PROBE, str(port),
                                str(taskdir)], capture_output=True, text=True, timeout=120, check=False, cwd="/")
        assert probe.returncode == 0, probe.stderr
        seen = json.loads(probe.stdout)
        assert seen["uid"] == accounts.uid("bob")
        assert {path: status for path, (status, _) in seen["http"].items()} == dict.fromkeys(seen["http"], 404), \
            seen["http"]
        assert not any("train/loss" in body for _, body in seen["http"].values())
        tb_procs = [pid for pid, cmd in seen["cmdlines"].items() if f"--port\0{port}\0" in cmd]
        assert tb_procs, "bob's probe saw no TensorBoard command line: it would prove nothing"
        assert not set(tb_procs) & set(seen["environ"])  # alice's processes' environments: closed to bob
        assert secret not in probe.stdout, [k for k, v in {**seen["cmdlines"], **seen["environ"], **seen["files"]}
                                            .items() if secret in v]
        ps = subprocess.run(["ps", "-eo", "args", "ww"], capture_output=True, text=True, timeout=30, check=True)
        assert f"--port {port}" in ps.stdout and secret not in ps.stdout

        tb_log = taskdir / "tensorboard.log"
        assert "TensorBoard 2." in tb_log.read_text() and secret not in tb_log.read_text()  # masked in its output
    finally:
        tcloud(service, "alice", "cancel", str(task_id))
    alice.wait_status(task_id, {"cancelled"}, timeout=60)
    wait_for("TensorBoard ends with its task", lambda: not _listeners(port), timeout=30)
