"""Executors: run plans on an engine (local processes, or Slurm batch jobs)."""

from .base import Executor, Launch, LaunchError, Observation
from .fake import FakeExecutor
from .local import LocalExecutor
from .slurm import SlurmExecutor

__all__ = ["Executor", "FakeExecutor", "Launch", "LaunchError", "LocalExecutor", "Observation", "SlurmExecutor"]
