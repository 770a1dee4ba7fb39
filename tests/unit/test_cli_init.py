"""`tcloud init`: a valid tacc.yaml guessed from a directory."""

from __future__ import annotations

import pytest

from tacc_hub.cli.init import write_tacc_yaml
from tacc_hub.cli.taskfile import load, snapshot, with_overrides
from tacc_hub.schema import SnapshotCode, SpecError


def test_init_guesses_entrypoint_and_pins_requirements(tmp_path):
    proj = tmp_path / "my project!"
    proj.mkdir()
    (proj / "train.py").write_text("print('hi')\n")
    (proj / "requirements.txt").write_text("PyYAML\nfoo==1.2  # pinned\n-e .\nnot-installed-anywhere-xyz\n")
    path = write_tacc_yaml(proj)
    spec, _base = load(proj)
    assert spec.name == "my-project"
    assert spec.entrypoint.argv == ["python", "train.py"]
    reqs = spec.environment.requirements
    assert "foo==1.2" in reqs and any(r.lower().startswith("pyyaml==") for r in reqs)
    assert not any("not-installed" in r for r in reqs)
    with pytest.raises(FileExistsError):
        write_tacc_yaml(proj)
    assert write_tacc_yaml(proj, force=True) == path


def test_overrides_are_validated_like_the_file(tmp_path):
    (tmp_path / "tacc.yaml").write_text("name: t\ncode: .\nentrypoint: [echo hi]\n")
    spec, base = load(tmp_path)
    changed = with_overrides(spec, {"resources.gpus_per_node": 2, "resources.time_limit": "2h"})
    assert changed.resources.time_limit == 7200
    with pytest.raises(SpecError) as err:
        with_overrides(spec, {"resources.nodes": -1})
    assert err.value.errors[0][0] == "resources.nodes"
    snap, data = snapshot(spec, base)
    assert isinstance(snap.code, SnapshotCode) and data is not None and snap.code.size == len(data)
    assert snapshot(spec, base)[0].digest == snap.digest  # deterministic archive, same digest


def test_a_directory_without_a_task_file_is_a_clear_error(tmp_path):
    with pytest.raises(SpecError, match="tcloud init"):
        load(tmp_path)
