"""The few task-schema rules the options form checks before anything reaches the service.

Copies of ``tacc_hub.schema.fields.parse_duration_s`` / ``parse_memory_mib`` and of the task
schema's ``Requirement`` check (``tacc_hub.schema.task._pinned``, at most 1024 characters), so
that this package needs neither tacc_hub nor pydantic in the hub's environment. The service
checks every spec again (a dry run when the form is posted, then the submit) and has the last
word; ``tests/unit/test_spawner.py`` checks that these copies decide as the schema does on the
same inputs (the words of a refusal may differ).
"""

from __future__ import annotations

import re

# A unit letter is required before an optional "B"/"iB": "16B" is not 16 MiB.
_MEM_RE = re.compile(r"(\d{1,12})\s*(?:([KMGT])(?:i?B)?)?", re.IGNORECASE)
_MEM_KIB = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}
_TIME_RE = re.compile(r"(?:(\d{1,9})-)?(\d{1,9})(?::(\d{1,9}))?(?::(\d{1,9}))?")
_UNIT_RE = re.compile(r"(\d{1,9})\s*([smhd])")
_PIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*===?\s*[A-Za-z0-9.+!_-]+(\s*;.*)?$")
_DIRECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*@\s*(https?|file)://\S+$")
# pip and uv install an argument ending like an archive from the disk when such a file exists
# (``foo==1.0+local.whl``): a version never ends so.
_ARCHIVE_ENDINGS = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz",
                    ".tar.lz", ".tar.lzma")
REQUIREMENT_MAX = 1024


def parse_memory_mib(value: object) -> object:
    """'16G' -> 16384; '512M' -> 512; '1536K' -> 2 (rounded up); a bare number is MiB (sbatch's default)."""
    if isinstance(value, str):
        m = _MEM_RE.fullmatch(value.strip())
        if not m:
            raise ValueError(f"{value[:80]!r} is not a memory size such as 512M or 16G")
        kib = int(m.group(1)) * _MEM_KIB[(m.group(2) or "M").upper()]
        return -(-kib // 1024)
    return value


def parse_duration_s(value: object) -> object:
    """Slurm time formats ('MM', 'MM:SS', 'HH:MM:SS', 'D-HH[:MM[:SS]]') or '90m', '2h', '1d'."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    u = _UNIT_RE.fullmatch(text)
    if u:
        return int(u.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[u.group(2)]
    m = _TIME_RE.fullmatch(text)
    if not m:
        raise ValueError(f"{value[:80]!r} is not a time limit such as 90m, 2h, 1:30:00 or 2-00:00:00")
    days, a, b, c = m.groups()
    nums = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:
        hh, mm, ss = [*nums, 0, 0][:3]
        return int(days) * 86400 + hh * 3600 + mm * 60 + ss
    if len(nums) == 1:
        return nums[0] * 60  # bare minutes, as sbatch
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 3600 + nums[1] * 60 + nums[2]


def check_pinned(req: str) -> str:
    """A requirement as the task schema takes one (``NAME==VERSION``, optional extras and marker, or ``NAME @ URL``),
    else ValueError with the schema's words. The form refuses direct references (``NAME @ URL``) on its own."""
    if len(req) > REQUIREMENT_MAX:
        raise ValueError(f"String should have at most {REQUIREMENT_MAX} characters")
    text = req.strip()
    if text.startswith("-"):
        raise ValueError(f"{req[:80]!r}: pip options are not allowed in requirements")
    # Not only "\n": pip splits requirement files with str.splitlines ("\r", "\x85",
    # "\u2028", ...), so any non-printable character could start a line of pip options.
    if not text.isprintable():
        raise ValueError(f"{req[:80]!r}: one requirement per entry, printable characters only")
    if not (_PIN_RE.match(text) or _DIRECT_RE.match(text)):
        raise ValueError(f"{req[:80]!r} is not pinned; write NAME==VERSION so the run is reproducible")
    if text.split(";", 1)[0].strip().lower().endswith(_ARCHIVE_ENDINGS):
        raise ValueError(f"{req[:80]!r} names an archive on a local disk; write NAME==VERSION")
    return text
