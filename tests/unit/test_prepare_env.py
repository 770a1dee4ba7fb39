"""``python -m tacc_hub.executors.prepare_env``: the job step that builds a task's env on a node (argument handling)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tacc_hub.compiler.plan import EnvPlan
from tacc_hub.executors.prepare_env import main

REPO = Path(__file__).resolve().parents[2]


def test_usage_and_unreadable_plans_fail_with_a_message(tmp_path: Path, capsys) -> None:
    assert main([]) == 2 and "usage:" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.json")]) == 1
    assert "cannot read the environment plan" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    assert main([str(tmp_path / "bad.json")]) == 1


def test_a_failed_build_leaves_no_env_and_says_why(tmp_path: Path, capsys) -> None:
    env = EnvPlan(kind="venv", digest="d1", python=str(tmp_path / "no python"), path=str(tmp_path / "envs" / "d1"),
                  builder="pip", requirements=["PyYAML==6.0.4"])
    plan = tmp_path / "env-plan.json"
    plan.write_text(env.model_dump_json())
    assert main([str(plan)]) == 1
    assert "preparing the venv environment d1 failed: creating the environment" in capsys.readouterr().err
    assert not Path(env.path).exists()


def test_as_a_module_an_existing_env_is_reused(tmp_path: Path) -> None:
    path = tmp_path / "envs" / "d2"
    path.mkdir(parents=True)
    (path / ".tacc-ready").write_text("d2\n")
    plan = tmp_path / "env-plan.json"
    plan.write_text(EnvPlan(kind="venv", digest="d2", python=sys.executable, path=str(path)).model_dump_json())
    proc = subprocess.run([sys.executable, "-m", "tacc_hub.executors.prepare_env", str(plan)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"tacc: venv environment d2 ready (reused) at {path}\n"
