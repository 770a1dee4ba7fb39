"""One element of the sweep example: fit y = 2x - 1 by mini-batch SGD with this element's lr and batch size.

The parameters arrive three ways (use whichever suits the program): as argv items (`--lr {lr}` in
tacc.yaml, substituted by the service, never through a shell), as TACC_PARAM_LR / TACC_PARAM_BS, and
in the JSON file TACC_PARAMS_FILE names. Writes outputs/result.json (stdlib only: no environment to build).
"""

from __future__ import annotations

import argparse
import json
import os
import random


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    index = os.environ.get("TACC_ARRAY_INDEX", "?")
    rng = random.Random(0)
    data = [(x, 2 * x - 1 + rng.gauss(0, 0.05)) for x in (rng.uniform(-1, 1) for _ in range(1024))]
    w = b = 0.0
    for _ in range(args.steps):
        batch = rng.sample(data, args.batch_size)
        gw = sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        gb = sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        w, b = w - args.lr * gw, b - args.lr * gb
    loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
    os.makedirs("outputs", exist_ok=True)
    result = {"index": index, "lr": args.lr, "batch_size": args.batch_size, "w": w, "b": b, "loss": loss}
    with open("outputs/result.json", "w") as fh:
        json.dump(result, fh)
    print(f"element {index}: lr {args.lr} batch {args.batch_size} -> loss {loss:.5f}", flush=True)


if __name__ == "__main__":
    main()
