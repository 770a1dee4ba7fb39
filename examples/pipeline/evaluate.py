"""Step 3 of the pipeline example: the model train made, on the test set prepare made.

Both arrive as inputs (copied into this task's working directory before it starts): train's
outputs/ as model/ (model/model.pt), prepare's outputs/data as data/ (data/test.json). Prints the
test loss and exits 4 when the model did not learn the relation (loss over 0.1).
"""

from __future__ import annotations

import json
import sys

import torch


def main() -> int:
    with open("data/test.json") as fh:
        data = json.load(fh)
    model = torch.nn.Linear(3, 1)
    model.load_state_dict(torch.load("model/model.pt"))
    x, y = torch.tensor(data["x"]), torch.tensor(data["y"]).unsqueeze(1)
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model(x), y).item()
    w = [round(v, 3) for v in model.weight.detach().flatten().tolist()]
    print(f"evaluate: model/model.pt from train, weights {w}, test loss {loss:.5f} on {len(x)} samples "
          f"from prepare", flush=True)
    return 0 if loss <= 0.1 else 4


if __name__ == "__main__":
    sys.exit(main())
