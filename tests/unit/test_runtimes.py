"""Runtime plugins and network settings: per-node commands and environment, run for real under bash.

The launchers themselves (python, mpirun, horovodrun, srun, bpslaunch) are replaced by a fake
on PATH that records its argv and environment, so each node's launch.sh runs as an executor
would run it on that node (its TACC_* variables), and what the launcher would receive is checked.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tacc_hub.compiler import ExecutionPlan, SiteProfile, compile_task
from tacc_hub.compiler.network import network_env
from tacc_hub.compiler.runtime import available_runtimes
from tacc_hub.schema import SpecError, TaskSpec
from tacc_hub.schema.task import Network

SpecFactory = Callable[..., TaskSpec]
RDMA = {"rdma": True, "ib_hca": "mlx5_0:1", "ib_gid_index": 3, "socket_ifname": "ib0"}
HOSTILE = ["$(touch PWNED)", "`touch PWNED2`", "; touch PWNED3", "a'b\"c", "x\ny", "${HOME}", "*", "", "-n", "\\"]
LAUNCHERS = ("python", "mpirun", "horovodrun", "srun", "bpslaunch")

# Records "$0" and its arguments (NUL-separated) and its environment; roles other than a
# worker (byteps' scheduler and server) stay up until they are stopped, as the real ones do.
# With FAKE_WAIT_FOR=N, a worker first waits (up to 10 s) until N programs have recorded.
FAKE = """#!/bin/bash
f="$FAKE_RECORD/$(basename "$0").$$"
: > "$f.argv"
for a in "$@"; do printf '%s\\0' "$a" >> "$f.argv"; done
env -0 > "$f.tmp" && mv "$f.tmp" "$f.env"
case "${DMLC_ROLE:-}" in scheduler|server) exec sleep 60 ;; esac
for _ in $(seq 100); do
  n=$(find "$FAKE_RECORD" -name "*.env" | wc -l)
  [ "$n" -ge "${FAKE_WAIT_FOR:-0}" ] && break
  sleep 0.1
done
exit "${FAKE_EXIT:-0}"
"""


@dataclass
class Call:
    program: str
    argv: list[str]
    env: dict[str, str]
    pid: int


@dataclass
class NodeRun:
    rc: int
    stderr: str
    calls: list[Call]
    taskdir: Path

    def one(self, program: str) -> Call:
        found = [c for c in self.calls if c.program == program]
        assert len(found) == 1, (program, self.calls, self.stderr)
        return found[0]


def run_node(plan: ExecutionPlan, tmp_path: Path, rank: int, nnodes: int, **env: str) -> NodeRun:
    """Run the plan's launch.sh as node ``rank`` of ``nnodes``, with fake launchers on PATH."""
    base = tmp_path / f"node{rank}"
    fake, record, task, work = (base / d for d in ("bin", "record", "task", "work"))
    for d in (fake, record, task, work):
        d.mkdir(parents=True)
    for name in LAUNCHERS:
        (fake / name).write_text(FAKE)
        (fake / name).chmod(stat.S_IRWXU)
    for name, text in plan.files.items():
        (task / name).write_text(text)
    (task / "launch.sh").write_text(plan.script)
    full = {
        "PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(base), "FAKE_RECORD": str(record),
        "TACC_TASK_ID": "1", "TACC_TASKDIR": str(task), "TACC_WORKDIR": str(work), "TACC_USERDIR": str(base),
        "TACC_NODE_RANK": str(rank), "TACC_NNODES": str(nnodes), "TACC_MASTER_ADDR": "10.0.0.1",
        "TACC_MASTER_PORT": "29501", **env,
    }
    out = subprocess.run(["bash", str(task / "launch.sh")], cwd=base, env=full, capture_output=True, text=True,
                         timeout=30, check=False)
    assert not list(tmp_path.rglob("PWNED*")), "a hostile string was executed"
    calls = []
    for f in sorted(record.glob("*.argv")):
        program, pid = f.name.removesuffix(".argv").rsplit(".", 1)
        argv = f.read_bytes().decode().split("\0")[:-1]
        env_items = (item.split("=", 1) for item in f.with_suffix(".env").read_bytes().decode().split("\0") if item)
        calls.append(Call(program, argv, dict(env_items), int(pid)))
    return NodeRun(out.returncode, out.stderr, calls, task)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- the plugins are installed -----------------------------------------------------------


