"""What the compiler needs to know about the site it compiles for.

Invariant: a SiteProfile is plain data (built by the service from its
configuration); the compiler never looks at the machine itself, so the same
spec and the same profile always give the same plan.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# One word of a site command (passed through shlex.quote into launch.sh; a NUL cannot be passed at all).
CommandWord = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00\n]*$")]


class SiteProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "local"
    pythons: dict[str, str] = Field(description="Python major.minor -> interpreter path used to build task envs.")
    default_python: str = Field(description="Key of `pythons` used when a spec names none.")
    env_root: str = Field(description="Directory holding one environment per dependency digest.")
    code_root: str = Field(description="Content-addressed store of code snapshots.")
    env_builder: Literal["uv", "pip"] = "pip"
    conda_command: str | None = Field(None, description="conda or micromamba executable, if the site has one.")
    inherit_packages: list[str] = Field(
        default_factory=list,
        description="site-packages directories visible inside every task env (the hub's own, by default).",
    )
    datasets: dict[str, str] = Field(default_factory=dict, description="Shared dataset name -> path.")
    modules: bool = Field(False, description="Whether `module load` (environment modules) exists on the nodes.")
    max_nodes: int = 1
    max_gpus_per_node: int = 0
    partitions: list[str] = Field(default_factory=list)
    gpu_types: list[str] = Field(default_factory=list)
    # The network between nodes (see ``compiler.network``). All unset: the site declares nothing and
    # NCCL is left to find its own way (plans stay as they were before these settings existed).
    rdma: bool | None = Field(
        None,
        description="Whether the nodes have an RDMA fabric (InfiniBand/RoCE) that NCCL may use. True: NCCL's IB "
        "variables are set from ib_hca/ib_gid_index; False: tasks talk over TCP (NCCL_IB_DISABLE=1) and a task "
        "with network.rdma=required is refused; unset: NCCL is left alone.",
    )
    ib_hca: str | None = Field(
        None, pattern=r"^\^?=?[A-Za-z0-9_.:,-]{1,256}$",
        description="NCCL_IB_HCA on RDMA sites: the HCAs (and ports) NCCL uses, e.g. `mlx5_0:1,mlx5_1:1`.",
    )
    ib_gid_index: int | None = Field(
        None, ge=0, le=255, description="NCCL_IB_GID_INDEX on RDMA sites; RoCE v2 usually needs 3."
    )
    socket_ifname: str | None = Field(
        None, pattern=r"^\^?=?[A-Za-z0-9_.:,-]{1,256}$",
        description="NCCL_SOCKET_IFNAME: the interfaces for bootstrap and TCP traffic, e.g. `ib0` or `eth0,eth1`.",
    )
    tensorboard_command: list[CommandWord] = Field(
        default_factory=list, max_length=64,
        description="The Python interpreter (argv words) that runs TensorBoard beside a task whose spec has "
        "`tensorboard`, as the task's user in its environment (the first word found on its PATH), e.g. ['python'] "
        "or ['/opt/tb/bin/python3']; it needs the `tensorboard` package. launch.sh runs it with `-c` and a fixed "
        "program that serves TensorBoard under a secret path prefix (kept off the command line); a trailing "
        "`-m tensorboard.main` (or `-m tensorboard`) is accepted and dropped. A plain `tensorboard` console script "
        "does not work here. Empty: the site runs no TensorBoard and such specs are refused.",
    )

    @field_validator("tensorboard_command")
    @classmethod
    def _tensorboard_is_a_python(cls, words: list[str]) -> list[str]:
        """A ``tensorboard`` console script cannot be given its secret path prefix off the command line."""
        from .render import tensorboard_python

        python = tensorboard_python(list(words))
        if python and python[-1].rsplit("/", 1)[-1] == "tensorboard":
            raise ValueError("tensorboard_command must be a Python interpreter that has the tensorboard package "
                             "(e.g. ['python'] or ['python', '-m', 'tensorboard.main']), not the tensorboard "
                             "script: TensorBoard is started by a fixed Python program that keeps its secret "
                             "path prefix off the command line")
        return words
