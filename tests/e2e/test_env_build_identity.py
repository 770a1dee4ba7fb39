"""Environment builds run as the task's owner with the task's scrubbed environment, never as the service.

A requirement is an sdist served over HTTP (``proof @ http://127.0.0.1:PORT/proof-1.0.tar.gz``): pip
runs its ``setup.py`` to build it, i.e. the user's code runs at build time. It records who it ran as
and what it saw; the service was started with a secret in its environment, which must not be there.
A ``file://`` requirement is refused at submit.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import pwd
import tarfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tacc_hub.snapshot import pack
from tests import accounts

from .conftest import Api, ServiceProcess

SETUP_PY = """
import json, os
from setuptools import setup
with open({proof!r}, "w") as fh:
    json.dump({{"uid": os.getuid(), "env": dict(os.environ)}}, fh)
setup(name="proof", version="1.0", py_modules=[])
"""


def sdist(proof: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, text in (("proof-1.0/setup.py", SETUP_PY.format(proof=proof)),
                           ("proof-1.0/PKG-INFO", "Metadata-Version: 2.1\nName: proof\nVersion: 1.0\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    proof_dir = accounts.data_dir("tacc-proof-")
    proof_dir.chmod(0o1777)  # any account may write its proof there
    proof = proof_dir / f"{uuid.uuid4().hex}.json"
    body = sdist(str(proof))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/proof-1.0.tar.gz", proof
    finally:
        server.shutdown()


def _snapshot_spec(api: Api, tmp_path: Path, requirements: list[str]) -> dict:
    src = tmp_path / "code"
    src.mkdir(exist_ok=True)
    (src / "x.txt").write_text("x\n")
    data = pack(src)
    sha = hashlib.sha256(data).hexdigest()
    status, _ = api.call("PUT", f"/api/code/{sha}", data, content_type="application/gzip")
    assert status in (200, 201), status
    return {"name": "built", "code": {"kind": "snapshot", "digest": sha, "size": len(data)},
            "entrypoint": {"argv": ["python", "-c", "import sys; print(sys.prefix)"]},
            "environment": {"requirements": requirements}}


def test_env_builds_run_as_the_owner_with_a_scrubbed_environment(tmp_path: Path, served, monkeypatch) -> None:
    url, proof = served
    monkeypatch.setenv("TACC_SERVICE_SECRET", "hunter2")  # in the service's environment, not a task's
    svc = ServiceProcess(tmp_path / "state", "--TaccHub.env_builder=pip").start()
    try:
        api = Api(svc.url, svc.token("dave"))
        status, task = api.call("POST", "/api/tasks", _snapshot_spec(api, tmp_path, [f"proof @ {url}"]))
        assert status == 201, task
        done = api.wait_status(task["id"], {"succeeded", "failed"}, timeout=300)
        assert done["status"] == "succeeded", done
        seen = json.loads(proof.read_text())
        assert seen["uid"] == pwd.getpwnam("dave").pw_uid
        assert "TACC_SERVICE_SECRET" not in seen["env"] and seen["env"].get("HOME") == pwd.getpwnam("dave").pw_dir
        env_path = Path(done["plan"]["env"]["path"])
        assert env_path.parent.name == "dave" and env_path.stat().st_uid == pwd.getpwnam("dave").pw_uid
        # a local path is refused at submit, and nothing is stored
        status, err = api.call("POST", "/api/tasks", _snapshot_spec(api, tmp_path, ["x @ file:///etc"]))
        assert status == 422 and "file:" in json.dumps(err), err
    finally:
        svc.stop()