def test_shipped_runtimes_are_available() -> None:
    assert {"plain", "torchrun", "deepspeed", "horovod", "mpi", "byteps"} <= set(available_runtimes())
    for name, plugin in available_runtimes().items():
        assert plugin.name == name


# --- deepspeed -----------------------------------------------------------------------------


def _world(call: Call) -> dict[str, list[int]]:
    (info,) = [a.removeprefix("--world_info=") for a in call.argv if a.startswith("--world_info=")]
    world: dict[str, list[int]] = json.loads(base64.urlsafe_b64decode(info))
    return world


def test_deepspeed_two_nodes_per_rank(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["python", "train.py", *HOSTILE]}, runtime={"kind": "deepspeed"},
                             resources={"nodes": 2, "gpus_per_node": 2}), site)
    assert plan.procs_per_node == 2
    for rank in (0, 1):
        node = run_node(plan, tmp_path, rank, 2, CUDA_VISIBLE_DEVICES="5,7")
        assert node.rc == 0, node.stderr
        call = node.one("python")
        assert call.argv[:3] == ["-u", "-m", "deepspeed.launcher.launch"]
        assert call.argv[4:] == [f"--node_rank={rank}", "--master_addr=10.0.0.1", "--master_port=29501",
                                 "train.py", *HOSTILE]
        # this node keeps the GPU slots the executor gave it; the other node's count is what matters there
        assert _world(call) == {"node0": [5, 7] if rank == 0 else [0, 1], "node1": [5, 7] if rank == 1 else [0, 1]}


@pytest.mark.parametrize(
    ("argv", "options", "flags", "tail"),
    [
        (["python", "-m", "pkg.train", "--x"], {}, ["--module"], ["pkg.train", "--x"]),
        (["python", "-u", "main.py"], {"no_local_rank": True}, ["--no_python", "--no_local_rank"],
         ["python", "-u", "main.py"]),
        (["./run.sh"], {}, ["--no_python"], ["./run.sh"]),
    ],
)
def test_deepspeed_command_shapes(spec: SpecFactory, site: SiteProfile, tmp_path: Path, argv: list[str],
                                  options: dict[str, Any], flags: list[str], tail: list[str]) -> None:
    plan = compile_task(spec(entrypoint={"argv": argv}, runtime={"kind": "deepspeed", "options": options},
                             resources={"tasks_per_node": 3}), site)
    node = run_node(plan, tmp_path, 0, 1)
    assert node.rc == 0, node.stderr
    call = node.one("python")
    assert call.argv[7:] == [*flags, *tail]
    assert _world(call) == {"node0": [0, 1, 2]}


# --- horovod / mpi -------------------------------------------------------------------------


