"""The trace data shipped inside the package, and ``open_text``, which reads it plain or gzipped.

``data/philly.csv.gz`` is the Philly trace and ``data/placements/*.csv.gz`` the measured placement step
times (``data/README.md``: what they hold, where they come from, their licences). They live in the
package, not beside the checkout, so a clone, a wheel and the benchmarks all replay the same files.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import TextIO

DATA = Path(__file__).resolve().parent / "data"
PHILLY_TRACE = DATA / "philly.csv.gz"  # tacc-hub simulate's default --trace
PLACEMENTS = DATA / "placements"  # tacc-hub simulate's default --placements

_GZIP_MAGIC = b"\x1f\x8b"


def open_text(path: str | Path) -> TextIO:
    """``path`` opened for ``csv``: decompressed when it is gzip (by its first bytes, whatever its name)."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == _GZIP_MAGIC
    if gz:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, newline="", encoding="utf-8")


def is_csv(path: Path) -> bool:
    """A CSV file by its name, plain or gzipped (``x.csv``, ``x.csv.gz``)."""
    return path.is_file() and path.name.endswith((".csv", ".csv.gz"))
