"""The runtime plugin contract: placement shape in, per-node launch out.

A runtime plugin is an object with a ``name``, an ``options`` pydantic model
and a pure ``launch(ctx) -> NodeLaunch``. Plugins are found through the
``tacc_hub.runtimes`` entry-point group, so a site adds its own (a research
system, a vendor launcher) by installing a package; nothing in the core
changes. Plugins raise ``SpecError`` naming the ``runtime...`` field at fault.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from tacc_hub.schema import SpecError

from .plan import Arg, NodeLaunch

ENTRY_POINT_GROUP = "tacc_hub.runtimes"


class LaunchContext(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    user_argv: list[Arg]
    shell: bool  # the user's command is an entrypoint.sh of shell lines
    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    options: dict[str, Any]


class RuntimePlugin(Protocol):
    name: str
    options: type[BaseModel]

    def launch(self, ctx: LaunchContext, opts: Any) -> NodeLaunch: ...


class NoOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def parse_options(plugin: RuntimePlugin, options: dict[str, Any]) -> BaseModel:
    try:
        return plugin.options.model_validate(options)
    except ValidationError as exc:
        raise SpecError.from_validation(exc, "runtime.options", plugin.options) from None


@cache
def available_runtimes() -> dict[str, RuntimePlugin]:
    found: dict[str, RuntimePlugin] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        found[ep.name] = obj() if isinstance(obj, type) else obj
    return found


def get_runtime(kind: str) -> RuntimePlugin:
    plugins = available_runtimes()
    if kind not in plugins:
        have = ", ".join(sorted(plugins)) or "none"
        raise SpecError.one("runtime.kind", f"runtime '{kind}' is not installed at this site (available: {have})")
    return plugins[kind]
