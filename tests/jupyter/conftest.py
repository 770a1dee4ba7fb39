"""Fixtures for the Jupyter tests: a real jupyter_server with the tacc_hub extension, the real
tacc service of the end-to-end tests, and a real IPython kernel.

pytest-jupyter's fixtures are imported here rather than named in ``pytest_plugins``: pytest
refuses ``pytest_plugins`` outside the top-level conftest when the whole ``tests`` folder
runs (scripts/test.sh), and imported here they (and its autouse event-loop fixtures and
coroutine hooks) apply to this folder only instead of the whole session.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403
from traitlets.config import Config

from tests.e2e import conftest as e2e
from tests.e2e.conftest import Api, ServiceProcess

service = e2e.service  # the end-to-end tests' real service (session-scoped), reused here
__all__ = ["Api", "service"]

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]


@pytest.fixture
def jp_server_config() -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"tacc_hub": True}}})


@pytest.fixture
def tacc_env(service: ServiceProcess, monkeypatch: pytest.MonkeyPatch) -> ServiceProcess:
    """The server extension talks to the real service as user ``nbuser``."""
    monkeypatch.setenv("TACC_URL", service.url)
    monkeypatch.setenv("TACC_TOKEN", service.token("nbuser"))
    monkeypatch.setenv("TACC_CONFIG", "/nonexistent")
    return service


def git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True)


def notebook(cells: list[str]) -> str:
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(cells)],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    })


class Kernel:
    """A real IPython kernel (jupyter_client) and the outputs of what it runs."""

    def __init__(self, km: Any, kc: Any) -> None:
        self.km, self.kc = km, kc

    def run(self, code: str, timeout: float = 60) -> dict[str, Any]:
        out: dict[str, Any] = {"stdout": "", "stderr": "", "data": [], "error": None}

        def hook(msg: dict[str, Any]) -> None:
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out[content["name"]] += content["text"]
            elif kind in ("display_data", "execute_result"):
                out["data"].append(content["data"])
            elif kind == "error":
                out["error"] = content

        reply = self.kc.execute_interactive(code, output_hook=hook, timeout=timeout)
        out["status"] = reply["content"]["status"]
        return out


@pytest.fixture(scope="module")
def kernel(service: ServiceProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    from jupyter_client.manager import KernelManager

    cwd = tmp_path_factory.mktemp("kernel-cwd")
    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token("magicuser"),
           "TACC_CONFIG": "/nonexistent", "TACC_CAPTURE_PACKAGES": "0",
           "JPY_SESSION_NAME": "some/folder/current.ipynb",  # as jupyter_server names a kernel's notebook
           "JUPYTER_RUNTIME_DIR": str(cwd / ".runtime")}  # no server knows this kernel (see test_magic_server)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        k = Kernel(km, kc)
        k.cwd = cwd  # type: ignore[attr-defined]
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def wait_for(fn: Any, timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s")
        time.sleep(interval)