def test_mpirun_starts_every_rank_from_node_zero(spec: SpecFactory, site_with: Callable[..., SiteProfile],
                                                 tmp_path: Path) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["./solver", *HOSTILE]}, runtime={"kind": "mpi"},
                             resources={"nodes": 2, "tasks_per_node": 4},
                             environment={"variables": {"MY_SETTING": "a b"}}),
                        site_with(rdma=False, socket_ifname="eth1"))
    assert plan.procs_per_node == 4
    node = run_node(plan, tmp_path, 0, 2, TACC_NODELIST="gpu-a,gpu-b", CUDA_VISIBLE_DEVICES="0")
    assert node.rc == 0, node.stderr
    call = node.one("mpirun")
    hostfile = node.taskdir / "hostfile"
    assert hostfile.read_text() == "gpu-a slots=4\ngpu-b slots=4\n"
    assert call.argv[:8] == ["-np", "8", "--hostfile", str(hostfile), "--map-by", "slot", "--bind-to", "none"]
    assert call.argv[8:12] == ["--mca", "btl_tcp_if_include", "eth1", "--mca"]
    assert call.argv[-len(HOSTILE) - 1:] == ["./solver", *HOSTILE]
    forwarded = {call.argv[i + 1] for i, a in enumerate(call.argv[:-len(HOSTILE) - 1]) if a == "-x"}
    assert {"MY_SETTING", "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "PATH", "TACC_MASTER_ADDR"} <= forwarded
    assert not {"CUDA_VISIBLE_DEVICES", "TACC_NODE_RANK"} & forwarded
    assert call.env["NCCL_IB_DISABLE"] == "1"

    other = run_node(plan, tmp_path, 1, 2, TACC_NODELIST="gpu-a,gpu-b")
    assert (other.rc, other.calls) == (0, [])  # its ranks come from node 0
    assert "started from node 0 by mpirun" in other.stderr


@pytest.mark.parametrize(("env", "message"), [
    ({}, "TACC_NODELIST is not set"),
    ({"TACC_NODELIST": "gpu-a"}, "TACC_NODELIST names 1 nodes, TACC_NNODES is 2"),
])
def test_mpi_needs_the_node_list(spec: SpecFactory, site: SiteProfile, tmp_path: Path, env: dict[str, str],
                                 message: str) -> None:
    plan = compile_task(spec(runtime={"kind": "horovod"}, resources={"nodes": 2, "gpus_per_node": 1}), site)
    node = run_node(plan, tmp_path, 0, 2, **env)
    assert (node.rc, node.calls) == (3, [])
    assert message in node.stderr


def test_horovodrun_single_node_uses_localhost(spec: SpecFactory, site_with: Callable[..., SiteProfile],
                                               tmp_path: Path) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["python", "train.py", *HOSTILE]}, runtime={"kind": "horovod"},
                             resources={"gpus_per_node": 2}), site_with(**RDMA))
    node = run_node(plan, tmp_path, 0, 1)
    assert node.rc == 0, node.stderr
    hostfile = node.taskdir / "hostfile"
    assert hostfile.read_text() == "localhost slots=2\n"
    assert node.one("horovodrun").argv == ["-np", "2", "--hostfile", str(hostfile), "--network-interface", "ib0",
                                           "python", "train.py", *HOSTILE]


def test_srun_launcher(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["./solver", *HOSTILE]},
                             runtime={"kind": "horovod", "options": {"launcher": "srun", "nproc_per_node": 3}},
                             resources={"nodes": 2, "gpus_per_node": 4}), site)
    node = run_node(plan, tmp_path, 0, 2, TACC_NODELIST="a,b")
    assert node.rc == 0, node.stderr
    assert node.one("srun").argv == ["--overlap", "--nodes=2", "--ntasks-per-node=3", "--mpi=pmix",
                                     "--kill-on-bad-exit=1", "./solver", *HOSTILE]
    assert not (node.taskdir / "hostfile").exists()


