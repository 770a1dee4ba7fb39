"""Samples the GPU utilization of every running task into the store.

Placeholder: being built (issue 19).
"""

from __future__ import annotations

from .base import ServiceContext


class GpuSampler:
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def start(self) -> None:
        """Begin sampling every ``gpu_sample_interval`` seconds (on the running event loop)."""

    async def stop(self) -> None:
        """Stop sampling."""
