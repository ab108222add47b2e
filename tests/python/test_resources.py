"""Resource bounds: long runs of autocast regions and scaler steps do not grow resident memory.

Resident memory (VmRSS in /proc/self/status) is read after a warm-up, so that allocator pools,
ATen's kernels and Python's caches already exist, and again after the run; the growth must stay
under 20 MB. A leak of even a few hundred bytes per cycle would exceed it: 100,000 regions times
200 bytes is 20 MB. Each test runs once per device (cpu, and cuda where there is CUDA); on CUDA
the memory torch's allocator holds on the GPU must not grow either.
"""

from __future__ import annotations

import gc
import sys

import ampkit
import pytest
import torch
import torch.nn.functional as F
from parity_models import mlp

LIMIT_KB = 20 * 1024

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status"),
    pytest.mark.usefixtures("one_intra_op_thread"),  # memory is measured here, not speed
]


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS line in /proc/self/status")


def _gpu_bytes(device: str) -> int:
    return torch.cuda.memory_allocated() if device == "cuda" else 0


def _growth_kb(run, device: str = "cpu", **kwargs) -> int:
    run(warm_up=True, device=device, **kwargs)
    gc.collect()
    before, gpu_before = _rss_kb(), _gpu_bytes(device)
    run(warm_up=False, device=device, **kwargs)
    gc.collect()
    grown = _gpu_bytes(device) - gpu_before
    assert grown <= 2**20, f"tensors on the GPU grew by {grown} bytes"
    return _rss_kb() - before


def _autocast_cycles(warm_up: bool, device: str) -> None:
    cycles = 10_000 if warm_up else 100_000
    # a leaf: its cast goes into the cast cache
    weight = torch.nn.Parameter(torch.randn(4, 4, device=device))
    x = torch.randn(2, 4, device=device)
    settings = [dict(dtype=torch.bfloat16), dict(dtype=torch.float16),
                dict(dtype=torch.bfloat16, enabled=False),
                dict(dtype=torch.float16, cache_enabled=False)]
    reused = ampkit.autocast(device)

    @ampkit.autocast(device, dtype=torch.float16)
    def decorated(a):
        return a

    for i in range(cycles):
        kind = i % 8
        if kind < 4:  # a new instance every cycle, as `with ampkit.autocast(...)` makes
            with ampkit.autocast(device, **settings[kind]):
                pass
        elif kind == 4:  # one instance entered again and again, and re-entrantly
            with reused:
                with reused:
                    pass
        elif kind == 5:
            decorated(x)
        elif kind == 6:  # nested in torch.autocast
            with torch.autocast(device, dtype=torch.float16):
                with ampkit.autocast(device):
                    pass
        elif i % 800 == 7:  # now and then an op that fills the weight-cast cache
            with ampkit.autocast(device):
                F.linear(x, weight)
        else:
            with ampkit.autocast(device, dtype=torch.bfloat16):
                pass
    assert not torch.is_autocast_enabled(device)


def test_100k_autocast_cycles_keep_resident_memory_flat(device):
    growth = _growth_kb(_autocast_cycles, device)
    assert growth < LIMIT_KB, f"resident memory grew by {growth} kB over 100,000 autocast cycles"


def _scaler_steps(warm_up: bool, state: dict, device: str) -> None:
    steps = 500 if warm_up else 10_000
    if warm_up:
        state["model"] = mlp(4, 4, 2, activations=()).to(device)
        state["scaler"] = ampkit.GradScaler(device, init_scale=2.0**10, growth_interval=20)
        state["x"] = torch.randn(8, 4, device=device)
        state["y"] = torch.randn(8, 2, device=device)
    model, scaler, x, y = state["model"], state["scaler"], state["x"], state["y"]

    def optimizers():
        # One plain optimizer (one host read per step) and one fused (none), new every 100 steps:
        # the scaler's per-optimizer parameter lists must not outlive their optimizers.
        return [torch.optim.SGD(model[0].parameters(), lr=1e-3),
                torch.optim.Adam(model[1].parameters(), lr=1e-3, fused=True)]

    opts = optimizers()
    for step in range(steps):
        if step % 100 == 0:
            opts = optimizers()
        for opt in opts:
            opt.zero_grad(set_to_none=step % 2 == 0)
        with ampkit.autocast(device):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        if step % 50 == 49:
            model[0].weight.grad[0, 0] = float("inf")
        if step % 3 == 0:
            scaler.unscale_(opts[0])
        for opt in opts:
            scaler.step(opt)
        scaler.update()
        if step % 1000 == 0:
            scaler.state_dict()
    del opts, opt
    gc.collect()
    assert len(scaler._param_lists) == 0, "parameter lists of dead optimizers are kept"


def test_10k_scaler_steps_keep_resident_memory_flat(device):
    state: dict = {}
    growth = _growth_kb(_scaler_steps, device, state=state)
    assert growth < LIMIT_KB, f"resident memory grew by {growth} kB over 10,000 scaler steps"
    assert 0 < state["scaler"].get_scale() < float("inf")
