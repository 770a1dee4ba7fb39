"""Compiler: a TaskSpec and a SiteProfile in, an ExecutionPlan out. Pure; imports only the schema."""

from .compile import ENTRYPOINT_FILE, compile_task
from .plan import ExecutionPlan, NodeLaunch
from .site import SiteProfile

__all__ = ["ENTRYPOINT_FILE", "ExecutionPlan", "NodeLaunch", "SiteProfile", "compile_task"]
