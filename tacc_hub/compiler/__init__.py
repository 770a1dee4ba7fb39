"""Compiler: a TaskSpec and a SiteProfile in, an ExecutionPlan out. Pure; imports only the schema."""

from .compile import ENTRYPOINT_FILE, PARAMS_FILE, compile_elements, compile_task
from .plan import ExecutionPlan, InputPlan, NodeLaunch, with_array_inputs
from .site import SiteProfile

__all__ = ["ENTRYPOINT_FILE", "PARAMS_FILE", "ExecutionPlan", "InputPlan", "NodeLaunch", "SiteProfile",
           "compile_elements", "compile_task", "with_array_inputs"]
