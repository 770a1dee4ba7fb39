"""The network settings of a launch: NCCL's variables from the site profile and the task.

Invariants: pure (a ``SiteProfile`` and the spec's ``Network`` in, plain data out). Nothing is
set for a site that declares no network (``SiteProfile.rdma`` unset) unless the task turns RDMA
off. Whether a placement crosses switches is only known at launch: the executor sets
``TACC_CROSS_SWITCH=1`` and launch.sh then exports ``NetworkEnv.cross_switch_env`` (the TCP
fallback) over ``env``, or, when the task requires RDMA, refuses to start.

| site ``rdma`` | task ``network.rdma`` | ``env``                                      | crossing switches  |
|---------------|-----------------------|----------------------------------------------|--------------------|
| unset         | preferred, required   | (nothing)                                    | (nothing)          |
| unset, False  | off                   | NCCL_IB_DISABLE=1 (+ NCCL_SOCKET_IFNAME)     | (already TCP)      |
| False         | preferred             | NCCL_IB_DISABLE=1 (+ NCCL_SOCKET_IFNAME)     | (already TCP)      |
| False         | required              | refused at compile time (``network.rdma``)   |                    |
| True          | off                   | NCCL_IB_DISABLE=1 (+ NCCL_SOCKET_IFNAME)     | (already TCP)      |
| True          | preferred             | NCCL_IB_DISABLE=0, NCCL_IB_HCA, ..._GID_INDEX | NCCL_IB_DISABLE=1  |
| True          | required              | NCCL_IB_DISABLE=0, NCCL_IB_HCA, ..._GID_INDEX | launch refused     |
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.schema import SpecError
from tacc_hub.schema.task import Network

from .site import SiteProfile

CROSS_SWITCH_VAR = "TACC_CROSS_SWITCH"


class NetworkEnv(BaseModel):
    """What a launch exports for the network; runtime plugins may read it (``LaunchContext.network``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rdma: bool = Field(False, description="NCCL is told to use InfiniBand (unless the placement crosses switches).")
    rdma_required: bool = False
    socket_ifname: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cross_switch_env: dict[str, str] = Field(default_factory=dict)


def _tcp(site: SiteProfile) -> dict[str, str]:
    env = {"NCCL_IB_DISABLE": "1"}
    if site.socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = site.socket_ifname
    return env


def network_env(site: SiteProfile, net: Network) -> NetworkEnv:
    """NCCL's variables for a task with these network settings at this site (see the table above)."""
    if net.rdma == "required" and site.rdma is False:
        raise SpecError.one("network.rdma", "RDMA is required but this site has no RDMA network; use `preferred`")
    if net.rdma == "off" or site.rdma is False:
        return NetworkEnv(socket_ifname=site.socket_ifname, env=_tcp(site))
    if site.rdma is None:
        return NetworkEnv()
    env = {"NCCL_IB_DISABLE": "0"}
    if site.ib_hca:
        env["NCCL_IB_HCA"] = site.ib_hca
    if site.ib_gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(site.ib_gid_index)
    if site.socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = site.socket_ifname
    required = net.rdma == "required"
    return NetworkEnv(
        rdma=True, rdma_required=required, socket_ifname=site.socket_ifname, env=env,
        cross_switch_env={} if required else {"NCCL_IB_DISABLE": "1"},
    )
