"""Slowdown of a spread placement, from measured step times (the Pollux placements data).

Each ``placements/*.csv`` or ``*.csv.gz`` (one model; ``bundled.PLACEMENTS``
ships them) gives ``step_time`` per ``placement`` (GPUs per node, one digit per
node: ``22`` = 2 nodes x 2 GPUs) and ``local_bsz``. For GPUs ``g`` spanning
``n`` nodes the ratio is ``step_time(placement) / step_time(packed)`` at the
same local batch size, averaged over batch sizes and over the placements of
that (g, n), then over the models. ``packed`` is the one-node placement of
``g`` GPUs; the measuring nodes had 4 GPUs, so for g > 4 the packed reference
is the 4-GPU one-node step time (weak scaling at a fixed local batch: one-node
step time grows only 1.0-1.6x from 1 to 4 GPUs in the data, so this slightly
overstates slowdowns).

``SlowdownTable.factor(gpus, nodes, min_nodes, switches)`` is how much longer a
job runs on ``nodes`` nodes than on its ``min_nodes`` (>= 1.0): the ratio of the
two table entries, with ``gpus`` clamped to the measured range and ``nodes`` to
the measured node counts for that size; times ``cross_switch`` when the
placement spans several switches (no measurement: 1.0 unless configured).

Invariants: factor(g, n, n, 1) == 1.0; factors are >= 1.0.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

from .bundled import is_csv, open_text


@dataclass
class SlowdownTable:
    ratios: dict[tuple[int, int], float]  # (gpus, nodes spanned) -> step time / packed step time
    cross_switch: float = 1.0
    _cache: dict[tuple[int, int, int, int], float] = field(default_factory=dict, repr=False)

    @classmethod
    def unit(cls) -> SlowdownTable:
        """No slowdown anywhere (for tests and what-ifs)."""
        return cls({})

    def _ratio(self, gpus: int, nodes: int) -> float:
        if not self.ratios:
            return 1.0
        sizes = sorted({g for g, _ in self.ratios})
        g = max((s for s in sizes if s <= gpus), default=sizes[0])
        spans = sorted(n for gg, n in self.ratios if gg == g)
        n = min(max(nodes, spans[0]), spans[-1])
        if nodes <= 1:
            return 1.0
        return self.ratios[(g, n)]

    def factor(self, gpus: int, nodes: int, min_nodes: int = 1, switches: int = 1) -> float:
        key = (gpus, nodes, min_nodes, switches)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        f = 1.0
        if nodes > min_nodes:
            f = max(1.0, self._ratio(gpus, nodes) / self._ratio(gpus, min_nodes))
        if switches > 1:
            f *= max(1.0, self.cross_switch)
        self._cache[key] = f
        return f


def derive(directory: str | Path, cross_switch: float = 1.0) -> SlowdownTable:
    """The table from every ``*.csv`` or ``*.csv.gz`` in ``directory`` (one file per model)."""
    per_model: dict[tuple[int, int], list[float]] = defaultdict(list)
    files = sorted(p for p in Path(directory).iterdir() if is_csv(p))
    if not files:
        raise ValueError(f"{directory}: no placement files")
    for path in files:
        step: dict[tuple[str, str], float] = {}
        with open_text(path) as fh:
            for row in csv.DictReader(fh):
                step[(row["placement"].strip(), row["local_bsz"].strip())] = float(row["step_time"])
        ratios: dict[tuple[int, int], list[float]] = defaultdict(list)
        for (placement, bsz), t in step.items():
            gpus, nodes = sum(int(c) for c in placement), len(placement)
            ref = step.get((str(min(gpus, 4)), bsz))  # one node: g GPUs, or 4 (the largest measured)
            if ref:
                ratios[(gpus, nodes)].append(t / ref)
        for k, v in ratios.items():
            per_model[k].append(fmean(v))
    table = {k: fmean(v) for k, v in per_model.items()}
    for (g, n) in list(table):
        if n == 1:
            table[(g, n)] = 1.0
    return SlowdownTable(table, cross_switch)