def test_launcher_exit_code_is_the_task_s(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    plan = compile_task(spec(runtime={"kind": "mpi"}), site)
    assert run_node(plan, tmp_path, 0, 1, FAKE_EXIT="7").rc == 7


# --- byteps --------------------------------------------------------------------------------


@pytest.mark.parametrize(("servers", "rank1_roles"), [("first", ["worker"]), ("every_node", ["server", "worker"])])
def test_byteps_roles_per_node(spec: SpecFactory, site: SiteProfile, tmp_path: Path, servers: str,
                               rank1_roles: list[str]) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["python", "train.py", *HOSTILE]},
                             runtime={"kind": "byteps", "options": {"servers": servers}},
                             resources={"nodes": 2, "gpus_per_node": 2}), site)
    for rank, roles in ((0, ["scheduler", "server", "worker"]), (1, rank1_roles)):
        start = time.monotonic()
        node = run_node(plan, tmp_path, rank, 2, CUDA_VISIBLE_DEVICES="2,3", FAKE_WAIT_FOR=str(len(roles)))
        assert node.rc == 0, node.stderr
        assert time.monotonic() - start < 20, "the scheduler and server were not stopped after the worker"
        assert sorted(c.env["DMLC_ROLE"] for c in node.calls) == roles
        for c in node.calls:
            assert c.env["DMLC_PS_ROOT_URI"] == "10.0.0.1" and c.env["DMLC_PS_ROOT_PORT"] == "29501"
            assert c.env["DMLC_NUM_WORKER"] == "2" and c.env["DMLC_WORKER_ID"] == str(rank)
            assert c.env["DMLC_NUM_SERVER"] == ("1" if servers == "first" else "2")
            assert c.program == "bpslaunch"
            assert c.argv == ([] if c.env["DMLC_ROLE"] != "worker" else ["python", "train.py", *HOSTILE])
        worker = next(c for c in node.calls if c.env["DMLC_ROLE"] == "worker")
        assert worker.env["NVIDIA_VISIBLE_DEVICES"] == "2,3"
        deadline = time.monotonic() + 10
        while any(_alive(c.pid) for c in node.calls) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [c for c in node.calls if _alive(c.pid)], "a background role outlived the task"


