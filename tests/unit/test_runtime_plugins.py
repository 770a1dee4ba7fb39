"""A site adds a runtime by installing a package: tests/plugins/tacc-runtime-example, found by its entry point.

The package is built and installed by pip (offline: no dependencies, no build isolation; its
build backend, setuptools, comes with the test environment) into a directory that is then put
on ``sys.path``, as a site-packages directory would be. Nothing registers it by hand: the
compiler finds it through ``importlib.metadata`` entry points, by the name a task gives.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.compiler.runtime import available_runtimes, rescan_runtimes
from tacc_hub.schema import SpecError, TaskSpec

EXAMPLE = Path(__file__).resolve().parents[1] / "plugins" / "tacc-runtime-example"
HOSTILE = "hi $(touch PWNED) `id` 'q' \"dq\" ; x\ny \\"


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """pip-install the example package into a fresh directory put on sys.path; removed afterwards."""
    base = tmp_path_factory.mktemp("example")
    source, target = base / "src", base / "site-packages"
    shutil.copytree(EXAMPLE, source)  # the build writes into its source tree: not into the checkout
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
         "--no-deps", "--no-build-isolation", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert list(target.glob("tacc_runtime_example-*.dist-info/entry_points.txt"))
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    rescan_runtimes()
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        sys.modules.pop("tacc_runtime_example", None)
        importlib.invalidate_caches()
        rescan_runtimes()


def test_not_installed_not_available(spec: Callable[..., TaskSpec], site: SiteProfile) -> None:
    assert "example" not in available_runtimes()
    with pytest.raises(SpecError) as exc:
        compile_task(spec(runtime={"kind": "example"}), site)
    assert [f for f, _ in exc.value.errors] == ["runtime.kind"]


def test_installed_runtime_is_found_by_name_and_used(installed_example: Path, spec: Callable[..., TaskSpec],
                                                     site: SiteProfile, tmp_path: Path) -> None:
    plugin = available_runtimes()["example"]
    assert type(plugin).__module__ == "tacc_runtime_example"
    assert Path(sys.modules["tacc_runtime_example"].__file__ or "").is_relative_to(installed_example)

    plan = compile_task(spec(entrypoint={"argv": ["printenv", "EXAMPLE_GREETING", "EXAMPLE_NODE"]},
                             runtime={"kind": "example", "options": {"greeting": HOSTILE}},
                             resources={"nodes": 2}), site)
    assert plan.runtime == "example"
    assert plan.launch.env == {"EXAMPLE_GREETING": HOSTILE}
    task, work = tmp_path / "task", tmp_path / "work"
    task.mkdir()
    work.mkdir()
    (task / "launch.sh").write_text(plan.script)
    out = subprocess.run(
        ["bash", str(task / "launch.sh")], cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
        env={"PATH": "/usr/bin:/bin", "TACC_TASKDIR": str(task), "TACC_WORKDIR": str(work), "TACC_NODE_RANK": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{HOSTILE}\n1\n"  # the hostile option value arrives as it was, unexecuted
    assert not list(tmp_path.rglob("PWNED"))


def test_installed_runtime_options_are_checked(installed_example: Path, spec: Callable[..., TaskSpec],
                                               site: SiteProfile) -> None:
    with pytest.raises(SpecError) as exc:
        compile_task(spec(runtime={"kind": "example", "options": {"greeting": "x" * 201}}), site)
    assert [f for f, _ in exc.value.errors] == ["runtime.options.greeting"]
