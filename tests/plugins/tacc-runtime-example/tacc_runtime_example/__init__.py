"""``example``: a site's own runtime. Runs the user's command once per node, as ``plain`` does,
with ``EXAMPLE_GREETING`` (``options.greeting``) and ``EXAMPLE_NODE`` (the node's rank) set."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.compiler.plan import NodeLaunch
from tacc_hub.compiler.runtime import LaunchContext


class ExampleOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    greeting: str = Field("hello", max_length=200)


class ExampleRuntime:
    name = "example"
    options = ExampleOptions

    def launch(self, ctx: LaunchContext, opts: ExampleOptions) -> NodeLaunch:
        return NodeLaunch(
            argv=list(ctx.user_argv),
            env={"EXAMPLE_GREETING": opts.greeting},
            env_from={"EXAMPLE_NODE": "TACC_NODE_RANK"},
        )
