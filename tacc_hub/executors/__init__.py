"""Executors: run plans on an engine (local processes, or Slurm batch jobs)."""

from .base import REQUEUE_MARK, ExecUnsupported, Executor, Launch, LaunchError, LaunchUnavailable, Observation
from .fake import FakeExecutor
from .local import LocalExecutor
from .slurm import SlurmExecutor

__all__ = ["REQUEUE_MARK", "ExecUnsupported", "Executor", "FakeExecutor", "Launch", "LaunchError", "LaunchUnavailable",
           "LocalExecutor", "Observation", "SlurmExecutor"]
