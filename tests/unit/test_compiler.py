"""compile_task: site refusals, runtime plugins, env plans, and launch.sh run for real under bash."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import ENTRYPOINT_FILE, ExecutionPlan, SiteProfile, compile_task
from tacc_hub.compiler.plan import EnvRef
from tacc_hub.schema import SpecError, TaskSpec

SpecFactory = Callable[..., TaskSpec]

# --- refusals ----------------------------------------------------------------------------

REFUSALS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    # (id, spec fields, site changes, field named)
    ("too many nodes", {"resources": {"nodes": 5}}, {}, "resources.nodes"),
    ("too many gpus", {"resources": {"gpus_per_node": 9}}, {}, "resources.gpus_per_node"),
    ("gpus on a cpu site", {"resources": {"gpus_per_node": 1}}, {"max_gpus_per_node": 0}, "resources.gpus_per_node"),
    ("unknown partition", {"resources": {"partition": "bigmem"}}, {}, "resources.partition"),
    ("unknown gpu type", {"resources": {"gpus_per_node": 1, "gpu_type": "h100"}}, {}, "resources.gpu_type"),
    ("unknown dataset", {"datasets": ["mnist", "cifar10"]}, {}, "datasets[1]"),
    ("modules without modules", {"environment": {"modules": ["cuda/12"]}}, {"modules": False}, "environment.modules"),
    (
        "conda without conda",
        {"environment": {"conda": {"dependencies": ["numpy"]}}},
        {"conda_command": None},
        "environment.conda",
    ),
    ("python not at site", {"environment": {"python": "3.10"}}, {}, "environment.python"),
    ("runtime without plugin", {"runtime": {"kind": "megatron"}}, {}, "runtime.kind"),
    ("unknown torchrun option", {"runtime": {"kind": "torchrun", "options": {"foo": 1}}}, {}, "runtime.options.foo"),
    (
        "bad torchrun option value",
        {"runtime": {"kind": "torchrun", "options": {"nproc_per_node": 0}}},
        {},
        "runtime.options.nproc_per_node",
    ),
    ("plain takes no options", {"runtime": {"kind": "plain", "options": {"x": True}}}, {}, "runtime.options.x"),
    (
        "torchrun on more nodes than the site has",
        {"runtime": {"kind": "torchrun"}, "resources": {"nodes": 2}},
        {"max_nodes": 1},
        "resources.nodes",
    ),
    ("plain with two ranks", {"resources": {"tasks_per_node": 2}}, {}, "resources.tasks_per_node"),
    ("local code", {"code": {"kind": "local", "path": "."}}, {}, "code"),
]


@pytest.mark.parametrize(
    ("fields", "site_changes", "field"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_compile_refusals_name_the_field(
    spec: SpecFactory, site_with: Callable[..., SiteProfile], fields: dict[str, Any], site_changes: dict[str, Any],
    field: str,
) -> None:
    task = spec(**fields)
    with pytest.raises(SpecError) as exc:
        compile_task(task, site_with(**site_changes))
    assert [f for f, _ in exc.value.errors] == [field]


def test_refusal_lists_what_the_site_has(spec: SpecFactory, site: SiteProfile) -> None:
    with pytest.raises(SpecError, match="available: imagenet, mnist"):
        compile_task(spec(datasets=["cifar10"]), site)


# --- determinism and purity ---------------------------------------------------------------


def test_compile_is_deterministic_and_does_not_touch_the_spec(spec: SpecFactory, site: SiteProfile) -> None:
    fields = {
        "environment": {"requirements": ["torch==2.3.1"], "variables": {"B": "2", "A": "1"}},
        "datasets": ["mnist", "imagenet"],
        "runtime": {"kind": "torchrun"},
        "resources": {"gpus_per_node": 2},
    }
    task = spec(**fields)
    before = task.model_dump_json()
    first = compile_task(task, site).model_dump_json()
    again = compile_task(spec(**fields), site).model_dump_json()
    assert first == again
    assert task.model_dump_json() == before
    assert ExecutionPlan.model_validate_json(first).model_dump_json() == first  # round-trips through the store


# --- runtimes ------------------------------------------------------------------------------

TORCHRUN_ARGV: list[tuple[str, list[str], list[object]]] = [
    ("python script", ["python", "train.py", "--lr", "1"], ["train.py", "--lr", "1"]),
    ("python module", ["python3", "-m", "pkg.train", "-x"], ["--module", "pkg.train", "-x"]),
    ("python with options", ["python", "-u", "train.py"], ["--no-python", "python", "-u", "train.py"]),
    ("python -c", ["python", "-c", "print(1)"], ["--no-python", "python", "-c", "print(1)"]),
    ("bare script", ["train.py", "a"], ["train.py", "a"]),
    ("other program", ["./run.sh", "a"], ["--no-python", "./run.sh", "a"]),
]


@pytest.mark.parametrize(("argv", "tail"), [c[1:] for c in TORCHRUN_ARGV], ids=[c[0] for c in TORCHRUN_ARGV])
def test_torchrun_command_shapes(spec: SpecFactory, site: SiteProfile, argv: list[str], tail: list[object]) -> None:
    plan = compile_task(spec(entrypoint={"argv": argv}, runtime={"kind": "torchrun"}), site)
    head = ["python", "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=1", "--max-restarts=0"]
    assert plan.launch.argv == [*head, *tail]
    assert plan.launch.env_from == {
        "PET_NODE_RANK": "TACC_NODE_RANK", "PET_MASTER_ADDR": "TACC_MASTER_ADDR", "PET_MASTER_PORT": "TACC_MASTER_PORT",
    }


def test_torchrun_runs_shell_entrypoints_without_python(spec: SpecFactory, site: SiteProfile) -> None:
    plan = compile_task(spec(entrypoint={"shell": ["python train.py"]}, runtime={"kind": "torchrun"}), site)
    assert plan.launch.argv[6:] == ["--no-python", "bash", EnvRef(env="TACC_TASKDIR", suffix="/" + ENTRYPOINT_FILE)]


@pytest.mark.parametrize(
    ("resources", "options", "nproc"),
    [({}, {}, 1), ({"gpus_per_node": 4}, {}, 4), ({"tasks_per_node": 2, "gpus_per_node": 4}, {}, 2),
     ({"gpus_per_node": 4}, {"nproc_per_node": 3}, 3)],
)
def test_torchrun_ranks_per_node(
    spec: SpecFactory, site: SiteProfile, resources: dict[str, int], options: dict[str, int], nproc: int
) -> None:
    plan = compile_task(spec(resources=resources, runtime={"kind": "torchrun", "options": options}), site)
    assert f"--nproc-per-node={nproc}" in plan.launch.argv
    assert plan.procs_per_node == nproc


def test_plain_runs_the_argv_as_given(spec: SpecFactory, site: SiteProfile) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["python", "-u", "train.py"]}, resources={"nodes": 2}), site)
    assert plan.launch.argv == ["python", "-u", "train.py"]
    assert (plan.procs_per_node, plan.runtime, plan.files) == (1, "plain", {})


def test_shell_lines_go_to_entrypoint_sh_not_to_launch_sh(spec: SpecFactory, site: SiteProfile) -> None:
    lines = ["cd data", "python train.py $(cat args) | tee out"]
    plan = compile_task(spec(entrypoint={"shell": lines}), site)
    assert plan.files == {ENTRYPOINT_FILE: "set -e\ncd data\npython train.py $(cat args) | tee out\n"}
    assert "cat args" not in plan.script
    assert plan.script.endswith('exec bash "${TACC_TASKDIR}"/entrypoint.sh\n')


# --- environments ------------------------------------------------------------------------


def test_env_plans(spec: SpecFactory, site: SiteProfile, site_with: Callable[..., SiteProfile]) -> None:
    base = compile_task(spec(), site).env
    assert (base.kind, base.path, base.digest, base.python) == (
        "base", "/opt/python3.11", "base-3.11", "/opt/python3.11/bin/python3.11",
    )
    venv = compile_task(spec(environment={"requirements": ["b==1", "a==2"], "python": "3.12"}), site).env
    assert (venv.kind, venv.builder, venv.requirements) == ("venv", "uv", ["a==2", "b==1"])
    assert venv.python == "/opt/python3.12/bin/python3.12"
    assert venv.path == "/srv/tacc/envs/" + venv.digest
    assert venv.inherit_packages == ["/opt/tacc_hub/site-packages"]
    reordered = compile_task(spec(environment={"requirements": ["a==2", "b==1"], "python": "3.12"}), site).env
    assert reordered.digest == venv.digest  # same packages, same cached env
    other = compile_task(spec(environment={"requirements": ["a==3", "b==1"], "python": "3.12"}), site).env
    assert other.digest != venv.digest
    pip = compile_task(spec(environment={"requirements": ["a==2", "b==1"], "python": "3.12"}),
                       site_with(env_builder="pip")).env
    assert pip.digest != venv.digest  # a different builder builds a different env
    conda = compile_task(spec(environment={"conda": {"name": "e", "dependencies": ["numpy=2"]}}), site).env
    assert (conda.kind, conda.builder, conda.conda_command) == ("conda", "conda", "/opt/conda/bin/micromamba")
    assert conda.conda is not None and conda.conda.dependencies == ["numpy=2"]


@pytest.mark.parametrize(
    ("entrypoint", "gpus", "language", "size"),
    [({"argv": ["python", "train.py"]}, 0, "python", "cpu"),
     ({"argv": ["papermill", "run.ipynb", "out.ipynb"]}, 1, "notebook", "small"),
     ({"argv": ["bash", "run.sh"]}, 8, "shell", "medium"),
     ({"argv": ["./a.out"]}, 0, "other", "cpu"),
     ({"shell": ["make all"]}, 0, "shell", "cpu")],
)
def test_features(
    spec: SpecFactory, site: SiteProfile, entrypoint: dict[str, list[str]], gpus: int, language: str, size: str
) -> None:
    features = compile_task(spec(entrypoint=entrypoint, resources={"gpus_per_node": gpus}), site).features
    assert (features.language, features.size_class, features.total_gpus, features.code_bytes) == (
        language, size, gpus, 10,
    )


# --- launch.sh under bash: hostile values stay inert ------------------------------------

HOSTILE = ["$(touch PWNED)", "`touch PWNED2`", "; touch PWNED3", "a'b\"c", "x\ny", "${HOME}", "*", "", "-n", "\\"]


def _run(plan: ExecutionPlan, tmp_path: Path) -> str:
    """Run launch.sh as an executor would: task directories in the environment, plan files written."""
    work, task, user, cwd = (tmp_path / d for d in ("work", "task", "user", "cwd"))
    for d in (work, task, user, cwd):
        d.mkdir(exist_ok=True)
    for name, text in plan.files.items():
        (task / name).write_text(text)
    (task / "launch.sh").write_text(plan.script)
    env = {
        "PATH": os.environ["PATH"], "HOME": str(user), "TACC_TASK_ID": "1", "TACC_TASKDIR": str(task),
        "TACC_WORKDIR": str(work), "TACC_USERDIR": str(user), "TACC_NODE_RANK": "0", "TACC_NNODES": "1",
        "TACC_MASTER_ADDR": "127.0.0.1", "TACC_MASTER_PORT": "29500",
    }
    out = subprocess.run(
        ["bash", str(task / "launch.sh")], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert out.returncode == 0, out.stderr
    assert not [p for p in tmp_path.rglob("PWNED*")], "a hostile string was executed"
    return out.stdout




def test_hostile_argv_reaches_the_program_unchanged(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    plan = compile_task(spec(entrypoint={"argv": ["printf", "<%s>\n", *HOSTILE]}), site)
    assert _run(plan, tmp_path) == "".join(f"<{a}>\n" for a in HOSTILE)


def test_hostile_env_value_reaches_the_program_unchanged(
    spec: SpecFactory, site: SiteProfile, tmp_path: Path
) -> None:
    value = "".join(HOSTILE)
    variables = {"HOSTILE": value, "OTHER": "$(touch PWNED4)"}
    argv_plan = compile_task(spec(entrypoint={"argv": ["printenv", "HOSTILE"]}, environment={"variables": variables}),
                             site)
    assert _run(argv_plan, tmp_path) == value + "\n"
    shell_plan = compile_task(
        spec(entrypoint={"shell": ['printf "<%s>" "$HOSTILE" "$OTHER"']}, environment={"variables": variables}), site
    )
    assert _run(shell_plan, tmp_path) == f"<{value}><$(touch PWNED4)>"


def test_hostile_workdir_is_entered_not_executed(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    workdir = "sub dir/$(touch PWNED)/;x"
    (tmp_path / "work" / workdir).mkdir(parents=True)
    plan = compile_task(spec(entrypoint={"argv": ["pwd"]}, workdir=workdir), site)
    assert _run(plan, tmp_path) == f"{tmp_path / 'work' / workdir}\n"


def test_datasets_are_linked_into_the_workdir(spec: SpecFactory, site_with: Callable[..., SiteProfile],
                                              tmp_path: Path) -> None:
    shared = tmp_path / "shared data"
    shared.mkdir()
    (shared / "hello.txt").write_text("hi")
    plan = compile_task(spec(entrypoint={"argv": ["cat", "datasets/mnist/hello.txt"]}, datasets=["mnist"]),
                        site_with(datasets={"mnist": str(shared)}))
    assert _run(plan, tmp_path) == "hi"
