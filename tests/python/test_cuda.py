"""CUDA-only behaviour, each compared with torch.amp on the same GPU (collected everywhere, skipped
with the reason where there is no CUDA device; `pytest -m cuda` runs them with every CUDA variant
of the device-generic tests):

- gradients on two devices (where there are two): one skip decision, torch.amp's numbers;
- fused Adam/AdamW: bit-identical to torch.amp with an injected inf, and no host sync;
- found_inf, the scale and the growth tracker stay on the device;
- host syncs per step, counted by torch itself (torch.cuda.set_sync_debug_mode): 1, 0 fused;
- float16 and bfloat16 regions;
- the scale kept on the device with the scale policy and the overflow report on.
"""

from __future__ import annotations

import ampkit
import pytest
import torch
from ampkit.bench import measure
from devices import requires_cuda, requires_two_cuda_devices

pytestmark = pytest.mark.filterwarnings("ignore:.*synchroniz.*:UserWarning")


count_syncs = measure.syncs_per_call


def assert_syncs_per_step(step, steps: int, per_step: int) -> None:
    """`steps` calls of `step` make `per_step` synchronizing calls each; else the failure lists
    where each one came from."""
    calls = measure.synchronizing_calls(step, steps)
    assert len(calls) == per_step * steps, "\n".join(calls) or "no synchronizing call"


class Loop:
    """A small float16 training loop on CUDA with either library."""

    def __init__(self, library: str, optimizer: str = "sgd", inject_at=(), **options) -> None:
        torch.manual_seed(0)
        self.autocast, scaler = ((ampkit.autocast, ampkit.GradScaler) if library == "ampkit"
                                 else (torch.autocast, torch.amp.GradScaler))
        self.model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                         torch.nn.Linear(64, 8)).cuda()
        params = self.model.parameters()
        self.opt = {"sgd": lambda: torch.optim.SGD(params, lr=0.05),
                    "adam": lambda: torch.optim.Adam(params, lr=1e-3, fused=True),
                    "adamw": lambda: torch.optim.AdamW(params, lr=1e-3, fused=True)}[optimizer]()
        self.scaler = scaler("cuda", growth_interval=2, **options)
        self.inject_at = set(inject_at)
        self.i = 0
        g = torch.Generator().manual_seed(1)
        self.data = [(torch.randn(16, 64, generator=g).cuda(),
                      torch.randn(16, 8, generator=g).cuda()) for _ in range(4)]

    def step(self) -> None:
        x, y = self.data[self.i % len(self.data)]
        self.opt.zero_grad(set_to_none=True)
        with self.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(self.model(x).float(), y)
        self.scaler.scale(loss).backward()
        if self.i in self.inject_at:
            self.model[0].weight.grad[0, 0] = float("inf")
        self.scaler.step(self.opt)
        self.scaler.update()
        self.i += 1

    def params(self):
        return [p.detach().cpu() for p in self.model.parameters()]


def _same(a: Loop, b: Loop) -> bool:
    return (a.scaler.get_scale() == b.scaler.get_scale()
            and all(torch.equal(x, y) for x, y in zip(a.params(), b.params())))


@requires_two_cuda_devices
def test_gradients_on_two_devices_take_one_decision_as_torch_amp_does():
    def run(library):
        torch.manual_seed(0)
        first, second = torch.nn.Linear(32, 32).to("cuda:0"), torch.nn.Linear(32, 4).to("cuda:1")
        opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
        autocast, scaler_cls = ((ampkit.autocast, ampkit.GradScaler) if library == "ampkit"
                                else (torch.autocast, torch.amp.GradScaler))
        scaler = scaler_cls("cuda", growth_interval=2)
        skipped = []
        for step in range(6):
            opt.zero_grad()
            with autocast("cuda"):
                out = second(first(torch.ones(8, 32, device="cuda:0")).to("cuda:1"))
            scaler.scale(out.float().pow(2).mean()).backward()
            if step == 3:  # an inf on the second device only
                second.weight.grad[0, 0] = float("inf")
            before = first.weight.detach().clone()
            scaler.step(opt)
            scaler.update()
            skipped.append(torch.equal(before, first.weight.detach()))
        params = [p.detach().cpu() for p in opt.param_groups[0]["params"]]
        return skipped, scaler.get_scale(), params
    ours, theirs = run("ampkit"), run("torch.amp")
    assert ours[0] == theirs[0] and ours[0][3]  # the inf on cuda:1 skipped cuda:0's step too
    assert ours[1] == theirs[1]
    assert all(torch.equal(a, b) for a, b in zip(ours[2], theirs[2]))


