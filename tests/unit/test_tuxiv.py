"""Importing SING/TACC ``tuxiv.conf`` files."""

from __future__ import annotations

from typing import Any

import pytest

from tacc_hub.schema import SpecError, load_tuxiv, parse_sbatch, spec_from_tuxiv

# The example from the TACC documentation (turingaicloud/quickstart tuxiv.conf.md), its
# command's arguments split over items as TACC's own TensorFlow example does, with both ways of
# writing job.env.
TACC_EXAMPLE = """
entrypoint:
    - python ${TACC_WORKDIR}/mnist.py
    - --epoch=3
    - --data_dir=${TACC_WORKDIR}/datasets/mnist
environment:
    name: torch-env
    channels: defaults
    dependencies:
        - python=3.8
        - pytorch=1.6.0
        - torchvision=0.7.0
job:
    name: test
    general:
        - nodes=2
        - ntasks-per-node=1
        - cpus-per-task=10
        - gres=gpu:2
        - time=1-00:00:00
        - partition=gpu
        - output=${TACC_WORKDIR}/x.log
    module:
        - cuda/10.1
        - nccl/2.7
    env:
        %s
    log: ${TACC_WORKDIR}/x.log
datasets:
    - mnist
"""
ENV_AS_DICT = "{NCCL_DEBUG: INFO, NCCL_SOCKET_IFNAME: ib0}"
ENV_AS_LIST = "[NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME=ib0]"


def tuxiv(general: list[str], **extra: Any) -> dict[str, Any]:
    return {"entrypoint": ["python x.py"], "job": {"name": "t", "general": general}, **extra}


@pytest.mark.parametrize("env", [ENV_AS_DICT, ENV_AS_LIST], ids=["env-dict", "env-list"])
def test_documented_tacc_example(env: str) -> None:
    spec = load_tuxiv(TACC_EXAMPLE % env)
    assert spec.name == "test"
    assert spec.entrypoint.shell == [  # one command, as TACC's run.sh has it; variables are set at run time
        "python ${TACC_WORKDIR}/mnist.py --epoch=3 --data_dir=${TACC_WORKDIR}/datasets/mnist",
    ]
    assert spec.entrypoint.argv is None
    conda = spec.environment.conda
    assert conda is not None
    assert (conda.name, conda.channels) == ("torch-env", ["defaults"])
    assert conda.dependencies == ["python=3.8", "pytorch=1.6.0", "torchvision=0.7.0"]
    assert spec.environment.requirements == []
    assert spec.environment.modules == ["cuda/10.1", "nccl/2.7"]
    assert spec.environment.variables == {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "ib0"}
    r = spec.resources
    assert (r.nodes, r.tasks_per_node, r.cpus_per_task, r.gpus_per_node, r.gpu_type) == (2, 1, 10, 2, None)
    assert (r.time_limit, r.partition) == (86400, "gpu")
    assert spec.log_file == "x.log"
    assert spec.datasets == ["mnist"]
    assert spec.code.kind == "local"


def test_log_paths_under_the_workdir_set_the_log_file() -> None:
    assert spec_from_tuxiv(tuxiv(["output=${TACC_WORKDIR}/logs/x.log"])).log_file == "logs/x.log"
    assert spec_from_tuxiv({"entrypoint": ["x"], "job": {"log": "$TACC_WORKDIR/y.log"}}).log_file == "y.log"
    assert spec_from_tuxiv({"entrypoint": ["x"], "job": {"log": "rel/z.log"}}).log_file == "rel/z.log"


@pytest.mark.parametrize(
    ("general", "expected"),
    [
        (["gres=gpu:v100:2"], {"resources.gpu_type": "v100", "resources.gpus_per_node": 2}),
        (["gres=gpu:4"], {"resources.gpus_per_node": 4}),
        (["gpus-per-node=a100:8"], {"resources.gpu_type": "a100", "resources.gpus_per_node": 8}),
        (["--nodes=2", "--ntasks=8"], {"resources.nodes": 2, "resources.tasks_per_node": 4}),
        (["ntasks=8", "nodes=2"], {"resources.nodes": 2, "resources.tasks_per_node": 4}),
        (["ntasks=3"], {"resources.tasks_per_node": 3}),
        (["nodes=2", "ntasks=4", "ntasks-per-node=2"], {"resources.nodes": 2, "resources.tasks_per_node": 2}),
        (["mem=16G", "time=90"], {"resources.memory": 16384, "resources.time_limit": 5400}),
        (["job-name=run-7", "qos=low", "requeue"], {"name": "run-7", "qos.class": "low"}),
        ([" partition = debug "], {"resources.partition": "debug"}),
    ],
)
def test_sbatch_options_map_into_the_schema(general: list[str], expected: dict[str, Any]) -> None:
    assert parse_sbatch(general) == expected


def test_gres_with_type_reaches_the_spec() -> None:
    spec = spec_from_tuxiv(tuxiv(["gres=gpu:v100:2"]))
    assert (spec.resources.gpu_type, spec.resources.gpus_per_node) == ("v100", 2)


