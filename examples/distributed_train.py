"""Sharded mixed-precision training with ampkit: autocast and ShardedGradScaler under FSDP2.

Run on the CPU with two processes (gloo):

    torchrun --nproc_per_node 2 examples/distributed_train.py

and unchanged on GPUs (nccl, one process per GPU). Rank 1 gets an inf in its gradient shard at
step 3: every rank skips that step and backs off, because the scaler all-reduces its inf check.
Each rank prints its scale and skip count; they agree.
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

import ampkit


def main() -> None:
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    device_type = "cuda" if cuda else "cpu"
    dtype = torch.float16 if cuda else torch.bfloat16

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8)).to(device)
    fully_shard(model)  # FSDP2: each rank keeps a shard of every parameter
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = ampkit.ShardedGradScaler(device_type, init_scale=2.0**12, growth_interval=3)

    g = torch.Generator().manual_seed(rank)
    for step in range(6):
        x = torch.randn(16, 32, generator=g).to(device)
        y = torch.randn(16, 8, generator=g).to(device)
        opt.zero_grad()
        with ampkit.autocast(device_type, dtype=dtype):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        if step == 3 and rank == 1:  # an overflow in one rank's shard only
            model[0].weight.grad.to_local().view(-1)[0] = float("inf")
        scaler.step(opt)
        scaler.update()
        stats = scaler.stats()
        line = (f"rank {rank} step {step}: scale={stats['scale']:.0f} "
                f"skipped={scaler.step_was_skipped(opt)} skipped_steps={stats['skipped_steps']}\n")
        print(line, end="", flush=True)  # one write per line: the ranks share the terminal
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