@requires_cuda
@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_fused_optimizers_match_torch_amp_and_never_sync(optimizer):
    ours, theirs = (Loop(lib, optimizer, inject_at={2}) for lib in ("ampkit", "torch.amp"))
    for _ in range(6):
        ours.step()
        theirs.step()
    assert ours.scaler._core.host_reads == 0  # before _same, whose get_scale() reads
    assert _same(ours, theirs)
    assert_syncs_per_step(ours.step, 5, 0)


@requires_cuda
def test_found_inf_the_scale_and_the_tracker_stay_on_the_device():
    loop = Loop("ampkit")
    loop.step()
    loop.opt.zero_grad()
    with loop.autocast("cuda", dtype=torch.float16):
        loss = loop.model(loop.data[0][0]).float().sum()
    loop.scaler.scale(loss).backward()
    loop.scaler.unscale_(loop.opt)
    found = loop.scaler._found_inf_per_device(loop.opt)
    assert found and all(t.device.type == "cuda" for t in found.values())
    assert loop.scaler._scale.device.type == "cuda"
    assert loop.scaler._growth_tracker.device.type == "cuda"
    loop.scaler.step(loop.opt)
    loop.scaler.update()


@requires_cuda
@pytest.mark.parametrize("optimizer,per_step", [("sgd", 1), ("adam", 0)], ids=["sgd", "fused"])
def test_host_syncs_per_step_counted_by_torch(optimizer, per_step):
    ours, theirs = Loop("ampkit", optimizer), Loop("torch.amp", optimizer)
    for loop in (ours, theirs):
        for _ in range(3):
            loop.step()
    assert_syncs_per_step(ours.step, 5, per_step)
    assert count_syncs(ours.step, 5) <= count_syncs(theirs.step, 5)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_regions_in_float16_and_bfloat16_are_torch_autocasts(dtype):
    a = torch.randn(32, 32, device="cuda")
    b = torch.randn(32, 32, device="cuda")
    results = []
    for autocast in (torch.autocast, ampkit.autocast):
        with autocast("cuda", dtype=dtype):
            assert torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == dtype
            mm = a @ b
            with autocast("cuda", enabled=False):
                inner = a @ b
            soft = torch.softmax(mm, dim=-1)  # an fp32 op under autocast
        results.append((mm, inner, soft))
        assert not torch.is_autocast_enabled("cuda")
    (t_mm, t_inner, t_soft), (o_mm, o_inner, o_soft) = results
    assert o_mm.dtype == t_mm.dtype == dtype
    assert o_inner.dtype == t_inner.dtype == torch.float32
    assert o_soft.dtype == t_soft.dtype == torch.float32
    assert torch.equal(o_mm, t_mm) and torch.equal(o_soft, t_soft)


@requires_cuda
def test_the_scale_stays_on_the_device_with_the_policy_and_the_report_on():
    # The counted steps must be clean: a skipped step costs two more reads (the report and the
    # collapse flag). From the default 65536, growing every 2 steps, an H100 counted 7
    # synchronizing calls in 4 steps (2026-11-27); a ceiling of 1024 keeps float16 finite.
    loop = Loop("ampkit", init_scale=256.0, min_scale=1.0, max_scale=1024.0, hysteresis=2,
                track_overflow=True)
    for _ in range(4):
        loop.step()
    assert loop.scaler._scale.device.type == "cuda"
    assert loop.scaler._core.host_reads == 4  # the skip decision only, one per clean step
    assert_syncs_per_step(loop.step, 4, 1)
    assert loop.scaler.get_scale() == 1024.0 and loop.scaler.stats()["skipped_steps"] == 0
    loop.inject_at = {loop.i}
    loop.step()  # the skipped step: hysteresis 2 keeps the scale, the report names the layer
    assert loop.scaler.step_was_skipped(loop.opt)
    assert [row["name"] for row in loop.scaler.overflow_report()] == ["group0.param0"]
    assert loop.scaler._scale.device.type == "cuda"
