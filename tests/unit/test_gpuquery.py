"""gpuquery: the nvidia-smi CSV parser against hostile output, the bounded runs, the local and Slurm mappings."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tacc_hub.executors import gpuquery
from tacc_hub.executors.gpuquery import (
    MAX_OUTPUT,
    local_gpu_usage,
    parse_gpu_csv,
    parse_indices,
    parse_step_output,
    run_query,
    sampling_pass,
)
from tacc_hub.scheduler.cluster import NodeSlots, Placement

FAKE = str(Path(__file__).resolve().parents[1] / "fake_nvidia_smi.py")


def placement(*gpus: int) -> Placement:
    return Placement(nodes=[NodeSlots(node="n1", gpus=list(gpus))])


def test_parses_nvidia_smi_csv() -> None:
    text = b"0, 37, 1024\n1, 91, 40536\n2, 0, 0\n"
    assert parse_gpu_csv(text) == {0: (37.0, 1024.0), 1: (91.0, 40536.0), 2: (0.0, 0.0)}
    assert parse_gpu_csv(b"0, 12.5, [N/A]\r\n") == {0: (12.5, None)}  # memory not reported
    assert parse_gpu_csv(b"3, 40\n") == {3: (40.0, None)}  # the spawner's two-field query
    assert parse_gpu_csv(b"") == {}


@pytest.mark.parametrize("line", [
    b"0, [N/A], 5", b"0, nan, 5", b"0, NaN, 5", b"0, inf, 5", b"0, 1e999, 5", b"0, 1e2, 5", b"0, 0x10, 5",
    b"0, 1_0, 5", b"0, \xd9\xa3, 5", b"\xff\xfe0, 50, 10", b"0, 50\x00, 2", b"-1, 50, 5", b"01234567, 5, 5",
    b"0 ; 50 ; 5", b"0, 50, 5, 7", b"0", b"index, utilization.gpu [%], memory.used [MiB]", b", 50, 5",
    b"0, , 5", b"0, 9" + b"9" * 40 + b", 5", b"9999, 50, 5",
])
def test_hostile_lines_are_skipped(line: bytes) -> None:
    assert parse_gpu_csv(line + b"\n1, 20, 30\n") == {1: (20.0, 30.0)}, line


def test_values_are_clamped_and_bounded() -> None:
    assert parse_gpu_csv(b"0, -5, 10\n1, 250, 10\n") == {0: (0.0, 10.0), 1: (100.0, 10.0)}
    assert parse_gpu_csv(b"0, 50, -3\n1, 50, 99999999999\n") == {0: (50.0, None), 1: (50.0, None)}
    assert parse_gpu_csv(b"0, 10, 1\n0, 99, 1\n") == {0: (10.0, 1.0)}  # a repeated index: the first line wins


def test_huge_output_is_no_reading() -> None:
    assert parse_gpu_csv(b"0, 50, 1\n" + b"x" * MAX_OUTPUT) == {}
    assert parse_gpu_csv(b"0, 50, 1\n" + b"9" * 100000 + b"\n1, 5, 5\n") == {}


def test_cuda_visible_devices() -> None:
    assert parse_indices("0,1") == [0, 1]
    assert parse_indices(" 3 ") == [3]
    for bad in ("", "NoDevFiles", "GPU-5e3d-aa", "0,,1", "-1", "0;1"):
        assert parse_indices(bad) is None, bad


def test_step_output_is_mapped_by_the_steps_devices() -> None:
    csv = b"0, 10, 100\n1, 90, 900\n"
    assert parse_step_output(b"TACC_CVD=1\n" + csv, 1) == [(90.0, 900.0)]
    assert parse_step_output(b"TACC_CVD=0,1\n" + csv, 2) == [(10.0, 100.0), (90.0, 900.0)]
    assert parse_step_output(b"TACC_CVD=1,1,0\n" + csv, 2) == [(90.0, 900.0), (10.0, 100.0)]  # each once
    assert parse_step_output(b"TACC_CVD=0,1\n" + csv, 1) == [(10.0, 100.0)]  # never more than it holds
    assert parse_step_output(b"TACC_CVD=5\n" + csv, 1) == []  # no line for its device
    # Device cgroups and no usable variable: nvidia-smi sees the task's GPUs only, counted exactly
    assert parse_step_output(b"TACC_CVD=\n" + csv, 2) == [(10.0, 100.0), (90.0, 900.0)]
    assert parse_step_output(b"TACC_CVD=\n" + csv, 1) == []
    assert parse_step_output(csv, 2) == []  # no mark from our step script: not our output
    assert parse_step_output(b"TACC_CVD=\xff\n" + csv, 2) == [(10.0, 100.0), (90.0, 900.0)]


async def test_run_query_reads_the_output_of_a_command() -> None:
    res = await run_query([sys.executable, FAKE, "0=37,1000", "1=91,2000"])
    assert res.out is not None and parse_gpu_csv(res.out) == {0: (37.0, 1000.0), 1: (91.0, 2000.0)}


async def test_run_query_kills_a_command_that_hangs_with_its_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (f"import os, time\nif os.fork() == 0:\n    open({str(pids)!r} + '.child', 'w').write(str(os.getpid()))\n"
              f"    time.sleep(3600)\nopen({str(pids)!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)\n")
    res = await asyncio.wait_for(run_query([sys.executable, "-c", script], timeout=1.0), 60)
    assert res.out is None and "did not finish in 1 s" in res.why
    for path in (pids, Path(f"{pids}.child")):
        pid = int(path.read_text())
        await _gone(pid)


async def test_a_process_that_escapes_the_group_does_not_hold_the_read(tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped"
    script = (f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    open({str(pidfile)!r}, 'w').write("
              f"str(os.getpid()))\n    time.sleep(3600)\nprint('0, 50, 1', flush=True)\ntime.sleep(3600)\n")
    try:
        res = await asyncio.wait_for(run_query([sys.executable, "-c", script], timeout=1.0), 60)
        assert res.out is None
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


async def test_run_query_bounds_the_output_and_refuses_failures() -> None:
    flood = "import sys\nwhile True: sys.stdout.write('0, 1, 1\\n')"
    huge = await asyncio.wait_for(run_query([sys.executable, "-c", flood]), 60)
    assert huge.out is None and f"more than {MAX_OUTPUT} bytes" in huge.why
    failed = await run_query([sys.executable, "-c", "import sys; print('0, 50, 1'); sys.exit(6)"])
    assert failed.out is None and "exited 6" in failed.why and not failed.missing
    missing = await run_query(["/nonexistent/nvidia-smi"])
    assert missing.out is None and missing.missing


async def test_the_command_gets_no_secret_of_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "secret-token")
    res = await run_query([sys.executable, "-c", "import os; print(sorted(os.environ))"])
    assert res.out is not None and b"JUPYTERHUB_API_TOKEN" not in res.out and b"PATH" in res.out


async def test_run_query_cancelled_kills_the_command(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)\n"
    task = asyncio.ensure_future(run_query([sys.executable, "-c", script], timeout=600))
    await _until(pidfile.exists)
    await _until(lambda: pidfile.read_text() != "")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _gone(int(pidfile.read_text()))


async def test_missing_command_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    command = (f"/nonexistent/nvidia-smi-{time.monotonic_ns()}",)
    caplog.set_level(logging.WARNING, "tacc_hub.gpuquery")
    for _ in range(3):
        assert await local_gpu_usage(None, 1, {}, placement(0), command) == []
    assert [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()].__len__() == 1, caplog.text


async def test_local_usage_is_the_tasks_slots_and_one_run_per_pass(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = (sys.executable, FAKE, "--runs", str(runs), "0=37,1000", "1=91,2000", "2=5,10")
    with sampling_pass():
        reads = [asyncio.ensure_future(local_gpu_usage(None, t, {}, p, command))
                 for t, p in ((1, placement(1)), (2, placement(0, 2)), (3, placement(3)), (4, None))]
    got = await asyncio.gather(*reads)
    assert got == [[(91.0, 2000.0)], [(37.0, 1000.0), (5.0, 10.0)], [], []]
    assert runs.read_text().splitlines() == ["ok"]  # one run for the pass
    assert await local_gpu_usage(None, 1, {}, placement(0), command) == [(37.0, 1000.0)]  # outside a pass: its own
    assert len(runs.read_text().splitlines()) == 2


async def test_one_cancelled_reader_leaves_the_pass_reading_to_the_others(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpuquery, "TIMEOUT_S", 0.5)
    control = tmp_path / "control"
    control.write_text("hang")
    runs = tmp_path / "runs"
    command = (sys.executable, FAKE, "--control", str(control), "--runs", str(runs), "0=37,1000")
    with sampling_pass():
        first = asyncio.ensure_future(local_gpu_usage(None, 1, {}, placement(0), command))
        second = asyncio.ensure_future(local_gpu_usage(None, 2, {}, placement(0), command))
    await _until(lambda: Path(f"{control}.hang-pid").exists())
    first.cancel()
    await asyncio.sleep(0)
    assert not second.done()
    assert await asyncio.wait_for(second, 60) == []  # the shared run timed out for it: no reading
    await _gone(int(Path(f"{control}.hang-pid").read_text()))


def test_slurm_step_argv_runs_as_the_owner_and_names_no_user_text() -> None:
    from tacc_hub.executors.slurm import SlurmExecutor

    ex = SlurmExecutor.__new__(SlurmExecutor)
    ex.bin_dir = ""
    argv = gpuquery.step_argv(ex, "42", "n3", "tacc-alice", ("nvidia-smi", "--query-gpu=index"))
    i = argv.index("srun")
    assert argv[i:i + 10] == [
        "srun", "--jobid=42", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=n3", "--time=1", "--quiet",
        "--job-name=tacc-gpu-query", "--"]
    if os.geteuid() == 0:
        assert argv[:4] == [argv[0], "-u", "tacc-alice", "--"] and argv[0].endswith("runuser")
    assert argv[i + 10:] == ["/bin/sh", "-c", gpuquery.STEP_SCRIPT, "tacc-gpu-query", "nvidia-smi", "--query-gpu=index"]


async def test_slurm_usage_refuses_odd_states() -> None:
    from tacc_hub.executors.slurm import SlurmExecutor

    ex = SlurmExecutor.__new__(SlurmExecutor)
    cmd = ("nvidia-smi",)
    assert await gpuquery.slurm_gpu_usage(ex, 1, {"job_id": "1; rm -rf /"}, placement(0), cmd) == []
    assert await gpuquery.slurm_gpu_usage(ex, 1, {"job_id": "7"}, Placement(nodes=[NodeSlots(node="-x", gpus=[0])]),
                                          cmd) == []
    assert await gpuquery.slurm_gpu_usage(ex, 1, {"job_id": "7"}, placement(), cmd) == []  # holds no GPU


async def _until(pred, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


async def _gone(pid: int) -> None:
    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as fh:  # a zombie (not reaped yet by its parent) is gone too
                return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    await _until(gone)


async def test_the_fakes_hostile_modes_give_no_reading(tmp_path: Path) -> None:
    control = tmp_path / "control"
    command = (sys.executable, FAKE, "--control", str(control), "0=37,1000")
    for mode in ("garbage", "huge", "fail"):
        control.write_text(mode)
        assert await local_gpu_usage(None, 1, {}, placement(0), command) == [], mode
    control.write_text("ok")
    assert await local_gpu_usage(None, 1, {}, placement(0), command) == [(37.0, 1000.0)]
