"""The runtime plugin contract: placement shape in, per-node launch out.

A runtime plugin is an object with a ``name``, an ``options`` pydantic model
and a pure ``launch(ctx) -> NodeLaunch``. Plugins are found through the
``tacc_hub.runtimes`` entry-point group, so a site adds its own (a research
system, a vendor launcher) by installing a package; nothing in the core
changes. Plugins raise ``SpecError`` naming the ``runtime...`` field at fault.

A plugin's ``NodeLaunch`` is the same on every node: what differs per node
(its rank, rank 0's address, the node list) is read at launch from the
variables the executor sets (``plan.LAUNCH_ENV``), through ``env_from``,
``EnvRef`` arguments or a fixed script that reads them. The compiler adds the
network's variables (``ctx.network``, see ``network``) to every launch.

``register_runtime`` adds a plugin without an entry point (tests, an embedding
application); it wins over an entry point of the same name.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from tacc_hub.schema import SpecError

from .network import NetworkEnv
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
    network: NetworkEnv = NetworkEnv()  # the variables the compiler adds (NCCL's), for plugins that need more


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


_registered: dict[str, RuntimePlugin] = {}


def _instance(obj: Any) -> RuntimePlugin:
    plugin: RuntimePlugin = obj() if isinstance(obj, type) else obj
    return plugin


@cache
def _installed() -> dict[str, RuntimePlugin]:
    found: dict[str, RuntimePlugin] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = _instance(ep.load())
    return found


def available_runtimes() -> dict[str, RuntimePlugin]:
    """Installed plugins (entry points, read once) and registered ones, by name."""
    return {**_installed(), **_registered}


def register_runtime(name: str, plugin: Any) -> None:
    """Make ``plugin`` (a plugin class or instance) available as runtime ``name``."""
    _registered[name] = _instance(plugin)


def rescan_runtimes() -> None:
    """Read the entry points again (after a package was installed into the running interpreter)."""
    _installed.cache_clear()


def get_runtime(kind: str) -> RuntimePlugin:
    plugins = available_runtimes()
    if kind not in plugins:
        have = ", ".join(sorted(plugins)) or "none"
        raise SpecError.one("runtime.kind", f"runtime '{kind}' is not installed at this site (available: {have})")
    return plugins[kind]
