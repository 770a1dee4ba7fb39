"""``plain``: run the user's command once per node, as it is."""

from __future__ import annotations

from tacc_hub.compiler.plan import NodeLaunch
from tacc_hub.compiler.runtime import LaunchContext, NoOptions
from tacc_hub.schema import SpecError


class PlainRuntime:
    name = "plain"
    options = NoOptions

    def launch(self, ctx: LaunchContext, opts: NoOptions) -> NodeLaunch:
        if ctx.tasks_per_node != 1:
            raise SpecError.one(
                "resources.tasks_per_node",
                "runtime plain starts one process per node; use runtime torchrun (or launch the ranks yourself)",
            )
        return NodeLaunch(argv=list(ctx.user_argv))
