"""Constrained string and number types shared by the task schema.

Invariant: a value that passes one of these types is safe to place in a file
name, an environment variable name or a shell word *after quoting*; none of
them is ever trusted to be shell-safe unquoted.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

# Matched with ``re.fullmatch``: a ``$`` in ``re.match`` also accepts a trailing
# newline, which would let "name\n" through into scripts and file names.
NAME_RE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
ENV_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
MODULE_RE = r"[A-Za-z0-9][A-Za-z0-9._+/-]{0,127}"
SHA256_RE = r"[0-9a-f]{64}"
RUNTIME_RE = r"[a-z][a-z0-9_-]{0,63}"


def _matches(pattern: str, what: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a valid {what}")
        return value

    return AfterValidator(check)


# A short identifier: task names, dataset names, GPU types, partitions.
Name = Annotated[
    str, _matches(NAME_RE, "name (letters, digits, '.', '_', '-'; starts with a letter or digit; at most 64)")
]
EnvName = Annotated[str, _matches(ENV_NAME_RE, "variable name (letters, digits and '_', not starting with a digit)")]
ModuleName = Annotated[str, _matches(MODULE_RE, "module name (letters, digits, '.', '_', '+', '/', '-')")]
RuntimeName = Annotated[
    str,
    _matches(RUNTIME_RE, "runtime name (lowercase letters, digits, '_', '-'; at most 64)"),
    Field(description="A runtime plugin installed at the site.",
          examples=["plain", "torchrun", "deepspeed", "horovod", "mpi", "byteps"]),
]
Sha256 = Annotated[str, _matches(SHA256_RE, "sha256 digest (64 lowercase hex digits)")]
# Free text that ends up quoted in a script (an argument, an env value).
Text = Annotated[str, StringConstraints(max_length=65536)]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL bytes")
    return value


SafeText = Annotated[Text, AfterValidator(_no_nul)]


def _rel_path(value: str) -> str:
    """A path that stays inside the task's working directory."""
    if not value or "\x00" in value:
        raise ValueError("must be a non-empty path without NUL bytes")
    if len(value) > 4096:
        raise ValueError("path is longer than 4096 characters")
    if value.startswith(("/", "~")) or "\\" in value:
        raise ValueError(f"{value[:80]!r} must be relative to the task's working directory")
    norm = posixpath.normpath(value)
    if norm == ".." or norm.startswith("../"):
        raise ValueError(f"{value[:80]!r} leaves the task's working directory")
    if len(norm) > 1024:
        raise ValueError("path is longer than 1024 characters")
    return norm


RelPath = Annotated[str, AfterValidator(_rel_path)]

# --- numbers ------------------------------------------------------------------------------

_WHOLE_RE = re.compile(r"-?[0-9]{1,18}", re.ASCII)


def _not_bool(value: object) -> None:
    # pydantic's lax mode reads true as 1; YAML's ``yes``/``on`` are booleans too.
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, not {str(value).lower()}")


def whole_number(value: object) -> object:
    """An int, an integral float (4.0) or a string of ASCII digits ("4", "-3"); never a bool.

    Strings stay accepted (command-line overrides and hand-written files give "4"), but only plain
    ASCII digits: not "\\u0661\\u0666", " 4", "1_000", "4.0" or "+4", which pydantic's lax mode would read.
    """
    _not_bool(value)
    if isinstance(value, str):
        if not _WHOLE_RE.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a whole number (ASCII digits)")
        return int(value)
    return value


# An int field of the spec; ``Field(ge=..., le=...)`` beside it bounds it. The JSON schema stays {"type": "integer"}.
WholeNumber = Annotated[int, BeforeValidator(whole_number)]

# ASCII digits only, everywhere a number is read from text: ``\d`` and ``int()`` also accept
# Arabic-Indic and other Unicode digits ("\u0661\u0666G" would be 16G), and ``\s`` Unicode spaces.
_ASCII_SPACE = " \t"

# A unit letter is required before an optional "B"/"iB": "16B" is not 16 MiB.
_MEM_RE = re.compile(r"([0-9]{1,12})[ \t]*(?:([KMGT])(?:i?B)?)?", re.IGNORECASE | re.ASCII)
_MEM_KIB = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


def parse_memory_mib(value: object) -> object:
    """'16G' -> 16384; '512M' -> 512; '1536K' -> 2 (rounded up); a bare number is MiB (sbatch's default)."""
    _not_bool(value)
    if isinstance(value, str):
        m = _MEM_RE.fullmatch(value.strip(_ASCII_SPACE))
        if not m:
            raise ValueError(f"{value[:80]!r} is not a memory size such as 512M or 16G")
        kib = int(m.group(1)) * _MEM_KIB[(m.group(2) or "M").upper()]
        return -(-kib // 1024)
    return value


_TIME_RE = re.compile(r"(?:([0-9]{1,9})-)?([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?", re.ASCII)
_UNIT_RE = re.compile(r"([0-9]{1,9})[ \t]*([smhd])", re.ASCII)


def parse_duration_s(value: object) -> object:
    """Slurm time formats ('MM', 'MM:SS', 'HH:MM:SS', 'D-HH[:MM[:SS]]') or '90m', '2h', '1d'."""
    _not_bool(value)
    if not isinstance(value, str):
        return value
    text = value.strip(_ASCII_SPACE)
    u = _UNIT_RE.fullmatch(text)
    if u:
        return int(u.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[u.group(2)]
    m = _TIME_RE.fullmatch(text)
    if not m:
        raise ValueError(f"{value[:80]!r} is not a time limit such as 90m, 2h, 1:30:00 or 2-00:00:00")
    days, a, b, c = m.groups()
    nums = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:
        # D-HH, D-HH:MM, D-HH:MM:SS
        hh, mm, ss = [*nums, 0, 0][:3]
        return int(days) * 86400 + hh * 3600 + mm * 60 + ss
    if len(nums) == 1:
        return nums[0] * 60  # bare minutes, as sbatch
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 3600 + nums[1] * 60 + nums[2]


MemoryMiB = Annotated[int, BeforeValidator(parse_memory_mib), Field(ge=1, le=64 * 1024 * 1024)]
DurationS = Annotated[int, BeforeValidator(parse_duration_s), Field(ge=1, le=90 * 86400)]
