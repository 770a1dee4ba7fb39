"""Synthetic workloads for the scheduler suite: seeded, deterministic job lists with stated parameters.

``generate(SynthParams(...))`` draws ``jobs`` jobs (``LimitedJob``: a ``Job`` plus the user's time
limit, or None) from ``random.Random(seed)`` only, so a seed gives the same jobs on every machine:
- sizes: a share ``multi_node`` of the jobs span 2 or 4 whole nodes (16 or 32 GPUs, 3:1), the rest
  take 1, 2, 4 or 8 GPUs (weights 50:20:15:15), as on a campus cluster;
- durations: log-normal around a per-tenant median (the tenants' medians spread log-uniformly over
  0.25-4x ``median_s``, so each tenant's history means something), ``tail`` its sigma (1.0 light,
  2.0 Philly-like heavy), clipped to 60 s .. 14 days;
- tenants: ``tenants`` of them, tenant k submitting with weight 1/(k+1) (a few big labs, many small);
- arrivals: gamma inter-arrival times with coefficient of variation ``burstiness`` (1: Poisson,
  4: bursts and lulls), scaled so the mean GPU demand (sum of GPUs x duration over the span of the
  submissions) is ``load`` of a cluster of ``nodes`` x 8 GPUs;
- time limits (``limit_factor`` (lo, hi), or None for none): each job's limit is its true duration
  times a factor drawn log-uniformly in [lo, hi] (2-10x: users ask for far more than they use).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass

from .trace import Job

GPUS_PER_NODE = 8
SMALL_SIZES = (1, 2, 4, 8)
SMALL_WEIGHTS = (50, 20, 15, 15)
MULTI_SIZES = (16, 32)
MULTI_WEIGHTS = (3, 1)
MIN_DURATION_S = 60.0
MAX_DURATION_S = 14 * 86400.0


@dataclass(frozen=True, slots=True)
class LimitedJob(Job):
    """A job with the time limit its user wrote (seconds; None: no limit given)."""

    time_limit: float | None = None


@dataclass(frozen=True, slots=True)
class SynthParams:
    """What a synthetic workload is made of (see the module docstring); printed with its results."""

    jobs: int = 4000
    nodes: int = 16  # the cluster the load is computed for: nodes x 8 GPUs
    nodes_per_switch: int = 4
    load: float = 0.9  # mean GPU demand / capacity
    multi_node: float = 0.1  # share of jobs over 8 GPUs
    burstiness: float = 1.0  # coefficient of variation of inter-arrival times
    tail: float = 1.5  # sigma of the log-normal durations
    median_s: float = 1800.0  # median duration (s) across tenants
    tenants: int = 8
    limit_factor: tuple[float, float] | None = None  # user time limit / true duration, log-uniform
    seed: int = 1

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _tenant_medians(rng: random.Random, p: SynthParams) -> list[float]:
    return [p.median_s * math.exp(rng.uniform(math.log(0.25), math.log(4.0))) for _ in range(p.tenants)]


def generate(p: SynthParams) -> list[LimitedJob]:
    """The jobs of ``p``, sorted by submit time, ids 0..n-1 in that order (as ``load_philly`` gives them)."""
    if p.jobs <= 0 or p.tenants <= 0 or p.nodes <= 0:
        raise ValueError("jobs, tenants and nodes must be positive")
    if not 0.0 <= p.multi_node <= 1.0 or p.load <= 0 or p.burstiness <= 0 or p.tail < 0:
        raise ValueError("multi_node in [0, 1]; load, burstiness > 0; tail >= 0")
    if p.multi_node > 0 and p.nodes * GPUS_PER_NODE < max(MULTI_SIZES):
        raise ValueError(f"multi-node jobs need at least {max(MULTI_SIZES) // GPUS_PER_NODE} nodes")
    rng = random.Random(p.seed)
    medians = _tenant_medians(rng, p)
    weights = [1.0 / (k + 1) for k in range(p.tenants)]
    names = [f"t{k:02d}" for k in range(p.tenants)]
    drawn: list[tuple[int, float, str, float | None]] = []
    for _ in range(p.jobs):
        k = rng.choices(range(p.tenants), weights)[0]
        if rng.random() < p.multi_node:
            gpus = rng.choices(MULTI_SIZES, MULTI_WEIGHTS)[0]
        else:
            gpus = rng.choices(SMALL_SIZES, SMALL_WEIGHTS)[0]
        dur = min(MAX_DURATION_S, max(MIN_DURATION_S, rng.lognormvariate(math.log(medians[k]), p.tail)))
        limit = None
        if p.limit_factor is not None:
            lo, hi = p.limit_factor
            limit = dur * math.exp(rng.uniform(math.log(lo), math.log(hi)))
        drawn.append((gpus, dur, names[k], limit))
    work = sum(g * d for g, d, _, _ in drawn)
    span = work / (p.load * p.nodes * GPUS_PER_NODE)  # seconds from the first to the last submission
    shape = 1.0 / (p.burstiness * p.burstiness)  # gamma with this shape has CV = burstiness
    gaps = [rng.gammavariate(shape, 1.0) for _ in range(p.jobs - 1)]
    scale = span / sum(gaps) if gaps and sum(gaps) > 0 else 0.0
    submit, jobs = 0.0, []
    for i, (gpus, dur, tenant, limit) in enumerate(drawn):
        if i:
            submit += gaps[i - 1] * scale
        jobs.append(LimitedJob(i, submit, dur, gpus, tenant, limit))
    return jobs
