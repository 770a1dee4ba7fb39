"""Trace loader, slowdown-table derivation, duration predictions, and the simulate CLI on small fixtures;
and the trace data shipped in the package (read gzipped, from inside the package: a clone needs nothing else)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tacc_hub
from tacc_hub.cli.admin import cli
from tacc_hub.scheduler.sim import PHILLY_TRACE, PLACEMENTS, Predictor, derive, load_philly, percentile

TRACE = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,8,23608.0,6214e9
2017-10-09 06:13:03,10.0,2,20.0,6214e9

2017-10-09 08:00:00,bad,1,1,6214e9
2017-10-09 09:00:00,5.0,64,320.0,6214e9
"""


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    p = tmp_path / "philly.csv"
    p.write_text(TRACE)
    return p


def test_loader_sorts_by_time_counts_bad_rows_and_filters(trace_file):
    t = load_philly(trace_file)
    assert [(j.id, j.submit, j.gpus, j.tenant) for j in t.jobs] == [
        (0, 0.0, 8, "6214e9"), (1, 0.0, 2, "6214e9"), (2, 2932.0, 1, "11cb48"), (3, 10017.0, 64, "6214e9"),
    ]
    assert t.jobs[0].duration == 2951.0 and t.skipped == 2
    assert [j.gpus for j in load_philly(trace_file, tenant="6214e9").jobs] == [8, 2, 64]
    assert len(load_philly(trace_file, limit=2).jobs) == 2


def test_loader_refuses_another_format(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="missing column"):
        load_philly(p)


def test_slowdown_table_from_two_models(tmp_path):
    (tmp_path / "m1.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n1,8,1.0,0\n2,8,1.0,0\n11,8,2.0,0\n4,8,1.0,0\n22,8,3.0,0\n"
        "1111,8,2.0,0\n44,8,4.0,0\n")
    (tmp_path / "m2.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n1,8,2.0,0\n2,8,2.0,0\n11,8,2.0,0\n4,8,2.0,0\n22,8,2.0,0\n"
        "1111,8,3.0,0\n44,8,2.0,0\n")
    table = derive(tmp_path)
    assert table.ratios[(2, 2)] == pytest.approx((2.0 + 1.0) / 2)
    assert table.ratios[(4, 2)] == pytest.approx((3.0 + 1.0) / 2)
    assert table.ratios[(4, 4)] == pytest.approx((2.0 + 1.5) / 2)
    assert table.ratios[(8, 2)] == pytest.approx((4.0 + 1.0) / 2)  # vs the 4-GPU one-node step time
    assert table.factor(4, 2, 1) == pytest.approx(2.0)
    assert table.factor(4, 1, 1) == 1.0 and table.factor(8, 2, 2) == 1.0
    assert table.factor(64, 16, 8) >= 1.0  # clamped to what was measured


def test_loader_reads_a_gzipped_trace_whatever_its_name(trace_file, tmp_path):
    want = load_philly(trace_file)
    for name in ("philly.csv.gz", "philly.csv"):  # gzip is known by its first bytes, not its name
        p = tmp_path / "gz" / name
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(gzip.compress(trace_file.read_bytes()))
        assert load_philly(p) == want


def test_the_shipped_data_lies_inside_the_package():
    package = Path(tacc_hub.__file__).resolve().parent
    assert PHILLY_TRACE.is_relative_to(package) and PLACEMENTS.is_relative_to(package)
    assert PHILLY_TRACE.name == "philly.csv.gz" and PHILLY_TRACE.read_bytes()[:2] == b"\x1f\x8b"
    assert sorted(p.name for p in PLACEMENTS.iterdir()) == [
        f"{m}.csv.gz" for m in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")]
    assert (PHILLY_TRACE.parent / "README.md").is_file()  # source and licence


def test_the_shipped_trace_is_the_whole_philly_trace():
    t = load_philly(PHILLY_TRACE)  # the facts its README gives
    assert len(t.jobs) == 82_247 and t.skipped == 1  # 82,248 rows, one malformed
    assert len({j.tenant for j in t.jobs}) == 15
    assert sum(j.tenant == "6214e9" for j in t.jobs) == 41_226
    assert round(sum(j.gpus == 1 for j in t.jobs) / len(t.jobs), 2) == 0.93


def test_slowdown_table_from_the_shipped_data(tmp_path):
    table = derive(PLACEMENTS)
    assert set(table.ratios) >= {(2, 2), (4, 2), (4, 4), (8, 2), (16, 4)}
    assert all(v >= 1.0 for v in table.ratios.values())
    assert 1.0 < table.factor(4, 2, 1) < 3.7
    for p in PLACEMENTS.iterdir():  # the same table from the plain CSVs
        (tmp_path / p.name.removesuffix(".gz")).write_bytes(gzip.decompress(p.read_bytes()))
    assert derive(tmp_path).ratios == table.ratios


def test_predictor_blends_a_running_median_with_the_default():
    p = Predictor(default=100.0, weight=1.0)
    assert p.predict("a") == 100.0
    for d in (10.0, 1000.0, 30.0):
        p.observe("a", d)
    assert p.predict("a") == pytest.approx((3 * 30.0 + 100.0) / 4)
    assert p.predict("b") == 100.0


def test_percentile_nearest_rank():
    assert percentile([], 99) == 0.0
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0


def test_simulate_cli_json(trace_file, tmp_path):
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(trace_file), "--nodes", "2", "--gpus-per-node", "8",
                                 "--policy", "fifo,tiresias", "--json", "--placements", str(tmp_path)])
    assert r.exit_code != 0  # tmp_path has no placement CSVs: refused, not silently ignored
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(trace_file), "--nodes", "2", "--gpus-per-node", "8",
                                 "--policy", "fifo,tiresias", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [o["policy"] for o in out] == ["fifo", "tiresias"]
    assert all(o["jobs"] == 3 and o["unschedulable"] == 1 for o in out)


def test_simulate_cli_table_and_bad_policy(trace_file):
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(trace_file), "--nodes", "1", "--policy", "slurm",
                                 "--tenant", "6214e9"])
    assert r.exit_code == 0, r.output
    assert "avg JCT" in r.stdout and "slurm" in r.stdout
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(trace_file), "--nodes", "1", "--policy", "nope"])
    assert r.exit_code != 0 and "unknown nope" in r.output


def test_simulate_cli_replays_the_shipped_trace_by_default():
    r = CliRunner().invoke(cli, ["simulate", "--nodes", "2", "--tenant", "6214e9", "--limit", "300", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["policy"] == "fifo" and out["jobs"] + out["unschedulable"] == 300
    assert "no placement data" not in r.output
