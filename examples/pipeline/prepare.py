"""Step 1 of the pipeline example: make a held-out test set for the DDP example's model.

The DDP example (examples/ddp/train.py) fits y = x @ [2, -3, 0.5] + noise; this writes 256 fresh
samples of the same relation to outputs/data/test.json (stdlib only), for the evaluate step.
"""

from __future__ import annotations

import json
import os
import random

TRUE_W = [2.0, -3.0, 0.5]


def main() -> None:
    rng = random.Random(int(os.environ.get("SEED", "1")))
    xs = [[rng.gauss(0, 1) for _ in TRUE_W] for _ in range(256)]
    ys = [sum(a * w for a, w in zip(x, TRUE_W, strict=True)) + rng.gauss(0, 0.01) for x in xs]
    os.makedirs("outputs/data", exist_ok=True)
    with open("outputs/data/test.json", "w") as fh:
        json.dump({"x": xs, "y": ys}, fh)
    print(f"prepare: {len(xs)} test samples in outputs/data/test.json", flush=True)


if __name__ == "__main__":
    main()
