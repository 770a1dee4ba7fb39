"""Capture details: another interpreter's packages, a kernel's interpreter, cells."""

from __future__ import annotations

import io
import json
import sys
import tarfile

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
    assert not any(r.lower().startswith("pip==") for r in there.requirements)
    assert there.notes == here.notes


def test_pinning_leaves_out_what_cannot_be_rebuilt(monkeypatch):
    from tacc_hub.jupyter import envinfo

    dists = [
        ["numpy", "1.26.4", None],
        ["Numpy", "1.26.4", None],  # a second copy on the path: pinned once
        ["pip", "24.0", None],
        ["mylib", "0.1", json.dumps({"url": "file:///home/u/mylib", "dir_info": {"editable": True}})],
        ["local", "2.0", json.dumps({"url": "file:///tmp/local-2.0.tar.gz", "archive_info": {}})],
        ["fromgit", "3.0", json.dumps({"url": "https://example.org/r.git", "vcs_info": {"vcs": "git"}})],
        ["wheel-url", "4.0", json.dumps({"url": "https://example.org/w-4.0-py3-none-any.whl", "archive_info": {}})],
    ]
    monkeypatch.setattr(envinfo, "_inventory", lambda python: {"python": "3.12", "dists": dists})
    pk = envinfo.packages("/some/other/python")
    assert pk.python == "3.12"
    assert pk.requirements == ["numpy==1.26.4", "wheel-url @ https://example.org/w-4.0-py3-none-any.whl"]
    assert [n.split(":")[0] for n in pk.notes] == ["skipped fromgit 3.0", "skipped local 2.0", "skipped mylib 0.1"]
    assert "editable" in pk.notes[2]


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


def test_conda_environment_is_captured(tmp_path, monkeypatch):
    conda = tmp_path / "conda"
    doc = {"name": "research", "channels": ["conda-forge"],
           "dependencies": ["python=3.11.9", "numpy=1.26.4", {"pip": ["einops==0.8.0"]}]}
    check = "[ \"$1 $2 $3\" = 'env export --prefix' ] || exit 3"
    conda.write_text(f"#!/bin/sh\n{check}\ncat <<'J'\n{json.dumps(doc)}\nJ\n")
    conda.chmod(0o755)
    monkeypatch.setenv("CONDA_EXE", str(conda))
    monkeypatch.setenv("CONDA_PREFIX", str(tmp_path / "env"))
    (tmp_path / "s.py").write_text("print(1)\n")
    cap = capture(tmp_path / "s.py")
    assert cap.spec.environment.conda is not None and not cap.spec.environment.requirements
    assert cap.spec.environment.conda.dependencies == ["python=3.11.9", "numpy=1.26.4"]
    assert cap.spec.environment.conda.channels == ["conda-forge"]
    assert any("1 pip packages inside the conda env" in n for n in cap.notes)


def test_plain_ipython_prints_instead_of_a_monitor(service, tmp_path, monkeypatch, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    from tests.e2e.conftest import Api

    monkeypatch.setenv("TACC_URL", service.url)
    monkeypatch.setenv("TACC_TOKEN", service.token("plainuser"))
    monkeypatch.setenv("TACC_CONFIG", "/nonexistent")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.py").write_text("print('plain ipython')\n")
    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "tacc_hub")
        result = shell.run_line_magic("tacc", "submit p.py --no-packages")
    finally:
        InteractiveShell.clear_instance()
    out = capsys.readouterr().out
    assert result is None and "submitted task" in out and "follow it with: %tacc logs" in out, out
    tid = int(out.split("submitted task ")[1].split()[0])
    api = Api(service.url, service.token("plainuser"))
    assert api.wait_status(tid, {"succeeded", "failed"}, timeout=120)["status"] == "succeeded"


def test_the_same_code_elsewhere_has_the_same_digest(tmp_path):
    import shutil

    from .conftest import git

    first = tmp_path / "a" / "proj"
    first.mkdir(parents=True)
    (first / "run.py").write_text("print('v1')\n")
    git(first, "init", "-q")
    git(first, "add", ".")
    git(first, "commit", "-qm", "c")
    (first / "run.py").write_text("print('v2')\n")
    second = tmp_path / "b" / "elsewhere"
    shutil.copytree(first, second, symlinks=True)
    one = capture(first / "run.py", pin_packages=False)
    two = capture(second / "run.py", pin_packages=False)
    assert one.git["toplevel"] != two.git["toplevel"] and one.digest == two.digest
    assert ".tacc-capture/git.diff" in one.files and "+print('v2')" in one.diff


def test_the_script_the_task_runs_is_sent_even_where_git_ignores_it(tmp_path):
    from tacc_hub.jupyter.capture import CaptureError

    from .conftest import git

    (tmp_path / ".gitignore").write_text("scratch*.py\n")
    (tmp_path / "lib.py").write_text("X = 1\n")
    (tmp_path / "scratch_run.py").write_text("import lib\nprint(lib.X)\n")
    (tmp_path / "scratch_other.py").write_text("print('not this one')\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".gitignore", "lib.py")
    git(tmp_path, "commit", "-qm", "c")
    cap = capture(tmp_path / "scratch_run.py", pin_packages=False, project_root=tmp_path)
    assert "scratch_run.py" in cap.files and "lib.py" in cap.files and "scratch_other.py" not in cap.files
    assert any("scratch_run.py is ignored by git: sent anyway" in n for n in cap.notes), cap.notes
    try:
        capture(tmp_path / "scratch_run.py", pin_packages=False, project_root=tmp_path, code="git")
    except CaptureError as exc:
        assert "ignored by git, so a clone would not have it" in exc.message
    else:
        raise AssertionError("code 'git' sent a task whose script a clone lacks")


def test_a_notebook_without_code_is_refused_and_its_own_submit_lines_are_left_out(tmp_path):
    from tacc_hub.jupyter.capture import CaptureError

    from .conftest import notebook

    nb = tmp_path / "nb.ipynb"
    nb.write_text(notebook(["%load_ext tacc_hub\nx = 1", "mon = %tacc submit --gpus 1", "%%tacc\nprint('own task')"]))
    cap = capture(nb, pin_packages=False)
    with tarfile.open(fileobj=io.BytesIO(cap.archive)) as tar:
        script = tar.extractfile("nb.tacc.py").read().decode()  # type: ignore[union-attr]
    assert "x = 1" in script and "tacc" not in script.replace("nb.tacc", ""), script
    nb.write_text(notebook(["# nothing yet", "%tacc submit", ""]))
    try:
        capture(nb, pin_packages=False)
    except CaptureError as exc:
        assert "has no code to run" in exc.message
    else:
        raise AssertionError("an empty notebook was captured")
