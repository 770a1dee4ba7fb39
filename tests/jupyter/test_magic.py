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
