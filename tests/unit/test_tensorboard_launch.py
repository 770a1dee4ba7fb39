"""launch.sh's TensorBoard and attempt mark, run for real with bash (a stand-in Python that records its argv).

The site's command and the spec's workdir and logdir are hostile text: each must reach TensorBoard as one word,
unexpanded; TensorBoard starts on node rank 0 only, in the background, before the program; a later run
(TACC_ATTEMPT > 0) is marked once in the log, by node rank 0. The executors give the port
(TACC_TENSORBOARD_PORT) and a secret path prefix (TACC_TENSORBOARD_SECRET) and return both in the state.
The secret is in no script and no argv (command lines are world-readable), the program does not inherit it, and
TENSORBOARD_MAIN (run for real, with a stand-in ``tensorboard.main``) puts it in its own sys.argv only, masks it
in its output and keeps TensorBoard's info file private. The proxy's side (``proxy_headers``): the secret is
added to paths and never shown back, in headers or bodies.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tornado.httputil import HTTPHeaders

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.compiler.render import TENSORBOARD_MAIN, tensorboard_python
from tacc_hub.executors.base import Launch
from tacc_hub.executors.local import LocalExecutor
from tacc_hub.executors.sbatch import render_batch
from tacc_hub.executors.slurm import TENSORBOARD_PORTS, tensorboard_port
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import SpecError, TaskSpec
from tacc_hub.service.proxy_headers import (
    HiddenRewrite,
    SecretGuard,
    response_headers,
    rewritable,
    rewrite_location,
    tensorboard_accept_encoding,
    tensorboard_prefix,
    unhide,
)

EVIL = "a b; $(touch PWNED) `touch PWNED` 'q' \"dq\" *"
TB_NAME = f"tb {EVIL}"  # the command's first word, looked up on the PATH
FAKE_TB = """#!/bin/sh
# stands in for TensorBoard's Python: records its arguments (NUL-separated) and its secret, then lingers
printf '%s\\0' "$@" > "$TACC_TASKDIR/tb.args.tmp" && mv "$TACC_TASKDIR/tb.args.tmp" "$TACC_TASKDIR/tb.args"
printf '%s' "${TACC_TENSORBOARD_SECRET:-unset}" > "$TACC_TASKDIR/tb.secret"
echo "fake tensorboard output"
"""
SECRET = "S3cr3t-path_0123456789abcdefghij"


def _plan(spec: Callable[..., TaskSpec], site_with: Callable[..., SiteProfile], **fields: object) -> ExecutionPlan:
    site = site_with(tensorboard_command=[TB_NAME, "--flag", EVIL])
    main = 'echo main ran; echo "rank=$TACC_NODE_RANK"; echo "program secret=${TACC_TENSORBOARD_SECRET:-unset}"'
    return compile_task(spec(entrypoint={"argv": ["sh", "-c", main]},
                             workdir=f"exp/{EVIL}", tensorboard={"logdir": f"tb {EVIL}"}, **fields), site)


def _run(tmp_path: Path, plan: ExecutionPlan, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """launch.sh as a node runs it: its directories, the launch variables, a PATH with the stand-in on it."""
    taskdir, work, fakebin = tmp_path / "task", tmp_path / "work", tmp_path / "bin"
    for d in (taskdir, work / "exp" / EVIL, fakebin):
        d.mkdir(parents=True, exist_ok=True)
    tb = fakebin / TB_NAME
    tb.write_text(FAKE_TB)
    tb.chmod(0o755)
    (taskdir / "launch.sh").write_text(plan.script)
    base = {"PATH": f"{fakebin}:/usr/bin:/bin", "TACC_TASKDIR": str(taskdir), "TACC_WORKDIR": str(work),
            "TACC_MASTER_ADDR": "127.0.0.1", "TACC_NODE_RANK": "0", "TACC_ATTEMPT": "0",
            "TACC_TENSORBOARD_PORT": "16006", "TACC_TENSORBOARD_SECRET": SECRET, "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(taskdir / "launch.sh")], env={**base, **env}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30, check=False)
    return proc, taskdir


def _wait_file(path: Path, needle: str = "", timeout: float = 10) -> str:
    """``path``'s text once it exists (and holds ``needle``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in (text := path.read_text()):
            return text
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written" + (f" with {needle!r}" if needle else ""))


