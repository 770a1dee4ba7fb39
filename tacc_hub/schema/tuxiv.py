"""Importing SING/TACC's ``tuxiv.conf`` into a TaskSpec.

A tuxiv.conf has four parts: ``entrypoint`` (shell lines), ``environment``
(a conda spec: name, channels, dependencies), ``job`` (name; ``general``: sbatch
long options; ``module``; ``env``; ``log``) and ``datasets``. Paths may use
``${TACC_WORKDIR}`` (the task's working directory) and ``${TACC_USERDIR}``;
both are set for the task at run time, so shell lines keep them verbatim.

Known sbatch options map into the schema (see ``SBATCH_OPTIONS``); an unknown
one, or one that would change identity, paths or the scheduler's decisions
behind our back (``UNSAFE_SBATCH``), is refused with a message naming it.

tacc_hub extensions, accepted beside the four parts: ``runtime``, ``outputs``,
``qos``, ``network``, ``code``.

Invariant: pure; every error names the field (``job.general[2]`` etc.).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import SpecError
from .fields import parse_duration_s, parse_memory_mib
from .tacc_yaml import spec_from_data
from .task import TaskSpec
from .yamlsafe import load_yaml

TOP_KEYS = {"entrypoint", "environment", "job", "datasets", "runtime", "outputs", "qos", "network", "code"}
JOB_KEYS = {"name", "general", "module", "env", "log"}

UNSAFE_SBATCH = {
    "uid": "runs the job as another user",
    "gid": "runs the job as another group",
    "chdir": "the working directory is set by tacc_hub",
    "wrap": "the command comes from entrypoint",
    "export": "environment variables come from job.env",
    "export-file": "environment variables come from job.env",
    "get-user-env": "environment variables come from job.env",
    "nodelist": "placement is decided by the tacc_hub scheduler",
    "exclude": "placement is decided by the tacc_hub scheduler",
    "dependency": "not supported yet",
    "array": "submit one task per configuration instead",
    "input": "tasks do not read standard input",
    "container": "not supported",
    "account": "accounting is decided by your tacc_hub group",
    "reservation": "placement is decided by the tacc_hub scheduler",
    "begin": "not supported",
    "prolog": "not allowed",
    "epilog": "not allowed",
    "propagate": "not allowed",
}

# Matched with fullmatch: "$" would also accept a trailing newline.
_INT_RE = re.compile(r"\d{1,7}")
_GRES_RE = re.compile(r"gpu(?::([A-Za-z0-9][A-Za-z0-9._-]{0,63}))?:(\d{1,3})")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_WORKDIR_PREFIXES = ("${TACC_WORKDIR}/", "$TACC_WORKDIR/")


def _int(opt: str, value: str) -> int:
    if not _INT_RE.fullmatch(value):
        raise ValueError(f"{opt}={value[:80]!r}: expected a whole number")
    return int(value)


def _count(opt: str, value: str) -> int:
    n = _int(opt, value)
    if n < 1:
        raise ValueError(f"{opt}={value!r}: must be at least 1")
    return n


def _workdir_path(opt: str, value: str) -> str:
    for prefix in _WORKDIR_PREFIXES:
        if value.startswith(prefix):
            return value[len(prefix):]
    if value.startswith(("${TACC_USERDIR}", "$TACC_USERDIR", "/")):
        raise ValueError(
            f"{opt}={value!r}: only paths under ${{TACC_WORKDIR}} (or relative paths) are kept; "
            "fetch them with `tcloud download`"
        )
    return value


def _name(opt: str, value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(f"{opt}={value!r}: use letters, digits, '.', '_' and '-' only (at most 64)")
    return value


def _set(path: str, conv: Callable[[str, str], Any]) -> Callable[[dict[str, Any], str, str], None]:
    def apply(acc: dict[str, Any], opt: str, value: str) -> None:
        acc[path] = conv(opt, value)

    return apply


def _gres(acc: dict[str, Any], opt: str, value: str) -> None:
    m = _GRES_RE.fullmatch(value)
    if not m:
        raise ValueError(f"{opt}={value!r}: expected gpu:N or gpu:TYPE:N")
    if m.group(1):
        acc["resources.gpu_type"] = m.group(1)
    acc["resources.gpus_per_node"] = int(m.group(2))


def _gpu_count(acc: dict[str, Any], opt: str, value: str) -> None:
    if ":" in value:
        kind, _, count = value.partition(":")
        acc["resources.gpu_type"] = _name(opt, kind)
        value = count
    acc["resources.gpus_per_node"] = _int(opt, value)


def _mem(acc: dict[str, Any], opt: str, value: str) -> None:
    try:
        acc["resources.memory"] = parse_memory_mib(value)
    except ValueError as exc:
        raise ValueError(f"{opt}={value!r}: {exc}") from None


def _time(acc: dict[str, Any], opt: str, value: str) -> None:
    try:
        acc["resources.time_limit"] = parse_duration_s(value)
    except ValueError as exc:
        raise ValueError(f"{opt}={value!r}: {exc}") from None


def _ntasks(acc: dict[str, Any], opt: str, value: str) -> None:
    acc["_ntasks"] = _count(opt, value)


def _qos(acc: dict[str, Any], opt: str, value: str) -> None:
    if value not in ("interactive", "normal", "low"):
        raise ValueError(f"{opt}={value!r}: QoS must be interactive, normal or low")
    acc["qos.class"] = value


def _flag(acc: dict[str, Any], opt: str, value: str) -> None:
    if value not in ("", "yes", "true"):
        raise ValueError(f"{opt} takes no value")


# sbatch long option -> how it maps into the schema.
SBATCH_OPTIONS: dict[str, Callable[[dict[str, Any], str, str], None]] = {
    "nodes": _set("resources.nodes", _count),
    "ntasks-per-node": _set("resources.tasks_per_node", _count),
    "ntasks": _ntasks,
    "cpus-per-task": _set("resources.cpus_per_task", _count),
    "gres": _gres,
    "gpus-per-node": _gpu_count,
    "mem": _mem,
    "time": _time,
    "partition": _set("resources.partition", _name),
    "job-name": _set("name", _name),
    "output": _set("log_file", _workdir_path),
    "error": _set("log_file", _workdir_path),
    "qos": _qos,
    "requeue": _flag,
    "no-requeue": _flag,
}


def parse_sbatch(options: Any) -> dict[str, Any]:
    """``["nodes=2", "gres=gpu:2"]`` -> ``{"resources.nodes": 2, ...}``; errors name the entry."""
    if options is None:
        return {}
    if not isinstance(options, list):
        raise SpecError.one("job.general", "must be a list of sbatch options such as nodes=2")
    acc: dict[str, Any] = {}
    for i, raw in enumerate(options):
        field = f"job.general[{i}]"
        if not isinstance(raw, str):
            raise SpecError.one(field, "must be a string such as nodes=2")
        text = raw.strip()
        text = text[2:] if text.startswith("--") else text
        key, _, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if key in UNSAFE_SBATCH:
            raise SpecError.one(field, f"sbatch option '{key}' is not allowed: {UNSAFE_SBATCH[key]}")
        handler = SBATCH_OPTIONS.get(key)
        if handler is None:
            known = ", ".join(sorted(SBATCH_OPTIONS))
            raise SpecError.one(field, f"unknown sbatch option '{key[:64]}' (known: {known})")
        try:
            handler(acc, key, value)
        except ValueError as exc:
            raise SpecError.one(field, str(exc)) from None
    if "_ntasks" in acc:
        ntasks = acc.pop("_ntasks")
        nodes = acc.get("resources.nodes", 1)
        if ntasks % nodes:
            raise SpecError.one("job.general", f"ntasks={ntasks} is not a multiple of nodes={nodes}")
        per_node = acc.setdefault("resources.tasks_per_node", ntasks // nodes)
        if per_node * nodes != ntasks:
            raise SpecError.one(
                "job.general", f"ntasks={ntasks} disagrees with nodes={nodes} x ntasks-per-node={per_node}"
            )
    return acc


def _list_of_str(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return value
    raise SpecError.one(field, "must be a string or a list of strings")


def _env(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
    if isinstance(value, list):
        out: dict[str, Any] = {}
        for i, item in enumerate(value):
            if not isinstance(item, str) or "=" not in item:
                raise SpecError.one(f"job.env[{i}]", "must be KEY=VALUE")
            k, _, v = item.partition("=")
            out[k.strip()] = v
        return out
    raise SpecError.one("job.env", "must be a mapping or a list of KEY=VALUE")


def spec_from_tuxiv(doc: Any, default_name: str = "tacc-task") -> TaskSpec:
    if not isinstance(doc, dict):
        raise SpecError.one("", "tuxiv.conf must be a mapping with entrypoint, environment, job, datasets")
    unknown = sorted(set(map(str, doc)) - TOP_KEYS)
    if unknown:
        raise SpecError.one(unknown[0], f"unknown tuxiv.conf section (known: {', '.join(sorted(TOP_KEYS))})")
    job = doc.get("job") or {}
    if not isinstance(job, dict):
        raise SpecError.one("job", "must be a mapping with name, general, module, env, log")
    bad = sorted(set(map(str, job)) - JOB_KEYS)
    if bad:
        raise SpecError.one(f"job.{bad[0]}", f"unknown job field (known: {', '.join(sorted(JOB_KEYS))})")

    data: dict[str, Any] = {
        "name": job.get("name") or default_name,
        "code": doc.get("code", {"kind": "local", "path": "."}),
        "entrypoint": {"shell": _list_of_str(doc.get("entrypoint"), "entrypoint")},
        "datasets": _list_of_str(doc.get("datasets"), "datasets"),
    }
    for key in ("runtime", "outputs", "qos", "network"):
        if key in doc:
            data[key] = doc[key]
    env: dict[str, Any] = {"variables": _env(job.get("env")), "modules": _list_of_str(job.get("module"), "job.module")}
    conda = doc.get("environment")
    if conda is not None:
        if not isinstance(conda, dict):
            raise SpecError.one("environment", "must be a mapping with name, channels, dependencies")
        env["conda"] = {
            **({"name": conda["name"]} if conda.get("name") else {}),
            "channels": _list_of_str(conda.get("channels"), "environment.channels"),
            "dependencies": _list_of_str(conda.get("dependencies"), "environment.dependencies"),
        }
        extra = sorted(set(map(str, conda)) - {"name", "channels", "dependencies"})
        if extra:
            raise SpecError.one(f"environment.{extra[0]}", "unknown field (known: name, channels, dependencies)")
    data["environment"] = env
    if job.get("log") is not None:
        try:
            data["log_file"] = _workdir_path("log", str(job["log"]))
        except ValueError as exc:
            raise SpecError.one("job.log", str(exc)) from None

    for dotted, value in parse_sbatch(job.get("general")).items():
        target = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = value
    return spec_from_data(data)


def load_tuxiv(text: str | bytes, source: str = "tuxiv.conf", default_name: str = "tacc-task") -> TaskSpec:
    return spec_from_tuxiv(load_yaml(text, source), default_name)