def test_byteps_worker_failure_fails_the_node(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    plan = compile_task(spec(runtime={"kind": "byteps"}, resources={"gpus_per_node": 1}), site)
    assert run_node(plan, tmp_path, 0, 1, FAKE_EXIT="5").rc == 5


def test_byteps_interface_from_the_site(spec: SpecFactory, site_with: Callable[..., SiteProfile]) -> None:
    plan = compile_task(spec(runtime={"kind": "byteps"}), site_with(**RDMA))
    assert plan.launch.env["DMLC_INTERFACE"] == "ib0"
    plan = compile_task(spec(runtime={"kind": "byteps"}), site_with(**{**RDMA, "socket_ifname": "^docker,lo"}))
    assert "DMLC_INTERFACE" not in plan.launch.env


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "site_changes", "field"), [
    ({"runtime": {"kind": "deepspeed", "options": {"nproc_per_node": 0}}}, {}, "runtime.options.nproc_per_node"),
    ({"runtime": {"kind": "mpi", "options": {"launcher": "horovodrun"}}}, {}, "runtime.options.launcher"),
    ({"runtime": {"kind": "horovod", "options": {"launcher": "$(id)"}}}, {}, "runtime.options.launcher"),
    ({"runtime": {"kind": "horovod", "options": {"srun_mpi": "pmi2; id"}}}, {}, "runtime.options.srun_mpi"),
    ({"runtime": {"kind": "byteps", "options": {"servers": "all"}}}, {}, "runtime.options.servers"),
    ({"runtime": {"kind": "byteps"}, "resources": {"tasks_per_node": 2}}, {}, "resources.tasks_per_node"),
    ({"network": {"rdma": "required"}}, {"rdma": False}, "network.rdma"),
])
def test_refusals_name_the_field(spec: SpecFactory, site_with: Callable[..., SiteProfile], fields: dict[str, Any],
                                 site_changes: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as exc:
        compile_task(spec(**fields), site_with(**site_changes))
    assert [f for f, _ in exc.value.errors] == [field]


# --- network -------------------------------------------------------------------------------

IB = {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "ib0"}


@pytest.mark.parametrize(("site_changes", "rdma", "env", "fallback", "required"), [
    ({}, "preferred", {}, {}, False),
    ({}, "required", {}, {}, False),
    ({}, "off", {"NCCL_IB_DISABLE": "1"}, {}, False),
    ({"rdma": False}, "preferred", {"NCCL_IB_DISABLE": "1"}, {}, False),
    ({"rdma": False, "socket_ifname": "eth0"}, "off", {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}, {},
     False),
    (RDMA, "off", {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "ib0"}, {}, False),
    (RDMA, "preferred", IB, {"NCCL_IB_DISABLE": "1"}, False),
    (RDMA, "required", IB, {}, True),
    ({"rdma": True}, "preferred", {"NCCL_IB_DISABLE": "0"}, {"NCCL_IB_DISABLE": "1"}, False),
])
def test_network_env(site_with: Callable[..., SiteProfile], site_changes: dict[str, Any], rdma: str,
                     env: dict[str, str], fallback: dict[str, str], required: bool) -> None:
    net = network_env(site_with(**site_changes), Network(rdma=rdma))  # type: ignore[arg-type]
    assert (net.env, net.cross_switch_env, net.rdma_required) == (env, fallback, required)


@pytest.mark.parametrize("kind", ["plain", "torchrun", "deepspeed", "horovod", "mpi", "byteps"])
def test_every_runtime_gets_the_network(spec: SpecFactory, site_with: Callable[..., SiteProfile], kind: str) -> None:
    plan = compile_task(spec(runtime={"kind": kind}), site_with(**RDMA))
    assert IB.items() <= plan.launch.env.items()
    assert plan.launch.cross_switch_env == {"NCCL_IB_DISABLE": "1"}
    assert ExecutionPlan.model_validate_json(plan.model_dump_json()) == plan


@pytest.mark.parametrize(("cross", "expected"), [(None, "0"), ("0", "0"), ("1", "1")])
def test_crossing_switches_falls_back_to_tcp(spec: SpecFactory, site_with: Callable[..., SiteProfile],
                                             tmp_path: Path, cross: str | None, expected: str) -> None:
    plan = compile_task(spec(runtime={"kind": "torchrun"}, resources={"nodes": 2, "gpus_per_node": 2}),
                        site_with(**RDMA))
    node = run_node(plan, tmp_path, 1, 2, **({} if cross is None else {"TACC_CROSS_SWITCH": cross}))
    assert node.rc == 0, node.stderr
    call = node.one("python")
    assert call.env["NCCL_IB_DISABLE"] == expected and call.env["NCCL_IB_HCA"] == "mlx5_0:1"
    assert (call.env["PET_NODE_RANK"], call.env["PET_MASTER_ADDR"]) == ("1", "10.0.0.1")


def test_required_rdma_refuses_a_placement_across_switches(spec: SpecFactory, site_with: Callable[..., SiteProfile],
                                                          tmp_path: Path) -> None:
    plan = compile_task(spec(runtime={"kind": "deepspeed"}, network={"rdma": "required"},
                             resources={"nodes": 2, "gpus_per_node": 1}), site_with(**RDMA))
    node = run_node(plan, tmp_path, 0, 2, TACC_CROSS_SWITCH="1")
    assert (node.rc, node.calls) == (3, [])
    assert "network.rdma is required but the placement spans switches" in node.stderr
    assert run_node(plan, tmp_path / "same", 0, 2).rc == 0


@pytest.mark.parametrize("field", ["ib_hca", "socket_ifname"])
@pytest.mark.parametrize("value", ["mlx5_0 ; id", "$(id)", "a\nb", ""])
def test_site_network_names_are_checked(site_with: Callable[..., SiteProfile], field: str, value: str) -> None:
    with pytest.raises(ValidationError):
        site_with(**{field: value})


def test_every_plugin_module_is_declared_as_an_entry_point() -> None:
    """A fresh install finds the runtimes through pyproject.toml's entry points: none may be left out."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    with (root / "pyproject.toml").open("rb") as f:
        declared = tomllib.load(f)["project"]["entry-points"]["tacc_hub.runtimes"]
    modules = {v.split(":")[0] for v in declared.values()}
    shipped = {f"tacc_runtimes.{p.stem}" for p in (root / "runtimes").glob("*.py") if not p.stem.startswith("_")}
    assert modules == shipped
    assert set(declared) == {"plain", "torchrun", "deepspeed", "horovod", "mpi", "byteps"}
