"""Requirements never name something on a local disk: paths, file: URLs, local archives, editable installs.

Each hostile entry is refused by the schema with an error that names the entry
(``environment.requirements[1]``) and says why; through the API the submit gets a 4xx and nothing is
stored. Pinned index packages and ``NAME @ https://...`` stay accepted.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient
import tornado.httpserver

from tacc_hub.schema import SpecError, spec_from_data
from tacc_hub.service.app import TaccHub
from tacc_hub.service.auth import new_token

BASE: dict[str, Any] = {"name": "job", "entrypoint": {"argv": ["python", "train.py"]}}
LOCAL = "local paths and file:// URLs are not allowed"

HOSTILE = [
    ("file URL", "file:///home/alice/pkg", LOCAL),
    ("file URL, upper case", "FILE:///home/alice/pkg", LOCAL),
    ("direct file URL", "x @ file:///home/alice/dir", LOCAL),
    ("direct file URL, no slashes", "x @ file:dir", LOCAL),
    ("direct VCS file URL", "x @ git+file:///srv/repo", LOCAL),
    ("direct path", "x @ /home/alice/dir", LOCAL),
    ("direct relative path", "x @ ./dir", LOCAL),
    ("relative path", "./pkg", LOCAL),
    ("parent path", "..", LOCAL),
    ("parent subpath", "../other/pkg", LOCAL),
    ("absolute path", "/home/bob/pkg", LOCAL),
    ("home path", "~/pkg", LOCAL),
    ("home of another user", "~bob/pkg", LOCAL),
    ("subdirectory", "pkgs/mine", LOCAL),
    ("windows path", "C:\\pkgs\\mine", LOCAL),
    ("wheel file", "mine-1.0-py3-none-any.whl", LOCAL),
    ("sdist file", "mine-1.0.tar.gz", LOCAL),
    ("pinned-looking local wheel", "foo==1.0+local.whl", LOCAL),
    ("editable", "-e .", "editable installs (-e) are not allowed"),
    ("editable VCS", "-e git+https://example.org/r.git#egg=x", "editable installs (-e) are not allowed"),
    ("editable long option", "--editable=./pkg", "editable installs (-e) are not allowed"),
    ("path with a marker", "./pkg ; python_version > '3'", LOCAL),
]


@pytest.mark.parametrize(("req", "why"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_local_requirement_is_refused_naming_the_entry(req: str, why: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_data({**BASE, "environment": {"requirements": ["numpy==2.0", req]}})
    [(field, message)] = exc.value.errors
    assert field == "environment.requirements[1]"
    assert message.startswith(why) and repr(req[:80]) in message, message


@pytest.mark.parametrize("req", ["torch==2.3.1", "numpy==2.0; python_version>='3.10'", "Flask[async]==3.0.0",
                                 "pkg @ https://example.org/pkg-1.0.tar.gz", "pkg @ http://mirror.example/p.whl"])
def test_index_pins_and_remote_urls_are_accepted(req: str) -> None:
    assert spec_from_data({**BASE, "environment": {"requirements": [req]}}).environment.requirements == [req]


@pytest.mark.parametrize("dep", ["./mine", "file:///home/alice/channel::pkg", "/opt/pkg", "~/pkg"])
def test_conda_dependencies_cannot_name_local_paths_either(dep: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_data({**BASE, "environment": {"conda": {"dependencies": ["numpy", dep]}}})
    assert [f for f, _ in exc.value.errors] == ["environment.conda.dependencies[1]"]


def test_premise_pip_installs_a_pinned_looking_wheel_name_from_the_disk(tmp_path: Path) -> None:
    """Why ``foo==1.0+local.whl`` is refused: with such a file in its directory, pip takes the disk's file."""
    (tmp_path / "foo==1.0+local.whl").write_bytes(b"")
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "foo==1.0+local.whl"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "wheel filename" in res.stderr, res.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_submit_with_a_local_requirement_is_a_4xx_and_stores_nothing(tmp_path: Path) -> None:
    hub = TaccHub()
    hub.initialize([f"--TaccHub.state_dir={tmp_path / 'state'}", f"--TaccHub.data_dir={tmp_path / 'data'}",
                    "--TaccHub.task_identity=service", "--TaccHub.config_file=/nonexistent.py"])
    ctx, app = hub.build()
    token = new_token(ctx.store, "mallory")
    port = _free_port()
    server = tornado.httpserver.HTTPServer(app)
    server.listen(port, "127.0.0.1")
    client = tornado.httpclient.AsyncHTTPClient()
    try:
        for req in ("x @ file:///etc", "-e /home/bob/pkg", "../bob/pkg"):
            body = {**BASE, "code": {"kind": "snapshot", "digest": "ab" * 32},
                    "environment": {"requirements": ["numpy==2.0", req]}}
            resp = await client.fetch(f"http://127.0.0.1:{port}/api/tasks", method="POST", raise_error=False,
                                      headers={"Authorization": f"token {token}",
                                               "Content-Type": "application/json"},
                                      body=json.dumps(body))
            assert 400 <= resp.code < 500, resp.body
            errors = json.loads(resp.body).get("errors") or []
            assert any(e.get("field") == "environment.requirements[1]" for e in errors), resp.body
        assert ctx.store.list_tasks(None, None, 10, None) == ([], 0)
    finally:
        server.stop()
        ctx.store.close()
