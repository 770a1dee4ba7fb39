"""Site settings for reaching running tasks: ports, exec and shell, time limits, GPU samples.

Plain data (no imports from the service), so that the controller and the handlers share it
without an import cycle; ``TaccHub.running_settings`` fills it from the traits of the same names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunningSettings:
    """Site settings for reaching running tasks (issue 19); the ``TaccHub`` traits of the same names."""

    max_time_limit: int = 7 * 86400  # longest a run may last, extensions included (seconds)
    gpu_sample_interval: float = 30.0  # seconds between GPU utilization samples of running tasks; 0: off
    gpu_query_command: tuple[str, ...] = ("nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used",
                                          "--format=csv,noheader,nounits")
    max_exec_sessions: int = 4  # exec and shell sessions one user may have open at once
    exec_idle_timeout: float = 3600.0  # seconds a shell may sit without input or output before it is closed
