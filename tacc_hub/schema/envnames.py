"""Which environment variables a task may set (``environment.variables``, tuxiv ``job.env``).

The rule: a task may set any variable named ``[A-Za-z_][A-Za-z0-9_]*`` (at most 128 characters) except

(a) those tacc_hub sets for the run (``RESERVED_ENV_NAMES``, and every ``TACC_*``, ``SLURM_*``, ``PET_*``);
(b) those that change how a program starts before its own code runs: the variables are exported at the top
    of ``launch.sh`` (bash), so ``module load``, the environment's activation, the runtime's launcher
    (torchrun, mpirun, ...) and every process they start run with them. Refused:
    - the dynamic loader's ``LD_*`` (``LD_PRELOAD``, ``LD_AUDIT``, ...) and ``DYLD_*``; ``LD_LIBRARY_PATH``
      stays allowed: it is only a search path, and CUDA users need it;
    - bash's own variables (every name starting ``BASH``: ``BASH_ENV``, ``BASHOPTS``, ``BASH_FUNC_*``) and
      the shell's startup/parsing ones: ``ENV``, ``SHELLOPTS``, ``IFS``, ``PS4``, ``PROMPT_COMMAND``,
      ``CDPATH``, ``GLOBIGNORE``, ``EXECIGNORE``, ``POSIXLY_CORRECT``, ``FUNCNEST``;
    - Python's startup: every ``PYTHON*`` name except those that only tune a running interpreter
      (``PYTHON_TUNING``: ``PYTHONUNBUFFERED``, ``PYTHONHASHSEED``, ``PYTHONFAULTHANDLER``,
      ``PYTHONWARNINGS``, ...); an allowlist, so a new startup variable is refused until it is looked at;
    - glibc's loaders of files and code: ``GCONV_PATH``, ``GETCONF_DIR``, ``GLIBC_TUNABLES``,
      ``HOSTALIASES``, ``LOCPATH``, ``NLSPATH``, ``RESOLV_HOST_CONF`` (``MALLOC_*`` stays allowed: numeric
      allocator knobs such as ``MALLOC_ARENA_MAX``);
    - Lua's (Lmod runs ``module load`` in Lua): ``LUA_INIT*``, ``LUA_PATH*``, ``LUA_CPATH*``.

A task that needs one of (b) sets it inside its own command, after tacc_hub's steps:
``entrypoint.shell: ["export X=...; python train.py"]``.
"""

from __future__ import annotations

import re

ENV_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_ENV_NAME = re.compile(ENV_NAME_RE, re.ASCII)

# (a) Set by the system for every task.
RESERVED_ENV_PREFIXES = ("TACC_", "SLURM_", "PET_")
RESERVED_ENV_NAMES = frozenset(
    {"CUDA_VISIBLE_DEVICES", "PATH", "VIRTUAL_ENV", "HOME", "USER", "LD_PRELOAD", "PYTHONPATH",
     "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK"}
)

# (b) Change how programs start.
STARTUP_PREFIXES = ("LD_", "DYLD_", "BASH", "PYTHON", "LUA_INIT", "LUA_PATH", "LUA_CPATH")
STARTUP_NAMES = frozenset(
    {"ENV", "SHELLOPTS", "IFS", "PS4", "PROMPT_COMMAND", "CDPATH", "GLOBIGNORE", "EXECIGNORE", "POSIXLY_CORRECT",
     "FUNCNEST", "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCPATH", "NLSPATH",
     "RESOLV_HOST_CONF"}
)
STARTUP_ALLOWED = frozenset({"LD_LIBRARY_PATH"})
PYTHON_TUNING = frozenset(
    {"PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONFAULTHANDLER", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE",
     "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDEVMODE", "PYTHONTRACEMALLOC", "PYTHONASYNCIODEBUG",
     "PYTHONINTMAXSTRDIGITS", "PYTHONNODEBUGRANGES", "PYTHONPROFILEIMPORTTIME", "PYTHONCOERCECLOCALE",
     "PYTHONMALLOC", "PYTHONMALLOCSTATS", "PYTHONLEGACYWINDOWSSTDIO", "PYTHONLEGACYWINDOWSFSENCODING"}
)

RULE = ("a task may set variables named [A-Za-z_][A-Za-z0-9_]*, except those tacc_hub sets (TACC_*, SLURM_*, "
        "PET_*, PATH, CUDA_VISIBLE_DEVICES, ...) and those that change how programs start (LD_* but "
        "LD_LIBRARY_PATH, DYLD_*, BASH*, ENV, SHELLOPTS, IFS, PS4, PYTHON* but tuning ones such as "
        "PYTHONUNBUFFERED, GCONV_PATH, ...)")


def startup_variable(name: str) -> bool:
    """Whether ``name`` changes how a program (bash, the loader, Python, glibc, Lua) starts."""
    if name in STARTUP_ALLOWED or name in PYTHON_TUNING:
        return False
    return name in STARTUP_NAMES or name.startswith(STARTUP_PREFIXES)


def user_env_name(name: str) -> str:
    """``name`` if a task may set it (see the module docstring), else ``ValueError`` saying why and what instead."""
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a valid variable name (letters, digits and '_', not starting "
                         "with a digit; at most 128)")
    if name in RESERVED_ENV_NAMES or name.startswith(RESERVED_ENV_PREFIXES):
        raise ValueError(f"{name} is set by tacc_hub and cannot be overridden")
    if startup_variable(name):
        raise ValueError(
            f"{name} changes how programs start (tacc_hub's own launch steps would run with it), so a task "
            f"cannot set it here; set it inside a shell entrypoint instead: export {name}=...; python train.py"
        )
    return name
