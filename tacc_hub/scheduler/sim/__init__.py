"""Trace-driven simulator: replays a job trace through the same ``Policy`` the service uses.

``trace`` loads the Philly CSV; ``slowdown`` derives spread-placement slowdowns
from measured step times; ``predict`` makes the duration predictions policies
see; ``simulator`` runs the events; ``metrics`` summarizes a replay.
``bundled`` names the trace data shipped in the package (``PHILLY_TRACE``,
``PLACEMENTS``: gzipped, read as they are).
"""

from .bundled import PHILLY_TRACE, PLACEMENTS
from .errors import PolicyError, Stuck
from .metrics import JobRecord, Metrics, percentile, summarize
from .predict import Predictor
from .simulator import ClusterSpec, Result, Simulator, simulate
from .slowdown import SlowdownTable, derive
from .trace import Job, Trace, load_philly

__all__ = [
    "PHILLY_TRACE", "PLACEMENTS", "ClusterSpec", "Job", "JobRecord", "Metrics", "PolicyError", "Predictor", "Result",
    "Simulator", "SlowdownTable", "Stuck", "Trace", "derive", "load_philly", "percentile", "simulate", "summarize",
]
