"""One rank of a DDP / FSDP2 run with a precision policy, for test_precision_policy.py (run
under spawn, gloo on 127.0.0.1).

Each rank trains the same seeded model twice in float16 autocast with ampkit's GradScaler
(the sharded one under FSDP2): once with ampkit.precision_policy keeping the first layer in
float32, applied before wrapping, once with that layer's forward edited by hand
(torch.autocast(enabled=False) and a float32 input). It saves its local parameters after each
step, for the test to compare bit for bit.
"""

from __future__ import annotations

import datetime
import os

import ampkit
import torch
import torch.distributed as dist

STEPS = 3


class HandEdited(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return self.inner(x.float())


def _model() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))


def _local(t: torch.Tensor) -> torch.Tensor:
    return (t.to_local() if hasattr(t, "to_local") else t).detach().clone()


def _train(kind: str, how: str, rank: int, record: dict) -> list:
    model = _model()
    kept = model[0]
    if how == "policy":
        ampkit.precision_policy(model, {"0": torch.float32})
    else:
        model[0] = HandEdited(model[0])
    if how == "policy":
        kept.register_forward_hook(lambda m, a, out: record.__setitem__("kept_dtype", out.dtype))
    if kind == "ddp":
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
        scaler = ampkit.GradScaler("cpu", init_scale=2.0**10)
    else:
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        wrapped = model
        scaler = ampkit.ShardedGradScaler("cpu", init_scale=2.0**10)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    out = []
    for _ in range(STEPS):
        x, y = torch.randn(4, 8, generator=g) * 50, torch.randn(4, 8, generator=g)
        opt.zero_grad()
        with ampkit.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(wrapped(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        out.append([_local(p) for p in wrapped.parameters()])
    return out


def run(rank: int, world: int, port: int, kind: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.set_num_threads(1)
        record: dict = {}
        record["policy"] = _train(kind, "policy", rank, record)
        record["hand"] = _train(kind, "hand", rank, record)
        torch.save(record, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
