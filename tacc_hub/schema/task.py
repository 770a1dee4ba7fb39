"""The task specification: everything that determines one run, and nothing else.

Invariants:
- Models are frozen and reject unknown fields; no I/O happens here.
- Every string that can reach a script is constrained (see ``fields``) and is
  quoted by whoever renders it; nothing here is shell-safe by itself.
- ``TaskSpec.digest`` (see ``digest``) covers every field.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PackagingRequirement
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

# The rule for environment.variables lives in envnames; the reserved names stay importable from here.
from .envnames import RESERVED_ENV_NAMES as RESERVED_ENV_NAMES
from .envnames import RESERVED_ENV_PREFIXES as RESERVED_ENV_PREFIXES
from .envnames import user_env_name
from .fields import (
    DurationS,
    EnvName,
    MemoryMiB,
    ModuleName,
    Name,
    RelPath,
    RuntimeName,
    SafeText,
    Sha256,
    WholeNumber,
    _rel_path,
)
from .gitpatch import check_patch
from .groups import ArrayElement, ArraySpec, Dependency, TaskInput

SCHEMA_VERSION = 1

class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- code ---------------------------------------------------------------------


class LocalCode(Model):
    """A directory on the submitting machine; the client snapshots it before submit."""

    kind: Literal["local"] = "local"
    path: str = Field(".", max_length=4096, description="Directory to snapshot, relative to the spec file.")


class SnapshotCode(Model):
    """A content-addressed snapshot (deterministic tar.gz) already uploaded to the service."""

    kind: Literal["snapshot"] = "snapshot"
    digest: Sha256 = Field(description="sha256 of the snapshot archive.")
    size: WholeNumber = Field(0, ge=0, le=2**40, description="Archive size in bytes, as the client measured it.")


# Matched with fullmatch (a "$" would let a trailing newline through).
_GIT_URL_RE = re.compile(r"(https://|http://|ssh://|git://|file://|[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:)[^\s]+")


class GitCode(Model):
    """A git repository at an exact commit, with an optional patch of uncommitted changes."""

    kind: Literal["git"] = "git"
    url: str = Field(max_length=2048, description="Clone URL (https, ssh, git or file).")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="Commit hash; branches are not reproducible.")
    patch: str | None = Field(
        None, max_length=8 * 1024 * 1024, description="Output of `git diff HEAD`, applied after checkout."
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v.startswith("-") or not _GIT_URL_RE.fullmatch(v) or "\x00" in v:
            raise ValueError("must be a git URL (https://, ssh://, git://, file:// or user@host:path)")
        return v

    @field_validator("patch")
    @classmethod
    def _patch(cls, v: str | None) -> str | None:
        """Paths that leave the tree are refused here, at submit, not at launch by ``git apply``."""
        return None if v is None else check_patch(v)


Code = Annotated[LocalCode | SnapshotCode | GitCode, Field(discriminator="kind")]


# --- what to run ----------------------------------------------------------------


class Entrypoint(Model):
    """Exactly one of ``argv`` (an exact argument vector) or ``shell`` (bash lines)."""

    argv: list[SafeText] | None = Field(None, min_length=1, max_length=4096)
    shell: list[SafeText] | None = Field(None, min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _one(self) -> Entrypoint:
        if (self.argv is None) == (self.shell is None):
            raise ValueError("give exactly one of entrypoint.argv or entrypoint.shell")
        return self


class CondaSpec(Model):
    """A conda environment as SING/TACC writes it."""

    name: Name | None = None
    channels: list[Name] = Field(default_factory=list, max_length=64)
    dependencies: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-=<>!*,+]{0,199}$")]] = Field(
        default_factory=list, max_length=1024
    )


_PIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*===?\s*[A-Za-z0-9.+!_-]+(\s*;.*)?$")
_DIRECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*@\s*https?://\S+$")
# pip and uv install an argument ending like an archive from the disk when such a file exists
# (``foo==1.0+local.whl``): a version never ends so.
_ARCHIVE_ENDINGS = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz",
                    ".tar.lz", ".tar.lzma")
_LOCAL_HELP = ("pip would install it from the disk of the machine that builds the environment; publish the package "
               "to an index (or a pinned https:// URL), or put its code in the task's code")


def _local_source(text: str) -> str | None:
    """Why ``text`` names something on a local disk (a path, a file: URL, an editable install), or None."""
    low = text.lower()
    if low.startswith(("-e", "--editable")):
        return "editable installs (-e) are not allowed (they install from a local checkout)"
    head = low.split(";", 1)[0].strip()
    if "file:" in low or head.startswith((".", "/", "~", "\\")) or re.match(r"[a-z]:[\\/]", head):
        return "local paths and file:// URLs are not allowed"
    if "@" in head:
        url = head.split("@", 1)[1].strip()
        if not url.startswith(("https://", "http://")):
            return "local paths and file:// URLs are not allowed (a direct reference must be an https:// URL)"
    elif "/" in head or "\\" in head or head.endswith(_ARCHIVE_ENDINGS):
        return "local paths and file:// URLs are not allowed"
    return None


def _pinned(req: str) -> str:
    """One pip requirement: NAME==VERSION (markers allowed) or NAME @ https://URL; nothing from a local disk.

    Refused, with the entry named: pip options (``--index-url``, ``-e``), non-printable characters
    (pip splits requirement files with ``str.splitlines``), unpinned names, and every local source:
    ``file:`` URLs (also inside ``x @ file:...``), paths (``./x``, ``../x``, ``/x``, ``~/x``,
    ``dir/x``, ``C:\\x``), archive names (``x.whl``, ``x.tar.gz``) and editable installs.
    ``NAME @ https://...`` stays allowed: it builds an sdist, as any index package may, and
    environments are built as the task's own account with the task's environment.
    """
    text = req.strip()
    local = _local_source(text)
    if local is not None:
        raise ValueError(f"{local}: {req[:80]!r}; {_LOCAL_HELP}")
    if text.startswith("-"):
        raise ValueError(f"{req[:80]!r}: pip options are not allowed in requirements")
    # Not only "\n": pip splits requirement files with str.splitlines ("\r", "\x85",
    # "\u2028", ...), so any non-printable character could start a line of pip options.
    if not text.isprintable():
        raise ValueError(f"{req[:80]!r}: one requirement per entry, printable characters only")
    if not (_PIN_RE.match(text) or _DIRECT_RE.match(text)):
        raise ValueError(f"{req[:80]!r} is not pinned; write NAME==VERSION so the run is reproducible")
    try:  # the whole entry as PEP 508 says (a version PEP 440 knows, a marker that parses), as pip reads it
        PackagingRequirement(text)
    except InvalidRequirement as exc:
        detail = str(exc).splitlines()[0][:120]
        raise ValueError(f"{req[:80]!r} is not a valid requirement: {detail}") from None
    return text


# Checked per entry, so that errors name the entry (``environment.requirements[2]``,
# ``environment.variables.CUDA_VISIBLE_DEVICES``), not the whole list.
Requirement = Annotated[str, Field(max_length=1024), AfterValidator(_pinned)]
UserEnvName = Annotated[EnvName, AfterValidator(user_env_name)]


class Environment(Model):
    """Software the task needs: Python, pinned pip packages, conda, variables, modules."""

    python: str | None = Field(None, pattern=r"^3\.[0-9]{1,2}$", description="Python major.minor, e.g. 3.11.")
    requirements: list[Requirement] = Field(default_factory=list, max_length=2048)
    conda: CondaSpec | None = None
    variables: dict[UserEnvName, SafeText] = Field(
        default_factory=dict, max_length=1024,
        description="Variables exported before anything of the task runs. Any name [A-Za-z_][A-Za-z0-9_]* "
                    "except those tacc_hub sets (TACC_*, SLURM_*, PET_*, PATH, HOME, USER, VIRTUAL_ENV, "
                    "CUDA_VISIBLE_DEVICES, LD_PRELOAD, PYTHONPATH, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, "
                    "LOCAL_RANK, NODE_RANK) and those that change how programs start, since tacc_hub's own launch "
                    "steps run with them: LD_* (LD_LIBRARY_PATH is allowed), DYLD_*, BASH*, ENV, SHELLOPTS, IFS, "
                    "PS4, PROMPT_COMMAND, CDPATH, GLOBIGNORE, EXECIGNORE, POSIXLY_CORRECT, FUNCNEST, PYTHON* "
                    "(tuning ones such as PYTHONUNBUFFERED, PYTHONHASHSEED, PYTHONFAULTHANDLER, PYTHONWARNINGS "
                    "are allowed), GCONV_PATH, GETCONF_DIR, GLIBC_TUNABLES, HOSTALIASES, LOCPATH, NLSPATH, "
                    "RESOLV_HOST_CONF, LUA_INIT*, LUA_PATH*, LUA_CPATH*. Set those inside a shell entrypoint "
                    "instead (export X=...; python train.py).",
    )
    modules: list[ModuleName] = Field(default_factory=list, max_length=256)

    @field_validator("variables")
    @classmethod
    def _sorted_variables(cls, v: dict[str, str]) -> dict[str, str]:
        return dict(sorted(v.items()))  # canonical order: the digest serializes fields as stored

    @model_validator(mode="after")
    def _one_manager(self) -> Environment:
        if self.conda is not None and self.requirements:
            raise ValueError("give pip requirements or a conda spec, not both (list pip packages under conda)")
        return self


# --- resources, network, QoS, runtime ---------------------------------------------


class Resources(Model):
    """Compute requested per node; totals are nodes x per-node values."""

    nodes: WholeNumber = Field(1, ge=1, le=1024)
    gpus_per_node: WholeNumber = Field(0, ge=0, le=16)
    gpu_type: Name | None = None
    tasks_per_node: WholeNumber = Field(1, ge=1, le=256, description="Processes per node (ranks).")
    cpus_per_task: WholeNumber = Field(1, ge=1, le=512)
    memory: MemoryMiB | None = Field(None, description="Memory per node in MiB; accepts 16G, 512M.")
    time_limit: DurationS = Field(3600, description="Wall-clock limit in seconds; accepts 90m, 2h, 1:00:00.")
    partition: Name | None = None

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class Network(Model):
    rdma: Literal["required", "preferred", "off"] = "preferred"
    same_switch: bool = False


RestartReason = Literal["failure", "node_failure", "preemption"]
RESTART_REASONS: tuple[RestartReason, ...] = ("failure", "node_failure", "preemption")
MAX_RESTARTS = 20
DEFAULT_WARN_BEFORE = 300


class QoS(Model):
    qos_class: Literal["interactive", "normal", "low"] = Field("normal", alias="class")
    preemptible: bool = False
    priority: WholeNumber = Field(0, ge=-100, le=100, description="Order among the owner's own tasks.")
    # Left out of the dump (and so of the digest) while False: specs written before it existed
    # keep their digests.
    requeue: bool = Field(
        False, exclude_if=lambda v: v is False,
        description="Put the task back in the queue when a node it runs on fails (Slurm NODE_FAIL); at most "
                    "`max_requeues` times, a service setting. It runs again from the start (or from its "
                    "checkpoint/, which is kept). Off: such a task fails, with the node named in its reason.",
    )

    # Retries and time warnings (issue 19); left out of the dump while at their defaults, as requeue.
    max_restarts: WholeNumber = Field(
        0, ge=0, le=MAX_RESTARTS, exclude_if=lambda v: v == 0,
        description="Start the task again, at most this many times, when its run ends for one of the reasons in "
                    "`restart_on`; it waits again in its place by age after a backoff (30 s, doubling, at most "
                    "10 min), keeps its checkpoint/ and appends to its log. Every run is listed (`tcloud show`).",
    )
    restart_on: list[RestartReason] = Field(
        default_factory=lambda: list(RESTART_REASONS), min_length=1, max_length=len(RESTART_REASONS),
        exclude_if=lambda v: list(v) == list(RESTART_REASONS),
        description="Which ends of a run count for `max_restarts`: failure (it exited with a non-zero status), "
                    "node_failure (a node under it failed), preemption (the cluster stopped it; a preemptible "
                    "task stopped by our scheduler always waits again and counts for nothing).",
    )
    warn_before: DurationS = Field(
        DEFAULT_WARN_BEFORE, exclude_if=lambda v: v == DEFAULT_WARN_BEFORE,
        description="Seconds before the time limit at which the task's main process gets SIGUSR1 (as Slurm's "
                    "--signal), so that it can checkpoint; accepts 5m. It sees its deadline as TACC_DEADLINE.",
    )

    @field_validator("restart_on")
    @classmethod
    def _unique_reasons(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("entries must be unique")
        return sorted(v)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# The name of a runtime plugin (entry-point group ``tacc_hub.runtimes``). Shipped: plain, torchrun,
# deepspeed, horovod, mpi, byteps; a site may install more, so the schema checks the form of the
# name only and the compiler refuses one that is not installed at the site.
RuntimeKind = RuntimeName
OptionValue = Annotated[str, Field(max_length=4096)] | int | Annotated[float, Field(allow_inf_nan=False)] | bool


class Runtime(Model):
    kind: RuntimeKind = "plain"
    options: dict[EnvName, OptionValue] = Field(default_factory=dict, max_length=64)

    @field_validator("options")
    @classmethod
    def _sorted_options(cls, v: dict[str, object]) -> dict[str, object]:
        return dict(sorted(v.items()))  # canonical order, as for environment.variables


# --- notifications, logs kept for the owner -----------------------------------------------

# local@domain, at most 254 characters; no spaces, quotes, commas, angle brackets or control
# characters, so an address can never carry a second recipient or a header into a mail.
_EMAIL_RE = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+")


def _email(value: str) -> str:
    if len(value) > 254 or not _EMAIL_RE.fullmatch(value):
        raise ValueError(f"{value[:80]!r} is not an e-mail address (name@example.org)")
    return value


NotifyEvent = Literal["start", "end", "fail", "preempt", "time_limit"]
NOTIFY_EVENTS: tuple[str, ...] = ("start", "end", "fail", "preempt", "time_limit")


class Notify(Model):
    """Whom to tell, and when, about the task (sbatch --mail-user / --mail-type)."""

    email: Annotated[str, AfterValidator(_email)] | None = Field(
        None, description="Address to notify; none: the owner's own address as the site knows it.",
    )
    events: list[NotifyEvent] = Field(
        default_factory=list, max_length=len(NOTIFY_EVENTS),
        description="When: start, end (any outcome), fail, preempt (stopped to make room, or requeued), "
                    "time_limit (nearing its time limit).",
    )

    @field_validator("events")
    @classmethod
    def _canonical_events(cls, v: list[str]) -> list[str]:
        return sorted(set(v), key=NOTIFY_EVENTS.index)  # one order, so the digest ignores how it was written


def _in_userdir(value: str) -> str:
    try:
        return _rel_path(value)
    except ValueError as exc:
        raise ValueError(str(exc).replace("the task's working directory", "your persistent directory")) from None


UserDirPath = Annotated[str, AfterValidator(_in_userdir)]


class TensorBoard(Model):
    """TensorBoard beside the task (issue 19): its log directory, relative to the task's work directory."""

    logdir: RelPath = Field(description="Event-file directory, relative to the task's working directory, e.g. runs.")


