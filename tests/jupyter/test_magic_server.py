"""The %tacc magic in a kernel that a real jupyter_server started for a notebook (as Lab does).

The kernel asks the server which notebook it runs and where the server's root is; the test
runs the kernel's cells in a thread so that the server (on the test's loop) can answer it.
"""

from __future__ import annotations

import json
import queue
import re
import time
from typing import Any

from jupyter_client import BlockingKernelClient

from tests.e2e.conftest import Api

from .conftest import Kernel, git, notebook
from .test_extension import call


def in_thread(loop: Any, fn: Any, *args: Any) -> Any:
    """fn(*args) in a worker thread while the server's loop runs (run_in_executor: not the caller's context,
    whose jupyter_client event loop is the server's)."""
    return loop.run_until_complete(loop.run_in_executor(None, fn, *args))


def ready(kc: BlockingKernelClient, timeout: float = 90) -> None:
    """Until the kernel answers kernel_info (not wait_for_ready: it gives up when no heartbeat came yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kc.kernel_info()
        try:
            while True:
                if kc.get_shell_msg(timeout=1)["msg_type"] == "kernel_info_reply":
                    return
        except queue.Empty:
            continue
    raise AssertionError("the kernel did not answer")


def start_session(loop: Any, jp_fetch: Any, jp_serverapp: Any, path: str) -> tuple[str, Kernel]:
    """A notebook session as Lab opens it (kernel started by the server in the notebook's folder)."""
    body = {"path": path, "name": path.rsplit("/", 1)[-1], "type": "notebook", "kernel": {"name": "python3"}}
    resp = loop.run_until_complete(jp_fetch("api", "sessions", method="POST", body=json.dumps(body)))
    session = json.loads(resp.body)
    km = jp_serverapp.kernel_manager.get_kernel(session["kernel"]["id"])
    kc = BlockingKernelClient(connection_file=km.connection_file)
    kc.load_connection_file()
    kc.start_channels()
    in_thread(loop, ready, kc)
    return session["id"], Kernel(km, kc)


def run(loop: Any, kernel: Kernel, code: str) -> dict[str, Any]:
    out = in_thread(loop, kernel.run, code, 120)
    out["text"] = out["stdout"] + out["stderr"] + str(out["error"] or "")
    return out


def save(loop: Any, jp_fetch: Any, path: str, cells: list[str]) -> None:
    body = {"type": "notebook", "format": "json", "content": json.loads(notebook(cells))}
    loop.run_until_complete(jp_fetch("api", "contents", path, method="PUT", body=json.dumps(body)))


def submitted(out: dict[str, Any]) -> tuple[int, str]:
    m = re.search(r"submitted task (\d+) \(.*, spec ([0-9a-f]{12})\)", out["stdout"])
    assert m, out
    return int(m.group(1)), m.group(2)


def test_magic_in_a_folder_inside_someone_elses_repository(jp_asyncio_loop, jp_fetch, jp_serverapp, jp_root_dir,
                                                          tacc_env, monkeypatch):
    """Bug 2: the server's root sits in a git checkout that ignores it (the demo's homes): the magic sent the
    checkout, without the user's script. It must send what the panel sends: the user's folder."""
    loop = jp_asyncio_loop
    monkeypatch.setenv("TACC_CAPTURE_PACKAGES", "0")
    outer = jp_root_dir.parent
    (outer / ".gitignore").write_text(f"/{jp_root_dir.name}/\n")
    (outer / "theirs.py").write_text("print('not the user's')\n")
    git(outer, "init", "-q")
    git(outer, "add", ".gitignore", "theirs.py")
    git(outer, "commit", "-qm", "someone else's project")
    work = jp_root_dir / "work"
    work.mkdir()
    (work / "slow.py").write_text("import helper\nprint('slow.py ran with', helper.VALUE)\n")
    (work / "helper.py").write_text("VALUE = 42\n")
    save(loop, jp_fetch, "work/nb.ipynb", ["%tacc submit slow.py --no-monitor"])
    _, kernel = start_session(loop, jp_fetch, jp_serverapp, "work/nb.ipynb")
    try:
        assert run(loop, kernel, "%load_ext tacc_hub")["status"] == "ok"
        out = run(loop, kernel, "%tacc submit slow.py --no-monitor")
        assert out["status"] == "ok", out
        tid, digest = submitted(out)
    finally:
        kernel.kc.stop_channels()
    api = Api(tacc_env.url, tacc_env.token("nbuser"))
    api.wait_status(tid, {"succeeded", "failed"}, timeout=120)
    log = api.call("GET", f"/api/tasks/{tid}/logs")[1]["data"]
    assert "slow.py ran with 42" in log, log  # was: python: can't open file '.../slow.py'

    assert "starts above your Jupyter root" in out["stderr"], out
    # the panel captures the same file the same way: the same spec
    code, panel = call(loop, jp_fetch, "POST", "capture", body={"path": "work/slow.py", "packages": False})
    assert code == 200 and panel["digest"][:12] == digest, panel
    assert "theirs.py" not in panel["files"] and "slow.py" in panel["files"]


def test_magic_submits_the_notebook_as_the_user_sees_it(jp_asyncio_loop, jp_fetch, jp_serverapp, jp_root_dir,
                                                        tacc_env, monkeypatch):
    """Bug 3: never run a stale or renamed-away file: ask the server for the notebook's path now, and
    refuse what is not saved (the cell that submits is not in the file) or has no code."""
    loop = jp_asyncio_loop
    monkeypatch.setenv("TACC_CAPTURE_PACKAGES", "0")
    save(loop, jp_fetch, "Untitled.ipynb", [])  # Lab writes a new notebook empty
    sid, kernel = start_session(loop, jp_fetch, jp_serverapp, "Untitled.ipynb")
    submit = "%tacc submit --no-monitor"
    try:
        run(loop, kernel, "%load_ext tacc_hub")
        out = run(loop, kernel, submit)  # typed, run, never saved
        assert "save the notebook first (Ctrl+S)" in out["text"] and "submitted" not in out["text"], out
        assert "Traceback" not in out["text"]

        # Lab's rename-on-first-save: the file moves, the session follows; the kernel was told Untitled.ipynb
        loop.run_until_complete(jp_fetch("api", "contents", "Untitled.ipynb", method="PATCH",
                                         body=json.dumps({"path": "analysis.ipynb"})))
        loop.run_until_complete(jp_fetch("api", "sessions", sid, method="PATCH",
                                         body=json.dumps({"path": "analysis.ipynb", "name": "analysis.ipynb"})))
        save(loop, jp_fetch, "analysis.ipynb", ["x = 6 * 7", "print('renamed notebook says', x)", submit])
        out = run(loop, kernel, submit)
        assert out["status"] == "ok", out
        tid, _ = submitted(out)

        out = run(loop, kernel, submit + " --time 5m")  # edited, not saved
        assert "save the notebook first" in out["text"] and "submitted" not in out["text"], out

        save(loop, jp_fetch, "analysis.ipynb", ["# to do", "%load_ext tacc_hub", submit])
        out = run(loop, kernel, submit)
        assert "has no code to run" in out["text"] and "submitted" not in out["text"], out
    finally:
        kernel.kc.stop_channels()
    api = Api(tacc_env.url, tacc_env.token("nbuser"))
    task = api.wait_status(tid, {"succeeded", "failed"}, timeout=120)
    assert task["status"] == "succeeded" and task["name"] == "analysis", task
    log = api.call("GET", f"/api/tasks/{tid}/logs")[1]["data"]
    assert "renamed notebook says 42" in log, log
