"""The attack suite of tests/e2e/test_isolation.py on the Slurm dev cluster: alice's job against bob's.

Jobs run as their owners (sbatch through runuser), under slurmstepd; every attempt from inside
alice's job must fail and bob's job, log, exit status, the code store and the store stay unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import ServiceProcess
from tests.e2e.test_isolation import run_attack_suite

pytestmark = pytest.mark.timeout(900)


def test_attacks_from_inside_a_slurm_job_all_fail(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    summary, log = run_attack_suite(slurm_service, tmp_path, supervisors=["slurmstepd"], timeout=240)
    assert summary["attempts"] >= 20, log
    assert summary["succeeded"] == [], log
