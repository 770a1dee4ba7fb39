"""The scheduler suite's workloads: the synthetic generator does what its parameters say, deterministically;
Philly virtual clusters are sized for 90% mean GPU demand; time limits reach the policies; the suite's
benchmark runs end to end on cut-down workloads and prints tacc's targets."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any

import pytest

from tacc_hub.scheduler.policies import make
from tacc_hub.scheduler.policy import View
from tacc_hub.scheduler.sim import Job, simulate
from tacc_hub.scheduler.sim.synth import LimitedJob, SynthParams, generate
from tacc_hub.scheduler.sim.workloads import (
    NAMES,
    SYNTH,
    UserLimits,
    mean_demand,
    replay,
    size_cluster,
    suite,
    workload,
)

ROOT = Path(__file__).resolve().parents[2]


def test_generator_is_deterministic_for_a_seed():
    p = SynthParams(jobs=500, multi_node=0.3, limit_factor=(2.0, 10.0), seed=7)
    assert generate(p) == generate(p)
    other = generate(SynthParams(jobs=500, multi_node=0.3, limit_factor=(2.0, 10.0), seed=8))
    assert other != generate(p)


def test_jobs_come_out_as_the_trace_loader_gives_them():
    jobs = generate(SynthParams(jobs=300, seed=3))
    assert [j.id for j in jobs] == list(range(300))
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    assert jobs[0].submit == 0.0
    assert all(j.duration >= 60.0 and j.gpus in (1, 2, 4, 8, 16, 32) for j in jobs)


@pytest.mark.parametrize("share", [0.0, 0.1, 0.4])
def test_share_of_multi_node_jobs(share):
    jobs = generate(SynthParams(jobs=4000, multi_node=share, seed=5))
    got = sum(j.gpus > 8 for j in jobs) / len(jobs)
    assert abs(got - share) < 0.03
    if share == 0.0:
        assert got == 0.0


@pytest.mark.parametrize("tenants", [1, 8, 40])
def test_number_of_tenants(tenants):
    jobs = generate(SynthParams(jobs=4000, tenants=tenants, seed=6))
    assert len({j.tenant for j in jobs}) == tenants


def test_time_limits_are_2_to_10x_the_true_durations():
    jobs = generate(SynthParams(jobs=2000, limit_factor=(2.0, 10.0), seed=9))
    factors = [j.time_limit / j.duration for j in jobs if j.time_limit is not None]
    assert len(factors) == len(jobs)
    assert all(2.0 - 1e-9 <= f <= 10.0 + 1e-9 for f in factors)
    assert min(factors) < 2.2 and max(factors) > 9.0  # the whole range, not one value
    assert all(j.time_limit is None for j in generate(SynthParams(jobs=200, seed=9)))


def test_load_and_burstiness():
    p = SynthParams(jobs=4000, nodes=16, load=0.9, seed=4)
    assert mean_demand(generate(p)) == pytest.approx(0.9 * 16 * 8)

    def cv(burst: float) -> float:
        jobs = generate(SynthParams(jobs=4000, burstiness=burst, seed=4))
        gaps = [b.submit - a.submit for a, b in pairwise(jobs)]
        return pstdev(gaps) / fmean(gaps)

    assert cv(1.0) == pytest.approx(1.0, abs=0.1)  # Poisson arrivals
    assert cv(4.0) > 2.5  # bursts and lulls


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        generate(SynthParams(jobs=0))
    with pytest.raises(ValueError):
        generate(SynthParams(multi_node=1.5))
    with pytest.raises(ValueError):
        generate(SynthParams(nodes=2, multi_node=0.1))  # a 32-GPU job would never fit


def _steady(gpus: int, n: int = 100) -> list[Job]:
    """``n`` jobs an hour apart, each of ``gpus`` GPUs for (n-1)/n hours: mean demand exactly ``gpus``."""
    return [Job(i, i * 3600.0, 3600.0 * (n - 1) / n, gpus, "a") for i in range(n)]


def test_vc_sizing_gives_90_percent_mean_demand():
    assert mean_demand(_steady(72)) == pytest.approx(72)
    c = size_cluster(_steady(72))
    assert (c.nodes, c.gpus_per_node) == (10, 8)  # 72 GPUs of demand on 80: 90%
    assert 2 <= c.nodes_per_switch <= 4
    for demand in (5, 13, 38, 100, 300):
        c = size_cluster(_steady(demand))
        # the closest node count to 90%: one more or one fewer is no closer
        best = min(range(1, 100), key=lambda n: abs(mean_demand(_steady(demand)) / (8 * n) - 0.9))
        assert c.nodes == best
        assert 2 <= c.nodes_per_switch <= 4


def test_philly_vc_workload_is_sized_for_90_percent():
    w = workload("philly-ee9e8c")
    assert len(w.jobs) >= 300 and {j.tenant for j in w.jobs} == {"ee9e8c"}
    assert w.cluster.gpus_per_node == 8 and 2 <= w.cluster.nodes_per_switch <= 4
    assert mean_demand(w.jobs) / w.cluster.gpus == pytest.approx(0.9, abs=8 * 0.9 / 2 / w.cluster.gpus)
    assert w.params["demand/capacity"] == pytest.approx(mean_demand(w.jobs) / w.cluster.gpus, abs=1e-3)


def test_suite_names_and_quick_cut():
    assert NAMES[-len(SYNTH):] == tuple(SYNTH) and "philly-all" in NAMES
    assert any(p.limit_factor for p in SYNTH.values()) and any(p.limit_factor is None for p in SYNTH.values())
    (w,) = suite(["synth-limits"], quick=True)
    assert len(w.jobs) == 300 and w.cluster.nodes == 4
    assert w.params["limit_factor"] == (2.0, 10.0) and "tail" in w.params and "burstiness" in w.params


class _Spy:
    """fifo, recording every task view it is shown."""

    def __init__(self) -> None:
        self.inner: Any = make("fifo")
        self.name, self.preemptive, self.oracle = "spy", self.inner.preemptive, False
        self.seen: dict[int, tuple[float | None, float]] = {}

    def schedule(self, view: View) -> Any:
        for t in (*view.waiting.values(), *view.running.values()):
            self.seen[t.id] = (t.time_limit, t.predicted)
        return self.inner.schedule(view)


def test_time_limits_reach_the_policy():
    jobs = generate(SynthParams(jobs=300, nodes=4, nodes_per_switch=2, limit_factor=(2.0, 10.0), seed=2))
    w = suite(["synth-limits"], quick=True)[0]
    limits = {j.id: j.time_limit for j in jobs if isinstance(j, LimitedJob) and j.time_limit is not None}
    spy = _Spy()
    r = simulate(jobs, w.cluster, UserLimits(spy, limits))
    assert len(r.records) == 300 and set(spy.seen) == set(limits)
    for jid, (limit, predicted) in spy.seen.items():
        assert limit == limits[jid] and predicted <= limit
    # the same decisions as the policy alone gives when no job carries a limit
    plain = generate(SynthParams(jobs=300, nodes=4, nodes_per_switch=2, seed=2))
    a = simulate(plain, w.cluster, make("tacc"))
    b = simulate(plain, w.cluster, UserLimits(make("tacc"), {}))
    assert [(x.id, x.first_start, x.finish) for x in a.records] == [(x.id, x.first_start, x.finish) for x in b.records]
    assert replay(w, "fifo").metrics.jobs == 300


def test_suite_benchmark_quick_run_prints_the_targets(tmp_path):
    out = tmp_path / "suite.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_scheduler_suite.py"), "--quick",
                        "--workloads", "synth-limits", "--workers", "1", "--json", str(out)],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "== synth-limits: 300 jobs on 4 x 8 GPUs" in text and "limit_factor=(2.0, 10.0)" in text
    for policy in ("fifo", "slurm", "tiresias", "srpt-oracle", "tacc"):
        assert f"\n{policy} " in text
    for what in ("tacc avg JCT <= 0.85x tiresias", "tacc p99 JCT <= 1.0x tiresias",
                 "no tenant's median slowdown worse than under fifo", "tacc avg JCT <= 2.0x srpt-oracle"):
        assert f"PASS  {what}" in text or f"MISS  {what}" in text
        assert any(line.endswith(what) or f"{what};" in line for line in text.splitlines() if "/1 PASS" in line)
    assert "scheduler: " in text
    data = json.loads(out.read_text())
    rep = data["workloads"]["synth-limits"]
    assert set(rep["replays"]) == {"fifo", "slurm", "tiresias", "srpt-oracle", "tacc"}
    assert set(rep["targets"]) == {"avg_vs_tiresias", "p99_vs_tiresias", "tenants_vs_fifo", "avg_vs_oracle"}
    assert all(r["jobs"] == 300 and math.isfinite(r["avg_jct"]) for r in rep["replays"].values())


def test_ablation_benchmark_quick_run_prints_variants_and_summary(tmp_path):
    out = tmp_path / "ablation.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_scheduler_ablation.py"), "--quick",
                        "--workloads", "synth-limits", "--variants", "default,no-probes,always-spread,no-take-back",
                        "--workers", "1", "--json", str(out)],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "== synth-limits (baselines, h: tiresias avg" in text and "== summary over 1 workload(s)" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and len(line.split()) > 8}
    for v in ("default", "no-probes", "always-spread", "no-take-back"):
        assert v in rows
    data = json.loads(out.read_text())["workloads"]["synth-limits"]
    assert data["default"]["avg_vs_default"] == 1.0
    assert set(data["default"]["targets"]) == {"avg_vs_tiresias", "p99_vs_tiresias", "tenants_vs_fifo", "avg_vs_oracle"}
