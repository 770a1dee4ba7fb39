"""The %tacc magic in a real IPython kernel (jupyter_client) against the real tacc service."""

from __future__ import annotations

import re

from tests.e2e.conftest import Api

from .conftest import wait_for

WIDGET = "application/vnd.jupyter.widget-view+json"


def submitted_id(out: dict) -> int:
    m = re.search(r"submitted task (\d+)", out["stdout"])
    assert m, out
    return int(m.group(1))


def test_magic_submit_logs_and_monitor(kernel, service):
    api = Api(service.url, service.token("magicuser"))
    (kernel.cwd / "script.py").write_text("import sys\nprint('hello from the script', sys.argv[1:])\n")
    out = kernel.run("%load_ext tacc_hub")
    assert out["status"] == "ok" and not out["error"], out

    out = kernel.run("mon = %tacc submit script.py --name magic-script -- --flag\nmon")
    assert out["status"] == "ok", out
    tid = submitted_id(out)
    assert any(WIDGET in d for d in out["data"]), out  # the ipywidgets monitor is displayed
    assert api.wait_status(tid, {"succeeded", "failed"}, timeout=120)["status"] == "succeeded"

    out = kernel.run(f"%tacc logs {tid}")
    assert "hello from the script ['--flag']" in out["stdout"], out

    # The monitor's asyncio task, on the kernel's loop, brought the widgets up to date.
    def monitor_done() -> dict | None:
        o = kernel.run("print(mon.status, mon.done, mon.cancel_button.disabled, repr(mon.log_view.value))")
        return o if "succeeded True True" in o["stdout"] else None

    done = wait_for(monitor_done, timeout=30, interval=0.5)
    assert "hello from the script" in done["stdout"]

    out = kernel.run("%tacc ps")
    assert re.search(rf"\b{tid}\s+succeeded\s+magic-script", out["stdout"]), out


def test_magic_cancel_and_cell(kernel, service):
    api = Api(service.url, service.token("magicuser"))
    kernel.run("%load_ext tacc_hub")
    (kernel.cwd / "long.py").write_text("import time\nprint('long', flush=True)\ntime.sleep(120)\n")
    out = kernel.run("%tacc submit long.py --no-monitor")
    tid = submitted_id(out)
    api.wait_status(tid, {"running"}, timeout=60)
    out = kernel.run(f"%tacc cancel {tid}")
    assert re.search(rf"task {tid}: (cancelling|cancelled)", out["stdout"]), out
    assert api.wait_status(tid, {"cancelled", "failed", "succeeded"}, timeout=60)["status"] == "cancelled"

    out = kernel.run("%%tacc --name a-cell --no-monitor\nprint('cell ran', 6 * 7)\n")
    cid = submitted_id(out)
    assert api.wait_status(cid, {"succeeded", "failed"}, timeout=120)["status"] == "succeeded"
    out = kernel.run(f"%tacc logs {cid} -f")
    assert "cell ran 42" in out["stdout"] and f"[task {cid} succeeded]" in out["stdout"], out


def test_magic_submits_its_own_notebook(kernel, service):
    from .conftest import notebook

    api = Api(service.url, service.token("magicuser"))
    kernel.run("%load_ext tacc_hub")
    submit = "%tacc submit --no-monitor --time 5m"
    # no server answers for this kernel: the notebook it was started for, saved with the cell that submits
    (kernel.cwd / "current.ipynb").write_text(notebook(["x = 20 + 1", "print('notebook says', x * 2)", submit]))
    out = kernel.run(submit)
    tid = submitted_id(out)
    task = api.wait_status(tid, {"succeeded", "failed"}, timeout=120)
    assert task["status"] == "succeeded" and task["name"] == "current"
    out = kernel.run(f"%tacc logs {tid}")
    assert "notebook says 42" in out["stdout"], out


def test_magic_user_errors_have_no_traceback(kernel):
    kernel.run("%load_ext tacc_hub")
    (kernel.cwd / "script.py").write_text("print('x')\n")
    for line, expect in [
        ("%tacc submit --gpus many script.py", "invalid int value"),
        ("%tacc frobnicate", "invalid choice"),
        ("%tacc logs 999999", "HTTP 404"),
        ("%tacc submit does-not-exist.py", "is not a file"),
        ("%tacc submit script.py --gpus 99 --no-monitor", "resources.gpus_per_node"),
    ]:
        out = kernel.run(line)
        text = out["stdout"] + out["stderr"] + str(out["error"] or "")
        assert expect in text, (line, out)
        assert "Traceback" not in text, (line, out)


def test_monitor_shows_the_log_tail_one_status_line_and_no_cancel_once_ended(kernel, service):
    """Bug 7 (monitor): the log box showed the head of the log, the status repeated ("cancelled
    cancelled"), the queue line had a stray comma, Cancel stayed after the end; the estimate is the
    service's, the same as its task list (the Lab panel's route) gives."""
    api = Api(service.url, service.token("magicuser"))
    kernel.run("%load_ext tacc_hub")
    (kernel.cwd / "many.py").write_text("for i in range(100):\n    print('line', i)\n")
    (kernel.cwd / "hog.py").write_text("import time\nprint('hogging', flush=True)\ntime.sleep(300)\n")
    out = kernel.run("mon = %tacc submit many.py\nmon")
    tid = submitted_id(out)
    assert api.wait_status(tid, {"succeeded", "failed"}, timeout=120)["status"] == "succeeded"
    done = wait_for(lambda: kernel.run("print(mon.done)")["stdout"].strip() == "True", timeout=30, interval=0.5)
    assert done
    shown = kernel.run("print(repr(mon.log_view.value), mon.cancel_button.layout.display)")["stdout"]
    assert "line 99" in shown and "'line 0\\n" not in shown and "line 87\\n" not in shown, shown
    assert shown.strip().endswith("none"), shown  # no Cancel on an ended task

    hog = submitted_id(kernel.run("%tacc submit hog.py --gpus 2 --time 10m --no-monitor"))
    try:
        api.wait_status(hog, {"running"}, timeout=60)
        out = kernel.run("mon = %tacc submit many.py --gpus 1 --name waiter\nmon")
        wid = submitted_id(out)

        def same_estimate() -> str | None:
            o = kernel.run("print(mon.task.get('queue') and mon.task['queue']['estimated_start']); "
                           "print(mon.title.value)")["stdout"]
            _, listing = api.call("GET", "/api/tasks")
            mine = next(t for t in listing["tasks"] if t["id"] == wid)
            est = (mine.get("queue") or {}).get("estimated_start")
            return o if est is not None and o.split("\n")[0] == repr(est) else None

        title = wait_for(same_estimate, timeout=30, interval=0.5).split("\n")[1]
        assert re.search(r"pending: position \d+, starts in \d+[smhd] \(Resources", title), title
        assert ", (" not in title, title

        out = kernel.run("mon.cancel_button.click()")
        assert api.wait_status(wid, {"cancelled"}, timeout=60)
        ended = wait_for(lambda: (lambda o: o if "cancelled" in o else None)(
            kernel.run("print(mon.done, mon.title.value, mon.cancel_button.layout.display)")["stdout"]), timeout=30)
        assert ended.count("cancelled") == 1 and ended.strip().endswith("none"), ended
    finally:
        api.call("POST", f"/api/tasks/{hog}/cancel")
