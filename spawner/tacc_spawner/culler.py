"""Idle culling of GPU servers (TACC rule: a server idle for 8 hours is stopped), in two parts.

1. ``jupyterhub-idle-culler`` as a hub-managed service stops servers with no activity for
   ``timeout`` seconds (activity: browser requests, kernel messages, as the single-user server
   reports them to the hub). In ``jupyterhub_config.py``::

       from tacc_spawner.culler import idle_culler

       service, role = idle_culler(timeout=8 * 3600)
       c.JupyterHub.services.append(service)
       c.JupyterHub.load_roles.append(role)

   which is the same as::

       c.JupyterHub.services.append({
           "name": "idle-culler",
           "command": [sys.executable, "-c", RUN_CULLER, "--timeout=28800", "--cull-every=300"],
       })
       c.JupyterHub.load_roles.append({
           "name": "idle-culler", "services": ["idle-culler"],
           "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
       })

2. TaccSpawner's own GPU signal (``TaccSpawner.gpu_idle_timeout``, default 8 h; ``gpu_idle_threshold``,
   ``gpu_sample_interval``, ``gpu_util_command``, ``gpu_report_activity``): inside every server task
   that holds GPUs, the wrapper (``server.py``) samples their utilization with ``nvidia-smi``.
   - GPUs idle (all below the threshold) for ``gpu_idle_timeout``: the server is stopped even if
     a browser tab keeps it "active" for the culler; the task ends with exit 0 and its log says why.
   - GPUs busy: the wrapper reports activity to the hub, so the culler keeps a server that
     computes on its GPUs with no browser attached.
   - No reading (no ``nvidia-smi``, no GPUs, a failing command): no signal either way; the culler
     alone decides. Our development machines have no GPUs, so the logic is tested with a fake reading
     (``tests/unit/test_spawner.py``, ``tests/hub/test_spawn.py``).
"""

from __future__ import annotations

import sys
from typing import Any

CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]
# jupyterhub-idle-culler ignores SIGINT, which is how the hub first asks a managed service to stop, so
# every hub shutdown waited for the hub's timeouts (about 25 s measured); with SIGINT's default action
# restored, it stops at once.
RUN_CULLER = ("import runpy, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
              "runpy.run_module('jupyterhub_idle_culler', run_name='__main__', alter_sys=True)")


def idle_culler(timeout: int = 8 * 3600, *, cull_every: int = 300, name: str = "idle-culler",
                python: str = sys.executable,
                extra_args: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The hub-managed service and the role of ``jupyterhub-idle-culler`` (servers only, never users)."""
    command = [python, "-c", RUN_CULLER, f"--timeout={int(timeout)}",
               f"--cull-every={int(cull_every)}", *(extra_args or [])]
    return {"name": name, "command": command}, {"name": name, "services": [name], "scopes": list(CULLER_SCOPES)}
