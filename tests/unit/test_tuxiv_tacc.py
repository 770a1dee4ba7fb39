"""tuxiv.conf read with TACC's meaning: files as TACC's tcloud writes and runs them.

TACC's tcloud (turingaicloud/tcloud-sdk, cli/tcloudcli/tuxivconfig.go, ``RunshFile``) writes
each entrypoint item followed by `` \\`` into run.sh; the examples below are TACC's own
(turingaicloud/quickstart example/*/tuxiv.conf) or split arguments the same way.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tacc_hub.schema import SpecError, load_tacc_yaml, load_tuxiv, spec_from_data, spec_from_tuxiv

# turingaicloud/quickstart example/TensorFlow/tuxiv.conf: one command, its arguments over four items.
TACC_TENSORFLOW = """\
entrypoint:
    - python ${TACC_WORKDIR}/mnist.py
    - --task_index=0
    - --data_dir=${TACC_WORKDIR}/datasets/mnist_data
    - --batch_size=1
environment:
    name: tf
    dependencies:
        - tensorflow=1.15
job:
    name: test
    general:
        - nodes=2
"""

# turingaicloud/quickstart example/helloworld/tuxiv.conf: its log in ${TACC_SLURM_USERLOG}.
TACC_HELLO = """\
entrypoint:
  - python ${TACC_WORKDIR}/main.py
environment:
    name: hello
    channels:
      - conda-forge
    dependencies:
      - python=3.6.9
      - opencv
job:
    general:
      - nodes=1
      - ntasks=1
      - cpus-per-task=1
      - output=${TACC_SLURM_USERLOG}/hello.log
"""


def tacc_run_sh(items: list[str]) -> str:
    """run.sh's command part exactly as tcloud's RunshFile writes it: ``fmt.Sprintf("%s \\\\", s)`` per line."""
    return "".join(f"{s} \\\n" for s in items)


def bash_out(script: str) -> str:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=True).stdout


def test_tacc_tensorflow_example_is_one_command() -> None:
    spec = load_tuxiv(TACC_TENSORFLOW)
    assert spec.entrypoint.shell == [
        "python ${TACC_WORKDIR}/mnist.py --task_index=0 --data_dir=${TACC_WORKDIR}/datasets/mnist_data --batch_size=1"
    ]
    assert spec.resources.nodes == 2
    assert spec.environment.conda is not None and spec.environment.conda.name == "tf"


def test_tacc_helloworld_log_goes_to_the_persistent_directory() -> None:
    spec = load_tuxiv(TACC_HELLO)
    assert spec.entrypoint.shell == ["python ${TACC_WORKDIR}/main.py"]
    assert spec.user_log_file == "slurm_log/hello.log"  # ${TACC_SLURM_USERLOG} is ${TACC_USERDIR}/slurm_log
    assert spec.log_file is None


SPLIT_COMMANDS = [
    ["printf '<%s>\\n'", "--batch_size=1", "--lr", "0.1"],
    ["printf '<%s>\\n'", "'two words'", '"x  y"', "a\\ b"],
    ["printf '<%s>\\n'", '"a', 'b"'],  # a "..." string over two items: bash joins the continued lines
    ["printf '<%s>\\n'", "end\\"],  # a trailing backslash escapes the space tcloud adds
    ["printf '<%s>\\n' one; printf '<%s>\\n'", "two"],
    ["printf '<%s>\\n'", "", "after-empty"],
    ["printf '<%s>\\n' ${HOME:+set}", "$((1 + 2))"],
]


@pytest.mark.parametrize("items", SPLIT_COMMANDS, ids=[str(i) for i in range(len(SPLIT_COMMANDS))])
def test_the_joined_command_runs_as_tacc_run_sh_does(items: list[str]) -> None:
    (line,) = spec_from_tuxiv({"entrypoint": items}).entrypoint.shell or []
    assert bash_out(line + "\n") == bash_out(tacc_run_sh(items))


def test_items_that_are_not_strings_are_taken_as_written() -> None:
    items = ["python train.py", "--epochs", "010", "--fast", "yes", "--lr", "1e-3"]
    spec = load_tuxiv("entrypoint:\n" + "".join(f"  - {i}\n" for i in items))
    assert spec.entrypoint.shell == ["python train.py --epochs 010 --fast yes --lr 1e-3"]


@pytest.mark.parametrize(
    ("items", "field", "words"),
    [
        (["python x.py", "'# not a comment'", "--a"], None, None),
        (['python x.py "--name=a # b"', "--a"], None, None),
        (["python x.py --tag=a#b", "--a"], None, None),
        (["python x.py  # train", "--epochs=3"], "entrypoint[0]", "shell comment"),
        (["python -c 'print(1)", "+ 1'"], "entrypoint[0]", "runs on into the next item"),
        (["python x.py", "--msg='unclosed"], "entrypoint[1]", "unclosed ' quote"),
        (["python x.py", '--msg="unclosed'], "entrypoint[1]", 'unclosed " quote'),
    ],
)
def test_items_bash_would_read_differently_are_refused(items: list[str], field: str | None, words: str | None) -> None:
    if field is None:
        spec_from_tuxiv({"entrypoint": items})
        return
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv({"entrypoint": items})
    [(got, message)] = exc.value.errors
    assert got == field and words in message, exc.value.errors


# --- errors name their line --------------------------------------------------------------------

LINES = """\
entrypoint:
  - python train.py
  - --epochs=3
