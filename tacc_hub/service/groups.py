"""The controller's part for many tasks at once (issue 20): arrays, pipelines, dependencies.

:class:`GroupsMixin` is a mixin of :class:`~tacc_hub.service.controller.Controller`.

Invariants:
- A waiting task is *gated* (kept out of the policy's queue, in ``gated``) while a dependency of
  its is not met, or while its array already has ``max_running`` elements in the queue or running;
  the gate is derived from the store alone, so it is the same after a restart of the service.
- A dependency that can no longer be met ends the waiting task as CANCELLED at once, with a reason
  naming what it waited on; that cancels what waits on it in turn.
- Dependencies name only the owner's own tasks and arrays (anyone else's: as if there were none).
"""

from __future__ import annotations


class GroupsMixin:
    """See the module docstring; implemented in issue 20."""
