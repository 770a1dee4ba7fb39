"""Shared fixtures for the schema and compiler unit tests."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import SiteProfile
from tacc_hub.compiler.runtime import ENTRY_POINT_GROUP, register_runtime
from tacc_hub.schema import TaskSpec, spec_from_data

SNAPSHOT = "ab" * 32  # a well-formed sha256


def fixed_site(**changes: Any) -> SiteProfile:
    """A site with fixed, fake paths: plans compiled for it never depend on this machine."""
    values: dict[str, Any] = {
        "name": "testsite",
        "pythons": {"3.11": "/opt/python3.11/bin/python3.11", "3.12": "/opt/python3.12/bin/python3.12"},
        "default_python": "3.11",
        "env_root": "/srv/tacc/envs",
        "code_root": "/srv/tacc/code",
        "env_builder": "uv",
        "conda_command": "/opt/conda/bin/micromamba",
        "inherit_packages": ["/opt/tacc_hub/site-packages"],
        "datasets": {"imagenet": "/data/shared/imagenet", "mnist": "/data/shared/mnist"},
        "modules": True,
        "max_nodes": 4,
        "max_gpus_per_node": 8,
        "partitions": ["gpu", "debug"],
        "gpu_types": ["a100", "v100"],
    }
    values.update(changes)
    return SiteProfile(**values)


@pytest.fixture
def site() -> SiteProfile:
    return fixed_site()


@pytest.fixture
def site_with() -> Callable[..., SiteProfile]:
    """``site_with(modules=False)``: the fixed site with some values changed."""
    return fixed_site


def make_spec(**fields: Any) -> TaskSpec:
    """A small valid spec (snapshot code, one argv) with ``fields`` replaced."""
    data: dict[str, Any] = {
        "name": "job",
        "code": {"kind": "snapshot", "digest": SNAPSHOT, "size": 10},
        "entrypoint": {"argv": ["python", "train.py"]},
    }
    data.update(fields)
    return spec_from_data(data)


@pytest.fixture
def spec() -> Callable[..., TaskSpec]:
    return make_spec


def _declared_runtimes() -> dict[str, str]:
    """The runtime entry points this checkout declares in pyproject.toml (name -> "module:attr")."""
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as f:
        data = tomllib.load(f)
    declared: dict[str, str] = data["project"]["entry-points"][ENTRY_POINT_GROUP]
    return declared


@pytest.fixture(autouse=True, scope="session")
def _runtimes_of_this_checkout() -> None:
    """Make every runtime that pyproject.toml declares available, even with stale installed metadata.

    Entry points are read from the installed package's metadata, which an editable install of
    another checkout (or an install older than the last pyproject change) does not have yet.
    Each declared "module:attr" is loaded as an entry point would be, so a wrong declaration
    still fails here; ``test_runtime_plugins`` checks the entry-point mechanism itself.
    """
    for name, value in _declared_runtimes().items():
        register_runtime(name, EntryPoint(name, value, ENTRY_POINT_GROUP).load())