def test_tensorboard_gets_each_hostile_word_as_one_argument(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    assert plan.tensorboard is not None
    assert plan.tensorboard.logdir == f"exp/{EVIL}/tb {EVIL}"  # relative to TACC_WORKDIR, under the workdir
    proc, taskdir = _run(tmp_path, plan)
    assert proc.returncode == 0, proc.stderr
    args = _wait_file(taskdir / "tb.args").split("\0")[:-1]
    assert args == ["--flag", EVIL, "-c", TENSORBOARD_MAIN, "--logdir", f"{tmp_path / 'work' / 'exp'}/{EVIL}/tb {EVIL}",
                    "--host", "127.0.0.1", "--port", "16006"]
    assert "main ran" in proc.stdout
    # its secret: in its environment, in no argv nor in the script; the program does not inherit it
    assert _wait_file(taskdir / "tb.secret", SECRET) == SECRET
    assert SECRET not in plan.script and not any(SECRET in a for a in args)
    assert "program secret=unset" in proc.stdout
    assert f"tacc: TensorBoard on port 16006, reading exp/{EVIL}/tb {EVIL} (its output: tensorboard.log)" \
        in proc.stdout
    # its output goes to its own file in the task dir, not into the task's log
    _wait_file(taskdir / "tensorboard.log", "fake tensorboard output")
    assert "fake tensorboard output" not in proc.stdout + proc.stderr
    assert "=== tacc: attempt" not in proc.stdout  # the first run is not marked
    assert not list(tmp_path.rglob("PWNED"))


def test_only_node_rank_0_starts_tensorboard_or_marks_the_attempt(tmp_path, spec, site_with):
    proc, taskdir = _run(tmp_path, _plan(spec, site_with), TACC_NODE_RANK="1", TACC_ATTEMPT="2")
    assert proc.returncode == 0, proc.stderr
    assert "rank=1" in proc.stdout and "program secret=unset" in proc.stdout
    assert "TensorBoard" not in proc.stdout + proc.stderr and "=== tacc" not in proc.stdout
    time.sleep(0.3)  # give a wrongly started stand-in the time to write what it would have written
    assert not (taskdir / "tb.args").exists() and not (taskdir / "tensorboard.log").exists()


def test_a_later_run_is_marked_once_before_the_program(tmp_path, spec, site):
    plan = compile_task(spec(entrypoint={"argv": ["echo", "program output"]}), site)
    proc, _ = _run(tmp_path, plan, TACC_ATTEMPT="2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == "program output", lines
    assert lines[0].startswith("=== tacc: attempt 3 (TACC_ATTEMPT=2) started at 20")
    assert lines[0].endswith(" UTC ===")
    for odd in ("0", "", "x1", "1;id", "$(id)"):  # the first run, or nothing a number: no mark, no expansion
        proc, _ = _run(tmp_path, plan, TACC_ATTEMPT=odd)
        assert proc.returncode == 0 and proc.stdout == "program output\n", (odd, proc.stdout, proc.stderr)


def test_no_port_or_no_command_leaves_the_task_running_and_says_why(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    proc, _ = _run(tmp_path / "a", plan, TACC_TENSORBOARD_PORT="")
    assert proc.returncode == 0 and "main ran" in proc.stdout
    assert "tacc: TensorBoard was not started: this executor gave it no port" in proc.stderr
    proc, _ = _run(tmp_path / "b", plan, PATH="/usr/bin:/bin")
    assert proc.returncode == 0 and "main ran" in proc.stdout
    assert f"tacc: TensorBoard was not started: {TB_NAME} is not on the PATH of the task" in proc.stderr


def test_a_site_without_tensorboard_refuses_the_spec_naming_the_field(spec, site):
    assert site.tensorboard_command == []
    with pytest.raises(SpecError) as err:
        compile_task(spec(tensorboard={"logdir": "runs"}), site)
    [(field, message)] = err.value.errors
    assert field == "tensorboard" and "no TensorBoard" in message


def test_no_tensorboard_no_plan_field_no_lines(spec, site_with):
    plan = compile_task(spec(), site_with(tensorboard_command=["python"]))
    assert plan.tensorboard is None and "tensorboard" not in plan.model_dump_json()
    assert "TensorBoard" not in plan.script


def test_local_executor_gives_a_port_in_the_env(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    ex = LocalExecutor(tmp_path / "data", launcher=["true"])
    launch = Launch(task_id=5, owner="alice", plan=plan, placement=Placement(nodes=[NodeSlots(node="localhost")]))
    env = ex.launch_spec(launch, tensorboard_port=41234)["env"]
    assert env["TACC_TENSORBOARD_PORT"] == "41234" and env["TACC_MASTER_PORT"] != "41234"
    assert env["TACC_MASTER_ADDR"] == "127.0.0.1"  # where TensorBoard binds on this executor
    assert "TACC_TENSORBOARD_PORT" not in ex.launch_spec(launch)["env"]


def test_slurm_port_is_fixed_by_the_task_id_in_its_block_and_exported(spec, site_with):
    first, count = TENSORBOARD_PORTS
    assert first + count <= 32768  # below Linux's ephemeral range
    assert {tensorboard_port(i) for i in range(1, count + 1)} == set(range(first, first + count))
    assert tensorboard_port(7) == tensorboard_port(7)
    plan = _plan(spec, site_with)
    job = render_batch(task_id=7, plan=plan, placement=Placement(nodes=[NodeSlots(node="n1")]),
                       task_dir=Path("/srv/tacc/tasks/7"), env={"TACC_TENSORBOARD_PORT": str(tensorboard_port(7))})
    assert f"export TACC_TENSORBOARD_PORT={tensorboard_port(7)}\n" in job.script



FAKE_MAIN = """
import json, os, sys, tempfile
def run_main():
    prefix = sys.argv[-1].partition("=")[2]
    print("TensorBoard at http://127.0.0.1:6006" + prefix + "/ (fake)", file=sys.stderr)
    mask = os.umask(0)
    with open(os.environ["FAKE_OUT"], "w") as f:
        json.dump({"argv": sys.argv, "env": os.environ.get("TACC_TENSORBOARD_SECRET"), "umask": mask,
                   "tmp": tempfile.gettempdir(), "cmdline": open("/proc/self/cmdline").read()}, f)
"""


def _run_main(tmp_path: Path, secret: str | None) -> tuple[subprocess.CompletedProcess[str], Path]:
    """TENSORBOARD_MAIN run for real by this Python, as launch.sh runs it, with a stand-in ``tensorboard.main`` on
    PYTHONPATH and, in its working directory, a ``tensorboard.py`` of the task's that must not be imported."""
    pkg, cwd, taskdir = tmp_path / "pkgs" / "tensorboard", tmp_path / "cwd", tmp_path / "task"
    for d in (pkg, cwd, taskdir):
        d.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text(FAKE_MAIN)
    (cwd / "tensorboard.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "pkgs"), "TACC_TASKDIR": str(taskdir),
           "FAKE_OUT": str(tmp_path / "out.json")}
    if secret is not None:
        env["TACC_TENSORBOARD_SECRET"] = secret
    proc = subprocess.run([sys.executable, "-c", TENSORBOARD_MAIN, "--logdir", "/x", "--port", "1"], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)
    return proc, tmp_path / "out.json"


def test_tensorboard_main_takes_the_secret_from_the_environment_into_its_argv_only(tmp_path):
    proc, out = _run_main(tmp_path, SECRET)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(out.read_text())
    assert seen["argv"][1:] == ["--logdir", "/x", "--port", "1", f"--path_prefix=/{SECRET}"]
    assert SECRET not in seen["cmdline"]  # what ps and /proc/PID/cmdline show to everyone
    assert seen["env"] is None  # gone from its environment before TensorBoard starts
    assert seen["umask"] == 0o077 and seen["tmp"] == str(tmp_path / "task")  # its info file: private, in TACC_TASKDIR
    assert SECRET not in proc.stderr and "http://127.0.0.1:6006/SECRET/ (fake)" in proc.stderr  # its output masked
    assert not (tmp_path / "PWNED").exists()  # the working directory's modules are not TensorBoard's


@pytest.mark.parametrize("secret", [None, "", "short", "x" * 20 + "/../y", "x" * 20 + " --logdir=/"])
def test_tensorboard_main_without_a_valid_secret_does_not_start(tmp_path, secret):
    proc, out = _run_main(tmp_path, secret)
    assert proc.returncode == 1 and "TensorBoard was not started" in proc.stderr, proc.stderr
    assert not out.exists()


def test_the_site_command_is_a_python_its_module_dropped(spec, site_with):
    for script in (["tensorboard"], ["/opt/tb/bin/tensorboard"], ["env", "tensorboard"]):  # can take no secret
        with pytest.raises(ValueError, match="must be a Python interpreter"):
            site_with(tensorboard_command=script)
    assert tensorboard_python(["python", "-m", "tensorboard.main"]) == ["python"]
    assert tensorboard_python(["/opt/tb/bin/python3", "-X", "utf8", "-m", "tensorboard"]) == \
        ["/opt/tb/bin/python3", "-X", "utf8"]
    assert tensorboard_python(["python3"]) == ["python3"]
    assert tensorboard_python(["-m", "tensorboard"]) == ["-m", "tensorboard"]  # no interpreter left: kept as is
    plan = compile_task(spec(tensorboard={"logdir": "runs"}),
                        site_with(tensorboard_command=["python", "-m", "tensorboard.main"]))
    assert "    python -c '" in plan.script and "tensorboard.main'" not in plan.script.split("-c", 1)[0]
    assert "--path_prefix" not in plan.script.replace(TENSORBOARD_MAIN, "")  # only inside the fixed program
    assert "TACC_TENSORBOARD_SECRET" not in plan.script.replace(TENSORBOARD_MAIN, "").replace(
        "unset TACC_TENSORBOARD_SECRET", "")  # never expanded onto a command line


def test_executors_give_a_fresh_secret_in_the_env_not_in_argv(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    ex = LocalExecutor(tmp_path / "data", launcher=["true"])
    launch = Launch(task_id=5, owner="alice", plan=plan, placement=Placement(nodes=[NodeSlots(node="localhost")]))
    env = ex.launch_spec(launch, tensorboard_port=41234, tensorboard_secret=SECRET)["env"]
    assert env["TACC_TENSORBOARD_SECRET"] == SECRET
    assert "TACC_TENSORBOARD_SECRET" not in ex.launch_spec(launch, tensorboard_port=41234)["env"]
    from tacc_hub.executors.local import tensorboard_secret

    a, b = tensorboard_secret(), tensorboard_secret()
    assert a != b and len(a) >= 32 and tensorboard_prefix({"tensorboard_port": 1, "tensorboard_secret": a}, 1)
    job = render_batch(task_id=7, plan=plan, placement=Placement(nodes=[NodeSlots(node="n1")]),
                       task_dir=Path("/srv/tacc/tasks/7"), env={"TACC_TENSORBOARD_SECRET": SECRET})
    assert f"export TACC_TENSORBOARD_SECRET={SECRET}\n" in job.script  # in the batch script (mode-0700 dir) ...
    assert not any(SECRET in o for o in job.options)  # ... not on sbatch's command line


def test_the_proxy_adds_the_secret_and_never_shows_it():
    state = {"tensorboard_port": 6006, "tensorboard_secret": SECRET}
    hidden = f"/{SECRET}"
    assert tensorboard_prefix(state, 6006) == hidden
    assert tensorboard_prefix(state, 8888) is None  # another port of the task: as it was
    assert tensorboard_prefix({"tensorboard_port": 6006}, 6006) is None  # started before secrets: at the root
    assert tensorboard_prefix({"tensorboard_port": 6006, "tensorboard_secret": "../x"}, 6006) is None
    assert tensorboard_prefix({"tensorboard_port": True, "tensorboard_secret": SECRET}, 1) is None
    assert unhide(hidden, hidden) == "/" and unhide(f"{hidden}/data/runs", hidden) == "/data/runs"
    assert unhide(f"{hidden}x/y", hidden) == f"{hidden}x/y"
    p, backend = "/tasks/3/proxy/6006", "127.0.0.1:6006"
    assert rewrite_location(f"{hidden}/", p, backend, hidden) == f"{p}/"  # TensorBoard's own 301
    assert rewrite_location(f"http://{backend}{hidden}/x?a=1", p, backend, hidden) == f"{p}/x?a=1"
    up = HTTPHeaders()
    up.add("Location", f"{hidden}/experiment/e/")
    up.add("Content-Location", f"{hidden}/index.html")
    up.add("Link", f"<{hidden}/font.woff>; rel=preload")
    up.add("Refresh", f"0; url=http://elsewhere{hidden}/")
    up.add("Set-Cookie", f"a=1; Path={hidden}/x")
    up.add("Set-Cookie", f"b={SECRET}")
    up.add("Content-Type", "text/html")
    out = list(response_headers(up, scope=f"{p}/", prefix=p, backend=backend, service_cookie=None, hidden=hidden))
    assert out == [("Location", f"{p}/experiment/e/"), ("Content-Location", f"{p}/index.html"),
                   ("Set-Cookie", f"a=1; Path={p}/x"), ("Content-Type", "text/html")]
    ask = HTTPHeaders({"Accept-Encoding": "br, gzip, deflate"})
    assert tensorboard_accept_encoding(ask) == "gzip"
    assert tensorboard_accept_encoding(HTTPHeaders({"Accept-Encoding": "br"})) is None


@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_the_secret_guard_reads_bodies_across_chunks_and_through_gzip(encoding):
    def chunks(body: bytes) -> list[bytes]:
        data = gzip.compress(body) if encoding else body
        return [data[i:i + 7] for i in range(0, len(data), 7)]

    clean = b"<html>" + os.urandom(3000).hex().encode() + b"</html>"
    guard = SecretGuard(SECRET, encoding)
    assert not any(guard.leaks(c) for c in chunks(clean))
    leaky = clean[:1000] + b"<a href='/" + SECRET.encode() + b"/x'>" + clean[1000:]
    guard = SecretGuard(SECRET, encoding)
    assert any(guard.leaks(c) for c in chunks(leaky))


def test_the_secret_guard_refuses_what_it_cannot_read():
    assert SecretGuard(SECRET, "br").leaks(b"anything")
    assert SecretGuard(SECRET, "gzip").leaks(b"not gzip at all")
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # decompressed a piece at a time, never held whole
    assert not SecretGuard(SECRET, "gzip").leaks(bomb)


@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_a_json_answer_naming_the_secret_path_is_given_back_under_the_callers_prefix(encoding):
    hidden, public = f"/{SECRET}", "/services/tacc/tasks/3/proxy/6006"
    body = json.dumps({"path_prefix": hidden, "projector": {"module_path": f"{hidden}/data/plugin/projector/x"}})
    data = gzip.compress(body.encode()) if encoding else body.encode()
    rw = HiddenRewrite(hidden, public, encoding)
    assert all(rw.feed(data[i:i + 5]) for i in range(0, len(data), 5))
    out = json.loads(rw.result() or b"null")
    assert out == {"path_prefix": public, "projector": {"module_path": f"{public}/data/plugin/projector/x"}}
    bare = HiddenRewrite(hidden, public, encoding)  # the secret without its slash: not passed on at all
    bare.feed(gzip.compress(SECRET.encode()) if encoding else SECRET.encode())
    assert bare.result() is None
    big = HiddenRewrite(hidden, public, encoding, limit=1000)
    assert not big.feed(gzip.compress(b"[" + b"0," * 5000 + b"0]") if encoding else b"0" * 1001)
    assert not HiddenRewrite(hidden, public, "gzip").feed(b"not gzip")


def test_which_answers_are_rewritten_whole():
    def h(**kv: str) -> HTTPHeaders:
        return HTTPHeaders({k.replace("_", "-"): v for k, v in kv.items()})

    assert rewritable(h(Content_Type="application/json"), "GET", 200)
    assert rewritable(h(Content_Type="application/problem+json; charset=utf-8", Content_Encoding="gzip"), "POST", 400)
    assert not rewritable(h(Content_Type="application/json", Content_Encoding="br"), "GET", 200)  # guarded: cut
    assert not rewritable(h(Content_Type="application/json"), "HEAD", 200)
    assert not rewritable(h(Content_Type="application/json"), "GET", 304)
    assert not rewritable(h(Content_Type="text/html"), "GET", 200)  # streamed, guarded
