"""Capture details: another interpreter's packages, a kernel's interpreter, cells."""

from __future__ import annotations

import json
import sys

from tacc_hub.jupyter.capture import CELL_SCRIPT, capture
from tacc_hub.jupyter.envinfo import packages

from .test_extension import call


def test_packages_of_another_interpreter_match_in_process(tmp_path):
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    here, there = packages(None), packages(str(wrapper))
    assert there.python == here.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert there.requirements == here.requirements and any(r.startswith("ipykernel==") for r in there.requirements)
    assert not any(r.lower().startswith(("pip==", "tacc-hub", "tacc_hub")) for r in there.requirements)
    assert any("tacc_hub" in n and "editable" in n for n in there.notes)


def test_capture_for_a_kernel_of_the_server(jp_asyncio_loop, jp_fetch, jp_root_dir):
    (jp_root_dir / "k.py").write_text("print(1)\n")
    resp = jp_asyncio_loop.run_until_complete(jp_fetch("api", "kernels", method="POST", body=json.dumps({})))
    kernel_id = json.loads(resp.body)["id"]
    code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "k.py", "kernel_id": kernel_id})
    assert code == 200 and any(r.startswith("ipykernel==") for r in body["spec"]["environment"]["requirements"])
    code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "k.py", "kernel_id": "nope"})
    assert code == 404
    code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "k.py", "name": 5})
    assert code == 400 and "strings" in body["message"]


def test_cell_capture_runs_from_the_current_folder(tmp_path):
    (tmp_path / "data.txt").write_text("42\n")
    cap = capture(cell="print(open('data.txt').read())", cwd=tmp_path, pin_packages=False,
                  resources={"gpus": 2, "nodes": 2}, runtime="torchrun", name="my cell!")
    assert cap.spec.name == "my-cell" and cap.spec.entrypoint.argv == ["python", CELL_SCRIPT]
    assert cap.spec.resources.total_gpus == 4 and cap.spec.runtime.kind == "torchrun"
    assert cap.files == ["data.txt", CELL_SCRIPT] and not cap.spec.environment.requirements
