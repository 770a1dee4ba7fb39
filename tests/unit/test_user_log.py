"""``user_log_file`` (job.log under ${TACC_USERDIR}): launch.sh run for real under bash.

The output also goes to that file in the owner's persistent directory, as it is written, and
never outside that directory: not through ``..`` (refused by the schema), not through a
symbolic link found there at run time, whatever the path's characters.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tacc_hub.compiler import ExecutionPlan, SiteProfile, compile_task
from tacc_hub.schema import SpecError, TaskSpec

SpecFactory = Callable[..., TaskSpec]


def run(plan: ExecutionPlan, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    work, task, user = (tmp_path / d for d in ("work", "task", "user"))
    for d in (work, task, user):
        d.mkdir(exist_ok=True)
    for name, text in plan.files.items():
        (task / name).write_text(text)
    (task / "launch.sh").write_text(plan.script)
    env = {"PATH": os.environ["PATH"], "HOME": str(user), "TACC_TASK_ID": "1", "TACC_TASKDIR": str(task),
           "TACC_WORKDIR": str(work), "TACC_USERDIR": str(user), "TACC_NODE_RANK": "0", "TACC_NNODES": "1"}
    out = subprocess.run(["bash", str(task / "launch.sh")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    return out


def tuxiv_like(spec: SpecFactory, path: str) -> TaskSpec:
    return spec(entrypoint={"shell": ["echo out-line; echo err-line >&2"]}, user_log_file=path)


@pytest.mark.parametrize("path", ["logs/run.log", "run.log", "it's a/$(touch PWNED) `x`.log", "slurm_log/hello.log"])
def test_the_output_also_goes_to_the_file_in_the_persistent_directory(
    spec: SpecFactory, site: SiteProfile, tmp_path: Path, path: str
) -> None:
    out = run(compile_task(tuxiv_like(spec, path), site), tmp_path)
    assert "out-line" in out.stdout  # still in the task's own log
    text = (tmp_path / "user" / path).read_text()
    assert "out-line" in text and "err-line" in text
    assert not list(tmp_path.rglob("PWNED"))


def test_a_symlink_in_the_persistent_directory_cannot_lead_the_log_out(
    spec: SpecFactory, site: SiteProfile, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "logs").symlink_to(outside)
    (tmp_path / "user" / "run.log").symlink_to(outside / "run.log")
    for path in ("logs/run.log", "run.log"):
        out = run(compile_task(tuxiv_like(spec, path), site), tmp_path)
        assert "out-line" in out.stdout  # the task still runs, its log is still kept
        assert "not written to TACC_USERDIR/" in out.stderr
    assert list(outside.iterdir()) == []


def test_a_symlink_inside_the_directory_is_followed(spec: SpecFactory, site: SiteProfile, tmp_path: Path) -> None:
    (tmp_path / "user" / "real").mkdir(parents=True)
    (tmp_path / "user" / "logs").symlink_to(tmp_path / "user" / "real")
    run(compile_task(tuxiv_like(spec, "logs/x.log"), site), tmp_path)
    assert "out-line" in (tmp_path / "user" / "real" / "x.log").read_text()


@pytest.mark.parametrize("path", ["../x.log", "/etc/x.log", "a/../../x.log", "~/x"])
def test_paths_leaving_the_directory_are_refused(spec: SpecFactory, path: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec(entrypoint={"argv": ["true"]}, user_log_file=path)
    assert exc.value.errors[0][0] == "user_log_file"


def test_no_user_log_no_tee(spec: SpecFactory, site: SiteProfile) -> None:
    assert "tee" not in compile_task(spec(), site).script


@pytest.mark.parametrize(("path", "written"), [("slurm_log/slurm-%j.out", "slurm_log/slurm-1.out"),
                                               ("run-%j-%%j.log", "run-1-%j.log")])
def test_sbatch_job_id_pattern_is_the_task_id(
    spec: SpecFactory, site: SiteProfile, tmp_path: Path, path: str, written: str
) -> None:
    run(compile_task(tuxiv_like(spec, path), site), tmp_path)  # TACC_TASK_ID=1
    assert "out-line" in (tmp_path / "user" / written).read_text()
