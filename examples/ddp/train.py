"""A small but real distributed data-parallel training run (PyTorch DDP, gloo, CPU).

Each rank trains a linear regression on its shard of a synthetic dataset;
DDP all-reduces the gradients, so every rank ends with the same weights.
Run it with torchrun (tacc_hub's torchrun runtime does): 2 ranks by default.
Writes the final model to outputs/model.pt (rank 0) so `tcloud download` has
something to fetch, and, asked with `--tb-dir DIR` (or by default `runs` when
tacc_hub started TensorBoard beside the task: TACC_TENSORBOARD_PORT is set),
TensorBoard scalars (train/loss, train/lr per step) from rank 0.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--tb-dir", help="write TensorBoard scalars here (default: runs when tacc_hub runs "
                        "TensorBoard beside the task, else none)")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    true_w = torch.tensor([[2.0], [-3.0], [0.5]])
    x = torch.randn(256 * world, 3)
    y = x @ true_w + 0.01 * torch.randn(256 * world, 1)
    shard = slice(rank * 256, (rank + 1) * 256)

    model = DDP(torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, args.steps), gamma=0.5)
    writer: Any = None
    tb_dir = args.tb_dir or ("runs" if os.environ.get("TACC_TENSORBOARD_PORT") else None)
    if tb_dir and rank == 0:
        try:
            from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package; only when asked
        except ImportError:
            if args.tb_dir:
                raise
            print("no tensorboard package here: the run writes no TensorBoard scalars", flush=True)
        else:
            writer = SummaryWriter(tb_dir)
    step = 0
    for epoch in range(args.epochs):
        for _ in range(args.steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
            loss.backward()
            opt.step()
            if writer is not None:
                writer.add_scalar("train/loss", loss.item(), step)
                writer.add_scalar("train/lr", opt.param_groups[0]["lr"], step)
            sched.step()
            step += 1
        if writer is not None:
            writer.flush()
        print(f"rank {rank}/{world} epoch {epoch} loss {loss.item():.5f}", flush=True)
    if writer is not None:
        writer.close()

    w = model.module.weight.detach().clone()
    gathered = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(gathered, w)
    same = all(torch.allclose(g, w) for g in gathered)
    print(f"rank {rank}/{world} done: weights in sync across ranks: {same}", flush=True)
    if rank == 0:
        os.makedirs("outputs", exist_ok=True)
        torch.save(model.module.state_dict(), "outputs/model.pt")
    # Clean shutdown: without the barrier, gloo processes abort at exit about 1 run in 5.
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0 if same else 3)


if __name__ == "__main__":
    main()