REFUSED: list[tuple[str, list[Any], str, str]] = [
    ("unknown option", ["nodes=1", "foo=1"], "job.general[1]", "foo"),
    ("uid", ["uid=0"], "job.general[0]", "uid"),
    ("gid", ["--gid=0"], "job.general[0]", "gid"),
    ("wrap", ["wrap=rm -rf ~"], "job.general[0]", "wrap"),
    ("chdir", ["chdir=/"], "job.general[0]", "chdir"),
    ("export", ["nodes=1", "export=ALL"], "job.general[1]", "export"),
    ("nodelist", ["nodelist=gpu[1-4]"], "job.general[0]", "nodelist"),
    ("abbreviated chdir", ["chd=/"], "job.general[0]", "chd"),
    ("nodes with rm", ["nodes=2; rm -rf /"], "job.general[0]", "nodes"),
    ("partition with $()", ["partition=$(x)"], "job.general[0]", "partition"),
    ("partition with newline", ["partition=gpu\nrm"], "job.general[0]", "partition"),
    ("gres with backticks", ["gres=gpu:`id`:1"], "job.general[0]", "gres"),
    ("time words", ["time=forever"], "job.general[0]", "time"),
    ("mem words", ["mem=lots"], "job.general[0]", "mem"),
    ("qos", ["qos=urgent"], "job.general[0]", "qos"),
    ("flag with value", ["requeue=no"], "job.general[0]", "requeue"),
    ("zero nodes", ["nodes=0", "ntasks=4"], "job.general[0]", "nodes"),
    ("zero ntasks", ["ntasks=0"], "job.general[0]", "ntasks"),
    ("not a string", ["nodes=1", 2], "job.general[1]", "string"),
    ("ntasks not a multiple", ["nodes=2", "ntasks=3"], "job.general[1]", "ntasks=3"),
    ("ntasks disagrees", ["nodes=2", "ntasks=4", "ntasks-per-node=1"], "job.general[1]", "ntasks=4"),
]


@pytest.mark.parametrize(
    ("general", "field", "named"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_sbatch_options_name_option_and_entry(general: list[Any], field: str, named: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv(tuxiv(general))
    [(got_field, message)] = exc.value.errors
    assert got_field == field
    assert named in message


def test_unsafe_option_explains_why() -> None:
    with pytest.raises(SpecError, match="runs the job as another user"):
        parse_sbatch(["uid=0"])


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (tuxiv([], extra_section=1), "extra_section"),
        ({"entrypoint": ["x"], "job": {"name": "t", "nodes": 2}}, "job.nodes"),
        ({"entrypoint": ["x"], "job": "big"}, "job"),
        ({"entrypoint": ["x"], "job": {"general": "nodes=2"}}, "job.general"),
        ({"entrypoint": ["x"], "job": {"env": ["A"]}}, "job.env[0]"),
        ({"entrypoint": ["x"], "job": {"env": "A=1"}}, "job.env"),
        ({"entrypoint": ["x"], "job": {"env": {"A-B": "1"}}}, "environment.variables.A-B"),
        ({"entrypoint": ["x"], "job": {"log": "/var/log/x"}}, "job.log"),
        ({"entrypoint": ["x"], "job": {"log": "${TACC_USERDIR}/../x.log"}}, "job.log"),
        ({"entrypoint": ["x"], "job": {"log": "${TACC_USERDIR}/"}}, "job.log"),
        ({"entrypoint": ["x"], "job": {"log": "$TACC_USERDIR/a/../../x"}}, "job.log"),
        ({"entrypoint": ["x"], "job": {"log": "${TACC_HOME}/x"}}, "job.log"),
        ({"entrypoint": ["x"], "job": {"log": 3}}, "job.log"),
        ({"entrypoint": ["x"], "job": {"general": ["output=/etc/x"]}}, "job.general[0]"),
        ({"entrypoint": ["x"], "environment": ["numpy"]}, "environment"),
        ({"entrypoint": ["x"], "environment": {"name": "e", "pip": ["x"]}}, "environment.pip"),
        ({"entrypoint": {"a": 1}}, "entrypoint"),
        ({"entrypoint": []}, "entrypoint"),
        ({"entrypoint": ["python x.py", {"a": 1}]}, "entrypoint[1]"),
        (["entrypoint"], ""),
    ],
)
def test_malformed_tuxiv_names_the_field(doc: Any, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv(doc)
    assert field in [f for f, _ in exc.value.errors], exc.value.errors


def test_default_name_and_extensions() -> None:
    spec = spec_from_tuxiv(
        {
            "entrypoint": "python train.py",
            "runtime": {"kind": "torchrun"},
            "outputs": ["ckpt"],
            "qos": {"class": "interactive"},
            "code": {"kind": "git", "url": "https://h/r.git", "commit": "abcdef0"},
        },
        default_name="from-dir",
    )
    assert spec.name == "from-dir"
    assert spec.entrypoint.shell == ["python train.py"]
    assert (spec.runtime.kind, spec.outputs, spec.qos.qos_class, spec.code.kind) == (
        "torchrun", ["ckpt"], "interactive", "git",
    )


def test_yaml_errors_surface_as_spec_errors() -> None:
    with pytest.raises(SpecError, match="aliases"):
        load_tuxiv("entrypoint: &e [x]\ndatasets: *e\n")
