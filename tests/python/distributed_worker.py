"""One rank of a sharded training run, for test_sharded_grad_scaler.py (run under spawn).

Each rank trains the same seeded model, wrapped by DDP, FSDP (FlatParameter shards) or FSDP2
(fully_shard, DTensor gradients), twice: with torch's ShardedGradScaler and torch.autocast, then
with ampkit's ShardedGradScaler and ampkit.autocast. An inf goes into one rank's local gradient
shard (FSDP, FSDP2) or input (DDP) at one step. Each rank saves, per step, the scale, whether the
step was skipped, and its local parameters, for the test to compare.
"""

from __future__ import annotations

import contextlib
import datetime
import os

import ampkit
import torch
import torch.distributed as dist

STEPS = 6
INJECT_STEP = 2


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))


def _wrap(kind: str, model: torch.nn.Module) -> torch.nn.Module:
    if kind == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model)
    if kind == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel
        return FullyShardedDataParallel(model, device_id=torch.device("cpu"))
    if kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        return model
    raise ValueError(kind)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


@contextlib.contextmanager
def _recording_all_reduce():
    """Records each tensor given to dist.all_reduce inside the block, with its reference count
    just before the call."""
    real = dist.all_reduce
    issued = []

    def recording(tensor, *args, **kwargs):
        issued.append((tensor, tensor._use_count()))
        return real(tensor, *args, **kwargs)

    dist.all_reduce = recording
    try:
        yield issued
    finally:
        dist.all_reduce = real


def _train(kind: str, impl: str, rank: int, inject_rank: int) -> dict:
    model = _wrap(kind, _model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if impl == "torch":
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        scaler = ShardedGradScaler("cpu", init_scale=2.0**10, growth_interval=2)
        autocast = torch.autocast
    else:
        scaler = ampkit.ShardedGradScaler("cpu", init_scale=2.0**10, growth_interval=2)
        autocast = ampkit.autocast
    g = torch.Generator().manual_seed(100 + rank)
    record = {"scale": [], "skipped": [], "params": [], "host_reads": 0, "stats": None,
              "held_by_gloo": 0}
    reads = (lambda: scaler._core.host_reads) if impl == "ampkit" else (lambda: 0)
    for step in range(STEPS):
        x, y = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
        if kind == "ddp" and step == INJECT_STEP and rank == inject_rank:
            x[0, 0] = float("inf")
        opt.zero_grad()
        with autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        if kind != "ddp" and step == INJECT_STEP and rank == inject_rank:
            grad = next(p for p in model.parameters() if p.grad is not None).grad
            _local(grad).view(-1)[0] = float("inf")
        before = [_local(p).detach().clone() for p in model.parameters()]
        reads_before = reads()
        with _recording_all_reduce() as issued:
            scaler.step(opt)
        # When step() returns, gloo's worker threads hold none of the tensors the scaler
        # all-reduced (else a worker may need the GIL while the interpreter exits: an abort).
        record["held_by_gloo"] += sum(t._use_count() > count for t, count in issued)
        scaler.update()
        record["host_reads"] += reads() - reads_before  # the step's own, not get_scale()'s
        after = [_local(p).detach().clone() for p in model.parameters()]
        record["scale"].append(scaler.get_scale())
        record["skipped"].append(all(torch.equal(a, b) for a, b in zip(before, after)))
        record["params"].append(after)
    if impl == "ampkit":
        record["stats"] = scaler.stats()
    return record


def run(rank: int, world: int, port: int, kind: str, inject_rank: int, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.set_num_threads(1)
        records = {impl: _train(kind, impl, rank, inject_rank) for impl in ("torch", "ampkit")}
        torch.save(records, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def fail_in_step(rank: int, world: int, port: int, failing_rank: int, timeout_s: float) -> None:
    """Rank `failing_rank` raises inside the step, before the all-reduce: the others must fail
    with torch.distributed's error within the group's timeout, not hang."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    model = torch.nn.parallel.DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = ampkit.ShardedGradScaler("cpu")
    scaler.scale(model(torch.randn(2, 8)).sum()).backward()
    if rank == failing_rank:
        raise RuntimeError(f"rank {rank} failed inside the step")
    scaler.step(opt)  # waits in the found_inf all-reduce for the rank that is gone
    scaler.update()
    dist.destroy_process_group()
