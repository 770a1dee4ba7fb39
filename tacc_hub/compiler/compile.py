"""compile_task: (TaskSpec, SiteProfile) -> ExecutionPlan.

Invariants: pure and deterministic (no clock, no filesystem, no randomness);
refuses, with a SpecError naming the field, anything the site cannot run.
"""

from __future__ import annotations

import hashlib
import json
import posixpath

from tacc_hub.schema import SpecError, TaskSpec
from tacc_hub.schema.arrays import value_text
from tacc_hub.schema.task import GitCode, LocalCode, SnapshotCode

from .network import network_env
from .plan import Arg, CodePlan, EnvPlan, EnvRef, ExecutionPlan, Features, InputPlan, NodeLaunch, TensorBoardPlan
from .render import render_script
from .runtime import LaunchContext, get_runtime, parse_options
from .site import SiteProfile

ENTRYPOINT_FILE = "entrypoint.sh"
PARAMS_FILE = "params.json"


def _env_plan(spec: TaskSpec, site: SiteProfile) -> EnvPlan:
    env = spec.environment
    version = env.python or site.default_python
    if version not in site.pythons:
        have = ", ".join(sorted(site.pythons)) or "none"
        raise SpecError.one("environment.python", f"Python {version} is not available at this site (available: {have})")
    python = site.pythons[version]
    if env.conda is not None:
        if not site.conda_command:
            raise SpecError.one(
                "environment.conda", "this site has no conda or micromamba; use pip requirements instead"
            )
        key = {"conda": env.conda.model_dump(mode="json"), "tool": site.conda_command}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        return EnvPlan(
            kind="conda", digest=digest, python=python, path=posixpath.join(site.env_root, digest),
            builder="conda", conda=env.conda, conda_command=site.conda_command,
        )
    if not env.requirements:
        base = posixpath.dirname(posixpath.dirname(python))
        return EnvPlan(kind="base", digest="base-" + version, python=python, path=base)
    key = {
        "python": python,
        "requirements": sorted(env.requirements),
        "builder": site.env_builder,
        "inherit": site.inherit_packages,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return EnvPlan(
        kind="venv", digest=digest, python=python, path=posixpath.join(site.env_root, digest),
        builder=site.env_builder, requirements=sorted(env.requirements), inherit_packages=site.inherit_packages,
    )


def _code_plan(spec: TaskSpec, site: SiteProfile) -> CodePlan:
    code = spec.code
    if isinstance(code, LocalCode):
        raise SpecError.one("code", "a local directory must be snapshotted and uploaded first (tcloud does this)")
    if isinstance(code, SnapshotCode):
        archive = posixpath.join(site.code_root, code.digest + ".tar.gz")
        return CodePlan(kind="snapshot", digest=code.digest, archive=archive)
    assert isinstance(code, GitCode)
    return CodePlan(kind="git", url=code.url, commit=code.commit, patch=code.patch)


def _features(spec: TaskSpec) -> Features:
    ep = spec.entrypoint
    if ep.shell is not None:
        joined = " ".join(ep.shell)
        if ".ipynb" in joined:
            language = "notebook"
        elif "python" in joined or ".py" in joined:
            language = "python"
        else:
            language = "shell"
    else:
        assert ep.argv is not None
        words = [w for w in ep.argv[:3]]
        if any(w.endswith(".ipynb") for w in words):
            language = "notebook"
        elif any(posixpath.basename(w).startswith("python") or w.endswith(".py") for w in words):
            language = "python"
        elif words[0] in ("bash", "sh") or words[0].endswith(".sh"):
            language = "shell"
        else:
            language = "other"
    gpus = spec.resources.total_gpus
    size = "cpu" if gpus == 0 else "small" if gpus == 1 else "medium" if gpus <= 8 else "large"
    code_bytes = spec.code.size if isinstance(spec.code, SnapshotCode) else 0
    return Features(language=language, size_class=size, total_gpus=gpus, code_bytes=code_bytes)


def _check_site(spec: TaskSpec, site: SiteProfile) -> None:
    r = spec.resources
    if r.nodes > site.max_nodes:
        raise SpecError.one("resources.nodes", f"{r.nodes} nodes requested; this site has {site.max_nodes}")
    if r.gpus_per_node > site.max_gpus_per_node:
        raise SpecError.one(
            "resources.gpus_per_node",
            f"{r.gpus_per_node} GPUs per node requested; the largest node here has {site.max_gpus_per_node}",
        )
    if r.partition is not None and r.partition not in site.partitions:
        have = ", ".join(site.partitions) or "none"
        raise SpecError.one("resources.partition", f"unknown partition '{r.partition}' (available: {have})")
    if r.gpu_type is not None and r.gpu_type not in site.gpu_types:
        have = ", ".join(site.gpu_types) or "none"
        raise SpecError.one("resources.gpu_type", f"unknown GPU type '{r.gpu_type}' (available: {have})")
    if spec.environment.modules and not site.modules:
        raise SpecError.one("environment.modules", "this site has no environment modules")
    for i, ds in enumerate(spec.datasets):
        if ds not in site.datasets:
            have = ", ".join(sorted(site.datasets)) or "none"
            raise SpecError.one(f"datasets[{i}]", f"unknown dataset '{ds}' (available: {have})")
    if spec.tensorboard is not None and not site.tensorboard_command:
        raise SpecError.one("tensorboard", "this site runs no TensorBoard beside tasks (its tensorboard_command is "
                            "empty); write event files and look at them after the task")


def _tensorboard_plan(spec: TaskSpec, site: SiteProfile) -> TensorBoardPlan | None:
    """The spec's TensorBoard, its log directory relative to TACC_WORKDIR (the spec's is relative to ``workdir``)."""
    if spec.tensorboard is None:
        return None
    logdir = posixpath.normpath(posixpath.join(spec.workdir, spec.tensorboard.logdir))
    return TensorBoardPlan(logdir=logdir, command=list(site.tensorboard_command))


def _array_env(spec: TaskSpec) -> tuple[dict[str, str], dict[str, str]]:
    """An array element's variables and its params.json ({"index", "size", "params"}, canonical JSON: keys sorted,
    no spaces, ASCII). Parameter values as ``arrays.value_text`` writes them (the program reads text)."""
    el = spec.array_element
    if el is None:
        return {}, {}
    env = {"TACC_ARRAY_INDEX": str(el.index), "TACC_ARRAY_SIZE": str(el.size)}
    seen: dict[str, str] = {}
    for name, value in el.params.items():
        key = "TACC_PARAM_" + name.upper()
        if key in seen:
            raise SpecError.one(f"array_element.params.{name}", f"{seen[key]} and {name} are both {key}")
        seen[key] = name
        env[key] = value_text(value)
    body = json.dumps({"index": el.index, "size": el.size, "params": el.params}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return env, {PARAMS_FILE: body + "\n"}


def _inputs(spec: TaskSpec) -> list[InputPlan]:
    out: list[InputPlan] = []
    for i, inp in enumerate(spec.inputs):
        if inp.from_ is not None:
            raise SpecError.one(f"inputs[{i}].from", "names a pipeline step: only a pipeline's steps have `from`; "
                                "outside one, name the task (task: ID) or the array (array: ID)")
        to = posixpath.normpath(inp.to if inp.to is not None else inp.path)
        if to == ".":
            raise SpecError.one(f"inputs[{i}].to", "name a path inside the work directory, not the directory itself")
        out.append(InputPlan(task=inp.task, array=inp.array, path=posixpath.normpath(inp.path), to=to))
    return out


def _user_argv(spec: TaskSpec) -> list[Arg]:
    ep = spec.entrypoint
    if ep.shell is not None:
        return ["bash", EnvRef(env="TACC_TASKDIR", suffix="/" + ENTRYPOINT_FILE)]
    assert ep.argv is not None
    return list(ep.argv)


def _launch(spec: TaskSpec, site: SiteProfile) -> NodeLaunch:
    """What each node runs: the runtime plugin's command for the entrypoint, with the site's network variables."""
    runtime = get_runtime(spec.runtime.kind)
    opts = parse_options(runtime, dict(spec.runtime.options))
    r = spec.resources
    net = network_env(site, spec.network)
    ctx = LaunchContext(
        user_argv=_user_argv(spec), shell=spec.entrypoint.shell is not None, nodes=r.nodes,
        tasks_per_node=r.tasks_per_node, gpus_per_node=r.gpus_per_node, options=dict(spec.runtime.options),
        network=net,
    )
    launch = runtime.launch(ctx, opts)
    if net.env or net.cross_switch_env or net.rdma_required:  # the plugin's own values win
        launch = launch.model_copy(update={
            "env": {**net.env, **launch.env},
            "cross_switch_env": {**net.cross_switch_env, **launch.cross_switch_env},
            "rdma_required": net.rdma_required or launch.rdma_required,
        })
    return launch


def _script(spec: TaskSpec, digest: str, env: EnvPlan, datasets: dict[str, str], launch: NodeLaunch,
            tensorboard: TensorBoardPlan | None, array_env: dict[str, str]) -> str:
    return render_script(
        name=spec.name, task_digest=digest, env=env, variables=dict(spec.environment.variables),
        modules=list(spec.environment.modules), datasets=datasets, workdir=spec.workdir, launch=launch,
        user_log=spec.user_log_file, tensorboard=tensorboard, array_env=array_env,
    )


def compile_task(spec: TaskSpec, site: SiteProfile) -> ExecutionPlan:
    if spec.array is not None:
        raise SpecError.one("array", "an array is compiled element by element (schema.arrays.expand)")
    _check_site(spec, site)
    env = _env_plan(spec, site)
    code = _code_plan(spec, site)
    array_env, files = _array_env(spec)
    inputs = _inputs(spec)
    if spec.entrypoint.shell is not None:
        files[ENTRYPOINT_FILE] = "set -e\n" + "\n".join(spec.entrypoint.shell) + "\n"
    launch = _launch(spec, site)
    datasets = {ds: site.datasets[ds] for ds in spec.datasets}
    digest = spec.digest
    tensorboard = _tensorboard_plan(spec, site)
    script = _script(spec, digest, env, datasets, launch, tensorboard, array_env)
    return ExecutionPlan(
        task_digest=digest, name=spec.name, resources=spec.resources, runtime=spec.runtime.kind,
        procs_per_node=launch.procs_per_node, env=env, code=code, workdir=spec.workdir, datasets=datasets,
        outputs=list(spec.outputs), log_file=spec.log_file, files=files, launch=launch,
        features=_features(spec), script=script, tensorboard=tensorboard, array_env=array_env, inputs=inputs,
    )


_PER_ELEMENT = ("array_element", "entrypoint")


def compile_elements(specs: list[TaskSpec], site: SiteProfile) -> list[ExecutionPlan]:
    """``[compile_task(s, site) for s in specs]`` for the elements of one array (``schema.arrays.expand``), faster.

    Elements differ only in ``array_element`` and, with placeholders, ``entrypoint.argv``; expand shares every
    other field between them (the same objects). So the first is compiled in full and each other one gets its
    own digest, variables, params.json, launch command (when its argv differs) and launch.sh on a copy of
    that plan (about three times faster for 1,000 elements). An element that shares less is compiled in full:
    the result is always what compile_task gives (tested).
    """
    if not specs:
        return []
    first = specs[0]
    base = compile_task(first, site)
    shared = [f for f in type(first).model_fields if f not in _PER_ELEMENT]
    out = [base]
    for spec in specs[1:]:
        ep, ep0 = spec.entrypoint, first.entrypoint
        if ep.shell is not ep0.shell or any(getattr(spec, f) is not getattr(first, f) for f in shared):
            out.append(compile_task(spec, site))
            continue
        array_env, files = _array_env(spec)
        if ep.shell is not None:
            files[ENTRYPOINT_FILE] = base.files[ENTRYPOINT_FILE]
        same_argv = ep.argv == ep0.argv
        launch = base.launch if same_argv else _launch(spec, site)
        digest = spec.digest
        out.append(base.model_copy(update={
            "task_digest": digest, "files": files, "launch": launch, "procs_per_node": launch.procs_per_node,
            "features": base.features if (ep.argv or [])[:3] == (ep0.argv or [])[:3] else _features(spec),
            "array_env": array_env,
            "script": _script(spec, digest, base.env, base.datasets, launch, base.tensorboard, array_env),
        }))
    return out