environment:
  name: torch
job:
  name: lines
  general:
    - nodes=1
    - foo=2
"""


def test_sbatch_error_names_the_line_of_the_option() -> None:
    with pytest.raises(SpecError) as exc:
        load_tuxiv(LINES, "proj/tuxiv.conf")
    [(field, message)] = exc.value.errors
    assert field == "job.general[1]"
    assert message.startswith("proj/tuxiv.conf line 10: unknown sbatch option 'foo'"), message


@pytest.mark.parametrize(
    ("old", "new", "field", "line"),
    [
        ("    - foo=2", "    - gres=gpu:99", "resources.gpus_per_node", 10),  # the schema's check, the option's line
        ("    - foo=2", "    - partition=$(x)", "job.general[1]", 10),
        ("  name: torch", "  name: torch\n  pip: [x]", "environment.pip", 6),
        ("  name: lines", "  name: lines\n  env: [A-B=1]", "environment.variables.A-B", 8),
        ("  - --epochs=3", "  - --epochs=3\n  - {a: 1}", "entrypoint[2]", 4),
        ("  name: lines", "  name: 'bad name'", "name", 7),
        ("  general:", "  log: ${TACC_USERDIR}/../x\n  general:", "job.log", 8),
    ],
)
def test_every_error_names_its_line(old: str, new: str, field: str, line: int) -> None:
    text = LINES.replace(old, new)
    with pytest.raises(SpecError) as exc:
        load_tuxiv(text if old == "    - foo=2" else text.replace("    - foo=2", "    - nodes=1"))
    fields = dict(exc.value.errors)
    assert field in fields, exc.value.errors
    assert fields[field].startswith(f"tuxiv.conf line {line}: "), fields[field]


def test_read_tuxiv_gives_the_unvalidated_mapping_for_overrides() -> None:
    from tacc_hub.schema.tuxiv import read_tuxiv, tuxiv_to_mapping

    text = LINES.replace("    - foo=2", "    - gres=gpu:99")
    data = tuxiv_to_mapping(text)
    assert data["resources"]["gpus_per_node"] == 99  # not validated yet: an override may still fix it
    assert data["entrypoint"] == {"shell": ["python train.py --epochs=3"]}
    tux = read_tuxiv(text)
    fixed = {**tux.data, "resources": {**tux.data["resources"], "gpus_per_node": 4}}
    assert tux.validate(fixed).resources.gpus_per_node == 4
    with pytest.raises(SpecError) as exc:
        tux.validate({**tux.data, "resources": {**tux.data["resources"], "gpus_per_node": 98}},
                     overridden={"resources.gpus_per_node"})
    assert "line" not in exc.value.errors[0][1]  # an overridden value did not come from the file


# --- options found in real TACC and sbatch files ---------------------------------------------------


def general(*options: str, **extra: Any) -> Any:
    return spec_from_tuxiv({"entrypoint": ["python x.py"], "job": {"name": "t", "general": list(options)}, **extra})


@pytest.mark.parametrize(
    "options",
    [("ntasks-per-node=4", "gpus-per-task=2"), ("gpus-per-task=2", "ntasks-per-node=4"),
     ("nodes=2", "ntasks=8", "gpus-per-task=2")],
)
def test_gpus_per_task_is_per_node_times_tasks_per_node(options: tuple[str, ...]) -> None:
    r = general(*options).resources
    assert (r.tasks_per_node, r.gpus_per_node) == (4, 8)


def test_gpus_per_task_with_a_type_and_constraint() -> None:
    r = general("gpus-per-task=v100:1", "ntasks-per-node=2").resources
    assert (r.gpus_per_node, r.gpu_type) == (2, "v100")
    r = general("gres=gpu:2", "constraint=a100").resources
    assert (r.gpus_per_node, r.gpu_type) == (2, "a100")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (("gres=gpu:2", "gpus-per-task=1"), "give the GPUs once"),
        (("constraint=a100&ib",), "one GPU type"),
        (("constraint=[a100|v100]",), "one GPU type"),
        (("gres=gpu:v100:2", "constraint=a100"), "disagrees"),
        (("exclusive",), "ask for all of their GPUs"),
        (("exclusive=user",), "gres=gpu:N"),
        (("mail-type=INVALID_DEPEND",), "known: NONE, BEGIN"),
        (("account=$(id)",), "letters, digits"),
    ],
)
def test_options_we_cannot_honour_say_what_to_write(options: tuple[str, ...], words: str) -> None:
    with pytest.raises(SpecError) as exc:
        general(*options)
    assert words in str(exc.value)


def test_mail_options_become_notify() -> None:
    spec = general("mail-type=END,begin", "mail-user=ada@example.org")
    assert spec.notify is not None
    assert (spec.notify.email, spec.notify.events) == ("ada@example.org", ["start", "end"])
    assert general("mail-type=ALL").notify.events == ["start", "end", "fail", "preempt"]  # type: ignore[union-attr]
    assert general("mail-type=TIME_LIMIT_90,REQUEUE").notify.events == ["preempt", "time_limit"]  # type: ignore[union-attr]
    assert general("mail-type=NONE").notify is None


@pytest.mark.parametrize(
    "address", ["ada", "ada@", "a b@example.org", "ada@example.org\nBcc: x@y.org", "<ada@example.org>",
                "ada@example.org,eve@example.org", "ada@-x.org", "ada@localhost", "x" * 65 + "@example.org"],
)
def test_mail_user_must_be_one_address(address: str) -> None:
    with pytest.raises(SpecError) as exc:
        general("mail-type=END", f"mail-user={address}")
    assert exc.value.errors[0][0] == "notify.email"


def test_account_is_kept_for_the_service_to_check() -> None:
    assert general("account=lab").account == "lab"
    assert general("nodes=1").account is None


def test_cachedenvname_names_the_cached_env() -> None:
    env = {"cachedenvname": "torch-cache", "dependencies": ["pytorch=1.6.0"]}
    conda = general("nodes=1", environment=env).environment.conda
    assert conda is not None and conda.name == "torch-cache"
    conda = general("nodes=1", environment={**env, "name": "torch-env"}).environment.conda
    assert conda is not None and conda.name == "torch-env"  # tcloud caches under `name` when both are set
    assert general("nodes=1", environment={**env, "cachedenvname": True}).environment.conda is not None
    with pytest.raises(SpecError) as exc:
        general("nodes=1", environment={**env, "cachedenvname": ["x"]})
    assert exc.value.errors[0][0] == "environment.cachedenvname"


@pytest.mark.parametrize(
    ("log", "field", "path"),
    [
        ("${TACC_USERDIR}/logs/run.log", "user_log_file", "logs/run.log"),
        ("$TACC_USERDIR/run.log", "user_log_file", "run.log"),
        ("${TACC_SLURM_USERLOG}/x.log", "user_log_file", "slurm_log/x.log"),
        ("${TACC_WORKDIR}/x.log", "log_file", "x.log"),
        ("rel/x.log", "log_file", "rel/x.log"),
    ],
)
def test_job_log_and_output_choose_the_directory(log: str, field: str, path: str) -> None:
    for spec in (spec_from_tuxiv({"entrypoint": ["x"], "job": {"log": log}}), general(f"output={log}")):
        assert getattr(spec, field) == path


@pytest.mark.parametrize(
    "log", ["${TACC_USERDIR}/../other/x.log", "${TACC_USERDIR}/a/../../x", "/etc/x.log", "${TACC_USERDIR}/",
            "${TACC_HOME}/x", "~/x.log"],
)
def test_log_paths_leaving_the_directories_are_refused(log: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv({"entrypoint": ["x"], "job": {"log": log}})
    assert exc.value.errors[0][0] == "job.log"


def test_tacc_yaml_fields_are_checked_too() -> None:
    base = {"name": "t", "entrypoint": {"argv": ["true"]}}
    with pytest.raises(SpecError, match="persistent directory"):
        spec_from_data({**base, "user_log_file": "../x.log"})
    spec = load_tacc_yaml("name: t\nentrypoint: [x]\nnotify: {email: a@example.org, events: [end, start, end]}\n")
    assert spec.notify is not None and spec.notify.events == ["start", "end"]  # one canonical order


# --- positions come from the same safe loader -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("entrypoint: &e [x]\ndatasets: *e\n", "aliases"),
        ("base: &b {a: 1}\njob:\n  <<: *b\n", "aliases"),
        ("job: {name: a, name: b}\nentrypoint: [x]\n", "duplicate key"),
        ("entrypoint: " + "[" * 100 + "]" * 100 + "\n", "nested deeper"),
        ("!!python/object/apply:os.system ['touch PWNED']\n", "not valid YAML"),
        ("entrypoint: [x]\n---\nentrypoint: [y]\n", "exactly one YAML document"),
    ],
)
def test_located_loading_refuses_what_plain_loading_refuses(text: str, words: str) -> None:
    from tacc_hub.schema.yamlsafe import load_yaml_located

    with pytest.raises(SpecError, match=words):
        load_yaml_located(text, "tuxiv.conf")
    with pytest.raises(SpecError, match=words):
        load_tuxiv(text)


def test_positions_are_lines_of_keys_and_items() -> None:
    from tacc_hub.schema.yamlsafe import load_yaml_located

    doc = load_yaml_located(LINES)
    assert doc.value["job"]["general"] == ["nodes=1", "foo=2"]
    assert doc.line(("job",)) == 6 and doc.line(("job", "general")) == 8
    assert doc.line(("job", "general", 1)) == 10
    assert doc.line(("job", "general", 7)) == 8  # no such item: the nearest enclosing place
    assert doc.raw[("entrypoint", 1)] == "--epochs=3"
