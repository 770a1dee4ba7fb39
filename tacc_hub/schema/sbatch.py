"""sbatch long options (``job.general`` in a tuxiv.conf) mapped into the TaskSpec.

Each known option maps to its meaning (``SBATCH_OPTIONS``); one that would change
identity, paths or the scheduler's decisions behind our back is refused with what
to write instead (``UNSAFE_SBATCH``); any other is refused by name. Notes:
``gpus-per-task`` is GPUs per node = gpus-per-task x tasks per node; ``constraint``
is a GPU type (scheduled on, like ``gres=gpu:TYPE:N``); ``mail-type``/``mail-user``
become ``notify``; ``account`` is kept and checked against the owner's group at
submit; log paths under ``${TACC_USERDIR}`` go to ``user_log_file``; ``array=0-15%4`` is ``array``
(Slurm's syntax, ``%N`` = max_running); ``dependency=afterok:12:13,afterany:14,afternotok:15`` is
``depends_on`` on those tasks (succeeded, finished, failed): the IDs are tacc_hub task ids; to wait for
a whole array, write ``depends_on: [{array: ID}]`` (tacc.yaml, or a tuxiv.conf's ``depends_on``).

Invariant: pure; errors name the ``job.general[i]`` entry.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any

from .errors import SpecError
from .fields import parse_duration_s, parse_memory_mib

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
    "input": "tasks do not read standard input",
    "container": "not supported",
    "reservation": "placement is decided by the tacc_hub scheduler",
    "begin": "not supported",
    "prolog": "not allowed",
    "epilog": "not allowed",
    "propagate": "not allowed",
    "exclusive": "tacc_hub gives a task its GPUs alone but may place other tasks on a node's other GPUs; "
                 "to have whole nodes, ask for all of their GPUs (gres=gpu:N, N the GPUs of a node)",
}

# Matched with fullmatch: "$" would also accept a trailing newline.
_INT_RE = re.compile(r"[0-9]{1,7}", re.ASCII)
_GRES_RE = re.compile(r"gpu(?::([A-Za-z0-9][A-Za-z0-9._-]{0,63}))?:([0-9]{1,3})", re.ASCII)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Another option written into a value: "nodes=1 --wrap=...", "nodes=1\x00--wrap", "nodes=1;--wrap" (one entry
# is one option): -X or --X after a space or control character, --X after any other separator.
_SMUGGLED_RE = re.compile(r"(?:^|[\s\x00-\x1f])(--?[A-Za-z][A-Za-z0-9-]*)|[^A-Za-z0-9-](--[A-Za-z][A-Za-z0-9-]*)")
_WORKDIR_PREFIXES = ("${TACC_WORKDIR}/", "$TACC_WORKDIR/")
_USERDIR_PREFIXES = ("${TACC_USERDIR}/", "$TACC_USERDIR/")
_USERLOG_PREFIXES = ("${TACC_SLURM_USERLOG}/", "$TACC_SLURM_USERLOG/")
SLURM_USERLOG = "slurm_log"  # ${TACC_SLURM_USERLOG} is ${TACC_USERDIR}/slurm_log on TACC

# sbatch --mail-type -> notify.events. ALL is Slurm's BEGIN, END, FAIL, REQUEUE (and kinds we have not).
MAIL_TYPES: dict[str, tuple[str, ...]] = {
    "NONE": (),
    "BEGIN": ("start",),
    "END": ("end",),
    "FAIL": ("fail",),
    "REQUEUE": ("preempt",),
    "TIME_LIMIT": ("time_limit",),
    "TIME_LIMIT_90": ("time_limit",),
    "TIME_LIMIT_80": ("time_limit",),
    "TIME_LIMIT_50": ("time_limit",),
    "ALL": ("start", "end", "fail", "preempt"),
}


def _int(opt: str, value: str) -> int:
    if not _INT_RE.fullmatch(value):
        raise ValueError(f"{opt}={value[:80]!r}: expected a whole number")
    return int(value)


def _count(opt: str, value: str) -> int:
    n = _int(opt, value)
    if n < 1:
        raise ValueError(f"{opt}={value!r}: must be at least 1")
    return n


def _confined(opt: str, rest: str, where: str) -> str:
    norm = posixpath.normpath(rest) if rest else ""
    if not rest or norm in (".", "..") or norm.startswith(("../", "/")) or "\\" in rest or "\x00" in rest:
        raise ValueError(f"{opt}: {rest[:80]!r} must name a file inside {where} (no '..')")
    return norm


def log_target(opt: str, value: str) -> tuple[str, str]:
    """A log path as TACC writes it -> ``("log_file", path in the workdir)`` or ``("user_log_file", path)``."""
    for prefix in _WORKDIR_PREFIXES:
        if value.startswith(prefix):
            return "log_file", _confined(opt, value[len(prefix):], "${TACC_WORKDIR}")
    for prefix in _USERDIR_PREFIXES:
        if value.startswith(prefix):
            return "user_log_file", _confined(opt, value[len(prefix):], "${TACC_USERDIR}")
    for prefix in _USERLOG_PREFIXES:
        if value.startswith(prefix):
            return "user_log_file", SLURM_USERLOG + "/" + _confined(opt, value[len(prefix):], "${TACC_SLURM_USERLOG}")
    if value.startswith(("/", "~")) or value.startswith(("$TACC_", "${TACC_")):
        raise ValueError(
            f"{opt}={value[:80]!r}: write ${{TACC_USERDIR}}/PATH (your persistent directory, kept after the "
            "task), ${TACC_WORKDIR}/PATH or a relative path (in the task's working directory)"
        )
    return "log_file", value


def _name(opt: str, value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(f"{opt}={value!r}: use letters, digits, '.', '_' and '-' only (at most 64)")
    return value


def _set(path: str, conv: Callable[[str, str], Any]) -> Callable[[dict[str, Any], str, str], None]:
    def apply(acc: dict[str, Any], opt: str, value: str) -> None:
        acc[path] = conv(opt, value)

    return apply


def _gpu_type(acc: dict[str, Any], opt: str, kind: str) -> None:
    if acc.get("resources.gpu_type", kind) != kind:
        raise ValueError(f"{opt}: GPU type {kind!r} disagrees with {acc['resources.gpu_type']!r} given before")
    acc["resources.gpu_type"] = kind


def _gpus(acc: dict[str, Any], opt: str, key: str, count: int) -> None:
    for other in ("_gpus_per_task", "resources.gpus_per_node"):
        if other != key and other in acc:
            raise ValueError(f"{opt}: give the GPUs once (gres, gpus-per-node or gpus-per-task)")
    acc[key] = count


def _gres(acc: dict[str, Any], opt: str, value: str) -> None:
    m = _GRES_RE.fullmatch(value)
    if not m:
        raise ValueError(f"{opt}={value!r}: expected gpu:N or gpu:TYPE:N")
    if m.group(1):
        _gpu_type(acc, opt, m.group(1))
    _gpus(acc, opt, "resources.gpus_per_node", int(m.group(2)))


def _gpu_count(key: str) -> Callable[[dict[str, Any], str, str], None]:
    def apply(acc: dict[str, Any], opt: str, value: str) -> None:
        if ":" in value:
            kind, _, value = value.partition(":")
            _gpu_type(acc, opt, _name(opt, kind))
        _gpus(acc, opt, key, _int(opt, value))

    return apply


def _constraint(acc: dict[str, Any], opt: str, value: str) -> None:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{opt}={value[:80]!r}: only one GPU type can be asked for here (e.g. constraint=a100); "
            "node features and expressions (&, |, [...]) are not scheduled on"
        )
    _gpu_type(acc, opt, value)


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


def _log(acc: dict[str, Any], opt: str, value: str) -> None:
    key, path = log_target(opt, value)
    acc[key] = path


def _mail_type(acc: dict[str, Any], opt: str, value: str) -> None:
    events: list[str] = []
    for word in value.split(","):
        kind = word.strip().upper()
        if kind not in MAIL_TYPES:
            known = ", ".join(MAIL_TYPES)
            raise ValueError(f"{opt}: mail type {word.strip()[:40]!r} is not one tacc_hub tells of (known: {known})")
        events += [e for e in MAIL_TYPES[kind] if e not in events]
    acc["notify.events"] = events


def _mail_user(acc: dict[str, Any], opt: str, value: str) -> None:
    acc["notify.email"] = value  # checked by the schema (notify.email)


def _array(acc: dict[str, Any], opt: str, value: str) -> None:
    """``array=0-15%4``: checked here (so the error names the entry), kept in the stored form."""
    from pydantic import ValidationError

    from .groups import ArraySpec

    try:
        spec = ArraySpec.model_validate(value)
    except ValidationError as exc:
        err = SpecError.from_validation(exc, "array", ArraySpec)
        msg = "; ".join(m if f in ("array", "array.range") else f"{f.removeprefix('array.')}: {m}"
                        for f, m in err.errors)
        raise ValueError(f"{opt}={value[:80]!r}: {msg}") from None
    acc["array"] = spec.model_dump(exclude_defaults=True)


# Slurm dependency type -> Dependency.when on a task.
DEPENDENCY_TYPES = {"afterok": "succeeded", "afterany": "finished", "afternotok": "failed"}
_UNSUPPORTED_DEPENDENCY = {
    "after": "starting when another task starts is not supported; use afterok or afterany",
    "aftercorr": "element-by-element array dependencies are not supported; wait for the whole array "
                 "(depends_on: [{array: ID}] in tacc.yaml)",
    "afterburstbuffer": "tacc_hub has no burst buffers; use afterany",
    "singleton": "one-at-a-time by job name is not supported; use afterany on the task before",
}
_DEP_ID_RE = re.compile(r"[1-9][0-9]{0,17}", re.ASCII)


def _dependency(acc: dict[str, Any], opt: str, value: str) -> None:
    """``afterok:12:13,afterany:14,afternotok:15`` -> depends_on (all must hold, as Slurm's ``,``)."""
    if "?" in value:
        raise ValueError(f"{opt}: '?' (any of) is not supported; every dependency must hold (join them with ',')")
    deps: list[dict[str, Any]] = list(acc.get("depends_on", []))
    for part in value.split(","):
        kind, _, ids = part.strip().partition(":")
        kind = kind.strip().lower()
        if kind in _UNSUPPORTED_DEPENDENCY:
            raise ValueError(f"{opt}: {kind} is not supported: {_UNSUPPORTED_DEPENDENCY[kind]}")
        if kind not in DEPENDENCY_TYPES:
            raise ValueError(f"{opt}: {kind[:40]!r} is not a dependency type tacc_hub knows (known: "
                             f"{', '.join(DEPENDENCY_TYPES)}; e.g. dependency=afterok:12:13)")
        if not ids:
            raise ValueError(f"{opt}: {kind} needs task ids ({kind}:ID[:ID...])")
        for tid in ids.split(":"):
            tid = tid.strip()
            if "_" in tid:
                raise ValueError(f"{opt}: {tid[:40]!r}: one element of an array cannot be named; name its task id, "
                                 "or wait for the whole array with depends_on: [{array: ID}] in tacc.yaml")
            if "+" in tid:
                raise ValueError(f"{opt}: {tid[:40]!r}: a delay (+minutes) is not supported")
            if not _DEP_ID_RE.fullmatch(tid):
                raise ValueError(f"{opt}: {tid[:40]!r} is not a task id")
            dep = {"task": int(tid), "when": DEPENDENCY_TYPES[kind]}
            if dep not in deps:
                deps.append(dep)
    acc["depends_on"] = deps


# sbatch long option -> how it maps into the schema.
SBATCH_OPTIONS: dict[str, Callable[[dict[str, Any], str, str], None]] = {
    "nodes": _set("resources.nodes", _count),
    "ntasks-per-node": _set("resources.tasks_per_node", _count),
    "ntasks": _ntasks,
    "cpus-per-task": _set("resources.cpus_per_task", _count),
    "gres": _gres,
    "gpus-per-node": _gpu_count("resources.gpus_per_node"),
    "gpus-per-task": _gpu_count("_gpus_per_task"),
    "constraint": _constraint,
    "mem": _mem,
    "time": _time,
    "partition": _set("resources.partition", _name),
    "account": _set("account", _name),
    "job-name": _set("name", _name),
    "output": _log,
    "error": _log,
    "qos": _qos,
    "mail-type": _mail_type,
    "mail-user": _mail_user,
    "requeue": _flag,
    "no-requeue": _flag,
    "array": _array,
    "dependency": _dependency,
}


def parse_sbatch_located(options: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The mapped options, and for each spec field the ``job.general[i]`` entry that set it."""
    if options is None:
        return {}, {}
    if not isinstance(options, list):
        raise SpecError.one("job.general", "must be a list of sbatch options such as nodes=2")
    acc: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for i, raw in enumerate(options):
        entry = f"job.general[{i}]"
        if not isinstance(raw, str):
            raise SpecError.one(entry, "must be a string such as nodes=2")
        text = raw.strip()
        text = text[2:] if text.startswith("--") else text
        key, _, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if key in UNSAFE_SBATCH:
            raise SpecError.one(entry, f"sbatch option '{key}' is not allowed: {UNSAFE_SBATCH[key]}")
        handler = SBATCH_OPTIONS.get(key)
        if handler is None:
            known = ", ".join(sorted(SBATCH_OPTIONS))
            raise SpecError.one(entry, f"unknown sbatch option '{key[:64]}' (known: {known})")
        smuggled = _SMUGGLED_RE.search(value)
        if smuggled:
            opt = smuggled.group(1) or smuggled.group(2)
            why = UNSAFE_SBATCH.get(opt.lstrip("-"))
            raise SpecError.one(
                entry,
                f"the value of '{key}' holds another option, {opt[:64]!r}: give one option per entry"
                + (f" ('{opt.lstrip('-')[:64]}' is not allowed: {why})" if why else ""),
            )
        before = dict(acc)
        try:
            handler(acc, key, value)
        except ValueError as exc:
            raise SpecError.one(entry, str(exc)) from None
        origin.update({k: entry for k, v in acc.items() if k not in before or before[k] != v})
    _tasks_and_gpus(acc, origin)
    if acc.get("notify.events") == [] and "notify.email" not in acc:  # mail-type=NONE alone: no notify at all
        del acc["notify.events"]
        origin.pop("notify.events", None)
    return acc, origin


def _tasks_and_gpus(acc: dict[str, Any], origin: dict[str, str]) -> None:
    """ntasks -> tasks per node; gpus-per-task -> GPUs per node (x tasks per node), in any option order."""
    if "_ntasks" in acc:
        ntasks = acc.pop("_ntasks")
        where = origin.pop("_ntasks")
        nodes = acc.get("resources.nodes", 1)
        if ntasks % nodes:
            raise SpecError.one(where, f"ntasks={ntasks} is not a multiple of nodes={nodes}")
        per_node = acc.setdefault("resources.tasks_per_node", ntasks // nodes)
        origin.setdefault("resources.tasks_per_node", where)
        if per_node * nodes != ntasks:
            raise SpecError.one(where, f"ntasks={ntasks} disagrees with nodes={nodes} x ntasks-per-node={per_node}")
    if "_gpus_per_task" in acc:
        per_task = acc.pop("_gpus_per_task")
        acc["resources.gpus_per_node"] = per_task * acc.get("resources.tasks_per_node", 1)
        origin["resources.gpus_per_node"] = origin.pop("_gpus_per_task")


def parse_sbatch(options: Any) -> dict[str, Any]:
    """``["nodes=2", "gres=gpu:2"]`` -> ``{"resources.nodes": 2, ...}``; errors name the entry."""
    return parse_sbatch_located(options)[0]
