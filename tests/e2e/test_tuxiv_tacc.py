"""A tuxiv.conf written for SING/TACC, through the real tcloud and service (local executor).

TACC's tcloud writes the entrypoint items into run.sh each followed by `` \\``: one command
continued over lines, arguments split over items as TACC's own examples do. ``job.log`` under
``${TACC_USERDIR}`` keeps the log in the owner's persistent directory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .conftest import Api, ServiceProcess, tcloud

ARGS_PY = "import json, sys\nprint('argv=' + json.dumps(sys.argv[1:]))\n"

TACC_STYLE = """\
entrypoint:
    - python ${TACC_WORKDIR}/args.py
    - --batch_size=1
    - --data_dir=${TACC_WORKDIR}/datasets/mnist_data
    - --name "two words"
    - --epochs
    - 010
job:
    name: tacc-style
    log: ${TACC_USERDIR}/tacc-logs/args.log
    general:
        - nodes=1
        - ntasks=1
        - cpus-per-task=1
"""


def test_a_tacc_tuxiv_conf_runs_its_one_command_with_its_arguments(service: ServiceProcess, tmp_path: Path) -> None:
    proj = tmp_path / "tacc-style"
    proj.mkdir()
    (proj / "args.py").write_text(ARGS_PY)
    (proj / "tuxiv.conf").write_text(TACC_STYLE)
    res = tcloud(service, "tessa", "submit", str(proj / "tuxiv.conf"), "-f")
    assert res.returncode == 0, res.stderr + res.stdout
    assert "command not found" not in res.stdout + res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("argv="))
    argv = json.loads(line[len("argv="):])
    assert argv[0] == "--batch_size=1" and argv[1].split("/")[-3:] == ["work", "datasets", "mnist_data"], argv
    assert argv[2:] == ["--name", "two words", "--epochs", "010"]
    kept = service.data_dir / "users" / "tessa" / "tacc-logs" / "args.log"
    deadline = time.monotonic() + 30  # written by tee as the task runs; wait for its last line
    while time.monotonic() < deadline and not (kept.exists() and "argv=" in kept.read_text()):
        time.sleep(0.1)
    assert line in kept.read_text()


def test_tuxiv_errors_name_their_line_through_cli_and_api(service: ServiceProcess, tmp_path: Path) -> None:
    proj = tmp_path / "bad"
    proj.mkdir()
    text = TACC_STYLE.replace("        - cpus-per-task=1\n", "        - cpus-per-task=1\n        - frobnicate=1\n")
    (proj / "tuxiv.conf").write_text(text)
    res = tcloud(service, "tessa", "submit", str(proj / "tuxiv.conf"))
    assert res.returncode != 0
    assert "job.general[3]" in res.stderr and "tuxiv.conf line 15: unknown sbatch option 'frobnicate'" in res.stderr
    api = Api(service.url, service.token("tessa"))
    status, out = api.call("POST", "/api/tasks?format=tuxiv&dry_run=1", text, content_type="application/yaml")
    assert status == 422, out
    assert out["errors"][0]["field"] == "job.general[3]"
    assert out["errors"][0]["message"].startswith("request body line 15: unknown sbatch option"), out


def test_account_must_be_the_callers_group(service: ServiceProcess) -> None:
    admin = Api(service.url, service.token("root", admin=True))
    status, _ = admin.call("PUT", "/api/admin/users/gwen/group", {"group": "lab-a"})
    assert status == 200
    try:
        api = Api(service.url, service.token("gwen"))
        body = ("entrypoint: [echo hi]\ncode: {{kind: git, url: 'https://example.org/x.git', commit: abcdef1}}\n"
                "job:\n  general:\n    - account={}\n")
        status, out = api.call("POST", "/api/tasks?format=tuxiv&dry_run=1", body.format("lab-a"),
                               content_type="application/yaml")
        assert status == 200, out
        assert out["spec"]["account"] == "lab-a"
        status, out = api.call("POST", "/api/tasks?format=tuxiv&dry_run=1", body.format("lab-b"),
                               content_type="application/yaml")
        assert status == 403, out
        assert out["errors"] == [{"field": "account", "message": out["message"]}]
        assert "'lab-b' is not your group" in out["message"] and "account=lab-a" in out["message"]
    finally:
        admin.call("DELETE", "/api/admin/users/gwen/group")