# --- the task ----------------------------------------------------------------------


class TaskSpec(Model):
    """One self-contained, reproducible task."""

    name: Name
    code: Code = Field(default_factory=LocalCode)
    entrypoint: Entrypoint
    workdir: RelPath = Field(".", description="Working directory, relative to the code root.")
    environment: Environment = Field(default_factory=Environment)
    resources: Resources = Field(default_factory=Resources)
    network: Network = Field(default_factory=Network)
    qos: QoS = Field(default_factory=QoS)
    runtime: Runtime = Field(default_factory=Runtime)
    datasets: list[Name] = Field(default_factory=list, max_length=64)
    outputs: list[RelPath] = Field(default_factory=list, max_length=256)
    log_file: RelPath | None = Field(None, description="Also keep the task's output at this path in the workdir.")
    # The fields below came later; each is left out of the dump (and so of the digest) while unset,
    # so specs written before them keep their digests.
    user_log_file: UserDirPath | None = Field(
        None, exclude_if=lambda v: v is None,
        description="Also write the task's output, as it runs, to this path in the owner's persistent "
                    "directory (TACC_USERDIR), e.g. logs/run-%j.log (%j: the task id); it must stay inside "
                    "that directory (no '..', no symbolic link out of it).",
    )
    notify: Notify | None = Field(
        None, exclude_if=lambda v: v is None,
        description="Notifications about this task (e-mail address and events; sbatch mail-type/mail-user map "
        "here): kept with the task; tacc_hub does not send them yet.",
    )
    account: Name | None = Field(
        None, exclude_if=lambda v: v is None,
        description="The group the task is accounted to (sbatch --account); must be the owner's own group, "
                    "checked at submit.",
    )

    ports: list[Annotated[WholeNumber, Field(ge=1024, le=65535)]] = Field(
        default_factory=list, max_length=16, exclude_if=lambda v: not v,
        description="TCP ports the task serves HTTP on (on its first node), shown as links; each is reachable, by "
                    "its owner and admins only, at /tasks/ID/proxy/PORT/ of the service. A port it opens without "
                    "declaring it is reachable too, once it listens.",
    )
    tensorboard: TensorBoard | None = Field(
        None, exclude_if=lambda v: v is None,
        description="Start TensorBoard beside the task, as its owner, reading this log directory; it is linked "
                    "from the task and reachable through the service's proxy.",
    )

    # Many tasks at once (issue 20; groups.py); each left out of the dump while unset.
    array: ArraySpec | None = Field(
        None, exclude_if=lambda v: v is None,
        description="Run this spec as an array of tasks: a range (0-15, 0-15:2, 1,3,8-10; '0-15%4' runs at most 4 "
                    "at once), a list of values, or a grid of parameters (the product); each element is a task of "
                    "its own, sees TACC_ARRAY_ID, TACC_ARRAY_INDEX, TACC_PARAM_<NAME> and params.json, and may use "
                    "{index} and {name} placeholders in entrypoint.argv.",
    )
    array_element: ArrayElement | None = Field(
        None, exclude_if=lambda v: v is None,
        description="Set by the service on each element of an array (index, size, parameters); not written by hand.",
    )
    depends_on: list[Dependency] = Field(
        default_factory=list, max_length=64, exclude_if=lambda v: not v,
        description="Start only after these of your tasks or arrays ended so (tuxiv dependency=afterok:ID); one "
                    "that can no longer be met cancels this task, naming it.",
    )
    inputs: list[TaskInput] = Field(
        default_factory=list, max_length=64, exclude_if=lambda v: not v,
        description="Files of an earlier task (a pipeline step's `from`, or a task id) copied into the work "
                    "directory before the task starts.",
    )

    @model_validator(mode="after")
    def _array_or_element(self) -> TaskSpec:
        if self.array is not None and self.array_element is not None:
            raise ValueError("array_element is set by the service on an array's elements; a spec gives array only")
        return self

    @field_validator("ports")
    @classmethod
    def _unique_ports(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("entries must be unique")
        return sorted(v)

    @field_validator("datasets", "outputs")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("entries must be unique")
        return v

    @property
    def digest(self) -> str:
        """sha256 of the canonical form (see ``digest``). Not cached: ``model_copy`` would carry a stale one."""
        from .digest import spec_digest

        return spec_digest(self)
