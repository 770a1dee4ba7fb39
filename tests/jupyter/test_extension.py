"""The tacc_hub server extension in a real jupyter_server, against the real tacc service."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from tacc_hub.schema import spec_from_data
from tacc_hub.snapshot import digest_of
from tests.accounts import data_dir

from .conftest import git, notebook


def call(loop, jp_fetch, method: str, *parts: str, body: dict | None = None, params: dict | None = None,
         headers: dict | None = None):
    kw = {"method": method, "raise_error": False, "params": params or {}}
    if body is not None:
        kw["body"] = json.dumps(body)
    if headers is not None:
        kw["headers"] = headers
    resp = loop.run_until_complete(jp_fetch("tacc", "api", *parts, **kw))
    text = resp.body.decode()
    return resp.code, (json.loads(text) if text and resp.headers.get("Content-Type", "").startswith("application/json")
                       else text)


def make_repo(root: Path) -> Path:
    repo = root / "proj"
    repo.mkdir()
    (repo / "helper.py").write_text("GREETING = 'hello'\n")
    (repo / "analysis.ipynb").write_text(notebook(["from helper import GREETING", "print(GREETING, 'from nb')"]))
    (repo / ".gitignore").write_text("data/\n")
    (repo / "data").mkdir()
    (repo / "data" / "big.bin").write_bytes(b"\0" * 1000)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    return repo


def test_capture_notebook_in_git_repo(jp_asyncio_loop, jp_fetch, jp_root_dir, tacc_env):
    repo = make_repo(jp_root_dir)
    (repo / "helper.py").write_text("GREETING = 'hello, dirty'\n")  # uncommitted change
    (repo / "-n; rm -rf ~ $(x).py").write_text("# a hostile untracked file name\n")
    req = {"path": "proj/analysis.ipynb", "resources": {"gpus": 1, "time": "10m"}, "runtime": "plain"}

    code, first = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body=req)
    assert code == 200, first
    spec = first["spec"]
    assert spec["entrypoint"]["argv"] == ["python", "analysis.tacc.py"]
    assert spec["resources"]["gpus_per_node"] == 1 and spec["resources"]["time_limit"] == 600
    assert spec["code"]["kind"] == "snapshot"
    assert spec["environment"]["python"].startswith("3.")
    assert any(r.startswith("nbconvert==") for r in spec["environment"]["requirements"])
    # What the service validates; the digest is the one tcloud computes (spec with the snapshot's sha256).
    assert spec_from_data(spec).digest == first["digest"]
    assert {"helper.py", "analysis.ipynb", "analysis.tacc.py", ".tacc-capture/git.json", ".tacc-capture/git.diff",
            "-n; rm -rf ~ $(x).py"} <= set(first["files"])
    assert not any(f.startswith("data/") for f in first["files"])  # ignored by git: not sent
    assert "+GREETING = 'hello, dirty'" in first["diff"]
    assert first["git"]["dirty"] and len(first["git"]["commit"]) == 40

    code, again = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body=req)
    assert code == 200 and again["digest"] == first["digest"]  # deterministic

    (repo / "helper.py").write_text("GREETING = 'hello, dirtier'\n")
    code, changed = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body=req)
    assert code == 200 and changed["digest"] != first["digest"]
    assert changed["spec"]["code"]["digest"] != spec["code"]["digest"]
    assert not (jp_root_dir / "x").exists()

    # The service accepts it as it is, pinned packages included (compiled, not run: a dry run).
    from tacc_hub.client import TaccClient

    with TaccClient(tacc_env.url, tacc_env.token("nbuser")) as client:
        plan = client.submit(changed["spec"], dry_run=True)
    assert plan["digest"] == changed["digest"] and plan["plan"]["env"]["kind"] == "venv", plan

    # a bad resource value is a field error, not a crash
    code, bad = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={**req, "resources": {"gpus": -1}})
    assert code == 400 and bad["errors"][0]["field"] == "resources.gpus_per_node"


def test_capture_refuses_paths_outside_root(jp_asyncio_loop, jp_fetch, jp_root_dir, tmp_path):
    outside = tmp_path / "secret.py"
    outside.write_text("print('secret')\n")
    (jp_root_dir / "link.py").symlink_to(outside)
    (jp_root_dir / "ok.py").write_text("print('ok')\n")
    for path in ["../secret.py", str(outside), "link.py", "sub/../../secret.py"]:
        code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": path, "packages": False})
        assert code == 403, (path, body)
        assert "secret" not in json.dumps(body.get("spec", {}))
    code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "ok.py", "packages": False})
    assert code == 200 and "ok.py" in body["files"]
    assert "link.py" not in body["files"]  # a link leaving the root is not code
    # jupyter_server's own authentication guards the routes
    code, _ = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "ok.py"},
                   headers={"Authorization": "token wrong"})
    assert code == 403


def test_submit_runs_and_logs_are_relayed(jp_asyncio_loop, jp_fetch, jp_root_dir, tacc_env):
    loop = jp_asyncio_loop
    make_repo(jp_root_dir)
    code, out = call(loop, jp_fetch, "POST", "submit",
                     body={"path": "proj/analysis.ipynb", "packages": False, "name": "nb-run"})
    assert code == 200, out
    task = out["task"]
    assert task["name"] == "nb-run" and task["digest"] == out["digest"]
    tid = str(task["id"])

    async def until_done() -> dict:
        for _ in range(600):
            resp = await jp_fetch("tacc", "api", "tasks", tid)
            t = json.loads(resp.body)
            if t["status"] in ("succeeded", "failed", "cancelled", "lost"):
                return t
            await asyncio.sleep(0.1)
        raise AssertionError("task did not end")

    final = loop.run_until_complete(until_done())
    assert final["status"] == "succeeded", final
    code, logs = call(loop, jp_fetch, "GET", "tasks", tid, "logs")
    assert code == 200 and "hello from nb" in logs["data"] and logs["eof"]
    code, part = call(loop, jp_fetch, "GET", "tasks", tid, "logs", params={"offset": logs["next_offset"] - 8})
    assert part["data"] == logs["data"][-8:]
    code, stream = call(loop, jp_fetch, "GET", "tasks", tid, "logs", "stream")
    assert code == 200 and "event: log" in stream and "hello from nb" in stream
    assert 'event: end\ndata: {"status": "succeeded"' in stream
    code, listing = call(loop, jp_fetch, "GET", "tasks", params={"state": "succeeded"})
    assert code == 200 and int(tid) in [t["id"] for t in listing["tasks"]]
    code, missing = call(loop, jp_fetch, "GET", "tasks", "999999")
    assert code == 404 and missing["message"]
    code, missing = call(loop, jp_fetch, "GET", "tasks", "999999", "logs", "stream")
    assert code == 404 and missing["message"] and "<" not in missing["message"], missing


def test_cancel_through_extension(jp_asyncio_loop, jp_fetch, jp_root_dir, tacc_env):
    loop = jp_asyncio_loop
    (jp_root_dir / "long.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    code, out = call(loop, jp_fetch, "POST", "submit", body={"path": "long.py", "packages": False})
    assert code == 200, out
    tid = str(out["task"]["id"])

    async def until(states: set[str]) -> dict:
        for _ in range(600):
            t = json.loads((await jp_fetch("tacc", "api", "tasks", tid)).body)
            if t["status"] in states:
                return t
            await asyncio.sleep(0.1)
        raise AssertionError(f"task did not reach {states}")

    loop.run_until_complete(until({"running"}))
    code, cancelled = call(loop, jp_fetch, "POST", "tasks", tid, "cancel", body={})
    assert code == 200 and cancelled["status"] in ("cancelling", "cancelled")
    assert loop.run_until_complete(until({"cancelled", "failed", "succeeded"}))["status"] == "cancelled"


def test_resubmit_a_tasks_own_spec_gives_the_same_digest(jp_asyncio_loop, jp_fetch, jp_root_dir, tacc_env):
    loop = jp_asyncio_loop
    (jp_root_dir / "once.py").write_text("print('once')\n")
    code, out = call(loop, jp_fetch, "POST", "submit", body={"path": "once.py", "packages": False})
    assert code == 200, out
    code, first = call(loop, jp_fetch, "GET", "tasks", str(out["task"]["id"]))
    assert code == 200 and first["spec"]
    code, again = call(loop, jp_fetch, "POST", "tasks", body=first["spec"])  # what the Lab panel's Resubmit sends
    assert code == 201 or code == 200, again
    assert again["id"] != first["id"] and again["digest"] == first["digest"]
    code, bad = call(loop, jp_fetch, "POST", "tasks", body=["not", "a", "spec"])  # type: ignore[arg-type]
    assert code == 400 and "TaskSpec" in bad["message"]
    code, invalid = call(loop, jp_fetch, "POST", "tasks", body={"name": "x"})
    assert code in (400, 422) and invalid["errors"], invalid


def test_snapshot_digest_is_the_archive_sha(jp_asyncio_loop, jp_fetch, jp_root_dir):
    (jp_root_dir / "s.py").write_text("print(1)\n")
    from tacc_hub.jupyter.capture import capture

    cap = capture("s.py", root_dir=jp_root_dir, pin_packages=False)
    assert cap.spec.code.digest == digest_of(cap.archive)
    code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "s.py", "packages": False})
    assert code == 200 and body["digest"] == cap.digest


def test_repository_reaching_outside_root_is_cut_to_the_root(jp_asyncio_loop, jp_fetch, jp_root_dir, tmp_path):
    (tmp_path / "outside-secret.txt").write_text("committed secret\n")
    (jp_root_dir / "proj").mkdir()
    (jp_root_dir / "proj" / "run.py").write_text("print('run')\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "outside-secret.txt", str((jp_root_dir / "proj" / "run.py").relative_to(tmp_path)))
    git(tmp_path, "commit", "-qm", "c")
    (tmp_path / "outside-secret.txt").write_text("dirty secret\n")
    (jp_root_dir / "proj" / "run.py").write_text("print('run, changed')\n")
    code, body = call(jp_asyncio_loop, jp_fetch, "POST", "capture", body={"path": "proj/run.py", "packages": False})
    assert code == 200, body
    assert "secret" not in json.dumps(body)
    # a repository starting above the root is not the user's project: the folder is sent as it is
    assert body["files"] == ["run.py"] and body["git"] is None and not body["diff"]
    assert any("starts above your Jupyter root" in n for n in body["notes"]), body


def test_git_code_is_cloned_and_patched_by_the_service(jp_asyncio_loop, jp_fetch, jp_root_dir, tmp_path, tacc_env):
    loop = jp_asyncio_loop
    remote = data_dir("tacc-remote-") / "remote.git"  # the task (its owner's account) clones it: reachable
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = make_repo(jp_root_dir)
    req = {"path": "proj/analysis.ipynb", "packages": False, "code": "git"}
    code, body = call(loop, jp_fetch, "POST", "capture", body=req)
    assert code == 400 and "origin" in body["message"]
    git(repo, "remote", "add", "origin", str(remote))
    code, body = call(loop, jp_fetch, "POST", "capture", body=req)
    assert code == 400 and "push it first" in body["message"]
    git(repo, "push", "-q", "origin", "HEAD:main")
    git(repo, "fetch", "-q", "origin")
    # the task clones it as its owner (nbuser), and git refuses a local repository another account owns
    subprocess.run(["chown", "-R", "nbuser:", str(remote)], check=True)
    (repo / "helper.py").write_text("GREETING = 'hello, uncommitted'\n")
    (repo / "extra.py").write_text("# untracked\n")

    code, first = call(loop, jp_fetch, "POST", "capture", body=req)
    assert code == 200, first
    spec = first["spec"]
    assert spec["code"]["kind"] == "git" and spec["code"]["url"] == f"file://{remote}"
    assert spec["code"]["commit"] == first["git"]["commit"]
    for piece in ("+GREETING = 'hello, uncommitted'", "b/extra.py", "b/analysis.tacc.py"):
        assert piece in spec["code"]["patch"]
    assert spec_from_data(spec).digest == first["digest"]
    (repo / "helper.py").write_text("GREETING = 'hello, changed again'\n")
    code, second = call(loop, jp_fetch, "POST", "submit", body=req)
    assert code == 200 and second["digest"] != first["digest"], second
    tid = str(second["task"]["id"])

    async def until_done() -> dict:
        for _ in range(600):
            t = json.loads((await jp_fetch("tacc", "api", "tasks", tid)).body)
            if t["status"] in ("succeeded", "failed", "cancelled", "lost"):
                return t
            await asyncio.sleep(0.1)
        raise AssertionError("task did not end")

    done = loop.run_until_complete(until_done())
    assert done["status"] == "succeeded", done.get("reason")
    code, logs = call(loop, jp_fetch, "GET", "tasks", tid, "logs")
    assert "hello, changed again from nb" in logs["data"], logs
