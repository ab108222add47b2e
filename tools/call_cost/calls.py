"""The calls of count.sh, from Python: calls.R's, in its order, each `number` calls in a loop
between two calls of the marker (os.getppid) at which callgrind starts a new count."""
import gc
import os
import sys

import ampkit  # noqa: F401  (loaded as the R side loads its package)
import torch

number = int(sys.argv[1])
torch.manual_seed(0)
x2, y2 = torch.randn(2, 2), torch.randn(2, 2)
a64 = torch.randn(64, 64)
linear = torch.nn.Linear(10, 32)
inp = torch.randn(32, 10)
device = "cpu"
calls = {
    "torch_add(x, y), 2x2": lambda: torch.add(x2, y2),
    "x + y, 2x2": lambda: x2 + y2,
    "x$sum(dim = 1), 64x64": lambda: a64.sum(dim=0),
    "x$view(-1, 64), 64x64": lambda: a64.view(-1, 64),
    "x$t(), 64x64": lambda: a64.t(),
    "x$unsqueeze(1), 64x64": lambda: a64.unsqueeze(0),
    "x$shape, 64x64": lambda: a64.shape,
    "x[1, ], 64x64": lambda: a64[0, :],
    "torch_zeros(32, 10)": lambda: torch.zeros(32, 10),
    'torch_zeros(32, 10, device = "cpu")': lambda: torch.zeros(32, 10, device=device),
    'x$to(device = "cpu"), 64x64': lambda: a64.to(device=device),
    "nn_linear(10, 32) forward, batch 32": lambda: linear(inp),
}
for call in calls.values():
    for _ in range(200):
        call()
for call in calls.values():
    gc.collect()
    os.getppid()
    for _ in range(number):
        call()
    os.getppid()
with open(sys.argv[2], "w") as f:
    f.write("\n".join(calls) + "\n")
