"""Executors: run plans on an engine (local processes; Slurm in a later release)."""

from .base import Executor, Launch, LaunchError, Observation
from .fake import FakeExecutor
from .local import LocalExecutor

__all__ = ["Executor", "FakeExecutor", "Launch", "LaunchError", "LocalExecutor", "Observation"]
