"""The scale policy, the counters and the collapse check against a plain-Python reference.

The fuzzer draws option sets (floors, ceilings, hysteresis, factors, intervals) and overflow
sequences, drives a real scaler through real steps, and compares every intermediate state with
scale_policy_reference.Reference. Both update paths of the core are held to it: the CPU's
host arithmetic, and the accelerator's ATen ops (on CPU tensors, and on CUDA where there is CUDA:
each test that makes a scaler runs once per device, the `device` fixture of tests/conftest.py).
AMPKIT_FUZZ_EXAMPLES=N draws N cases per path (default 300).
"""

from __future__ import annotations

import os
import warnings
from typing import List

import ampkit
import pytest
import torch
from devices import DEVICES
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from scale_policy_reference import Reference, f32, host_mul

EXAMPLES = int(os.environ.get("AMPKIT_FUZZ_EXAMPLES", "300"))


class Loop:
    """One parameter, one SGD optimizer (lr 0: only the scaler's state matters here)."""

    def __init__(self, scaler: ampkit.GradScaler, fused: bool = False,
                 device: str = "cpu") -> None:
        self.scaler = scaler
        self.param = torch.nn.Parameter(torch.ones(3, device=device))
        self.opt = torch.optim.SGD([self.param], lr=0.0, fused=fused or None)

    def step(self, overflow: bool):
        """One iteration; returns (warnings raised by update, the collapse error or None)."""
        self.opt.zero_grad()
        self.scaler.scale(self.param.sum()).backward()
        if overflow:
            self.param.grad[1] = float("inf")
        self.scaler.step(self.opt)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.scaler.update()
                error = None
            except ampkit.ScaleCollapseError as e:
                error = e
        return [w for w in caught if w.category is RuntimeWarning], error


def _state(scaler: ampkit.GradScaler) -> dict:
    s = scaler.state_dict()
    return {"scale": s["scale"], "tracker": s["_growth_tracker"],
            "left": s["_hysteresis_tracker"], **scaler.stats()}


def _expected(ref: Reference) -> dict:
    return {"scale": ref.scale, "tracker": ref.tracker, "left": ref.hysteresis_left,
            **ref.stats()}


powers = st.sampled_from([2.0 ** k for k in range(-4, 20)])


@st.composite
def cases(draw):
    init = draw(powers)
    floor = draw(st.none() | st.sampled_from([2.0 ** k for k in range(-4, 20)] + [0.75, 3.0]))
    ceiling = draw(st.none() | st.sampled_from([2.0 ** k for k in range(-2, 24)] + [1000.0]))
    if floor is not None and init < floor:
        init = floor
    if ceiling is not None:
        ceiling = max(ceiling, init, floor or 0.0)
    options = dict(
        init_scale=init,
        growth_factor=draw(st.sampled_from([2.0, 4.0, 1.5, 1.1, 3.0])),
        backoff_factor=draw(st.sampled_from([0.5, 0.25, 0.3, 0.9])),
        growth_interval=draw(st.integers(1, 4)),
        min_scale=floor,
        max_scale=ceiling,
        hysteresis=draw(st.integers(1, 4)),
        consecutive_hysteresis=draw(st.booleans()),
        growth_delay=draw(st.sampled_from([0, 0, 1, 3])),
        on_min_scale=draw(st.sampled_from(["raise", "warn", "ignore"])),
    )
    overflows = draw(st.lists(st.booleans(), min_size=1, max_size=30))
    return options, overflows


def _run_against_reference(options: dict, overflows: List[bool], tensor_ops: bool,
                           device: str = "cpu") -> None:
    note(f"options={options} overflows={overflows}")
    scaler = ampkit.GradScaler(device, **options)
    if tensor_ops and device == "cpu":  # an accelerator's scale always takes this path
        scaler._core.use_tensor_ops_for_policy(True)
    policy = {k: options[k] for k in ("growth_factor", "backoff_factor", "growth_interval",
                                      "min_scale", "max_scale", "hysteresis",
                                      "consecutive_hysteresis", "growth_delay")}
    # Both paths round as torch.amp's kernels do, on the CPU and in CUDA's: a double product
    # rounded once to float32.
    ref = Reference(options["init_scale"], **policy)
    loop = Loop(scaler, device=device)
    in_run = False
    for i, overflow in enumerate(overflows):
        caught, error = loop.step(overflow)
        collapsed = ref.update(overflow)
        mode = options["on_min_scale"]
        assert (error is not None) == (collapsed and mode == "raise"), f"step {i}"
        assert len(caught) == int(collapsed and mode == "warn" and not in_run), f"step {i}"
        in_run = collapsed
        assert scaler.step_was_skipped(loop.opt) is overflow
        assert _state(scaler) == _expected(ref), f"step {i}"


# CPU-only by nature: the host arithmetic path exists for a CPU scale alone.
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_policy_on_the_cpu_follows_the_reference(case):
    _run_against_reference(*case, tensor_ops=False)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_policy_through_device_ops_follows_the_reference(device, case):
    _run_against_reference(*case, tensor_ops=True, device=device)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(1, 4),
       st.sampled_from([(2.0, 0.5), (1.5, 0.3), (3.0, 0.9)]))
def test_default_policy_is_torch_amp_and_the_counters_follow_the_reference(
        device, overflows, interval, factors):
    growth, backoff = factors
    ours = ampkit.GradScaler(device, init_scale=1024.0, growth_factor=growth,
                             backoff_factor=backoff, growth_interval=interval)
    theirs = torch.amp.GradScaler(device, init_scale=1024.0, growth_factor=growth,
                                  backoff_factor=backoff, growth_interval=interval)
    ref = Reference(1024.0, growth, backoff, interval)
    a, b = Loop(ours, device=device), Loop(theirs, device=device)
    for overflow in overflows:
        a.step(overflow)
        b.step(overflow)
        ref.update(overflow)
        state = ours.state_dict()
        assert {k: state[k] for k in theirs.state_dict()} == theirs.state_dict()
        assert ours.stats() == ref.stats()


# ---- step outcome ------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_step_was_skipped_per_optimizer_and_for_the_iteration(fused, device):
    scaler = ampkit.GradScaler(device, init_scale=8.0)
    a, b = Loop(scaler, fused, device), Loop(scaler, fused, device)
    assert scaler.step_was_skipped() is False  # nothing stepped yet
    for overflow_a, overflow_b in [(False, False), (True, False), (False, True), (True, True)]:
        for loop, overflow in ((a, overflow_a), (b, overflow_b)):
            loop.opt.zero_grad()
            scaler.scale(loop.param.sum()).backward()
            if overflow:
                loop.param.grad[0] = float("nan")
            scaler.step(loop.opt)
        # during the iteration and after update(), the same answers
        for _ in range(2):
            assert scaler.step_was_skipped(a.opt) is overflow_a
            assert scaler.step_was_skipped(b.opt) is overflow_b
            assert scaler.step_was_skipped() is (overflow_a or overflow_b)
            if _ == 0:
                scaler.update()


def test_step_was_skipped_is_free_for_ordinary_and_one_read_for_fused_optimizers(device):
    for fused, reads in ((False, 0), (True, 1)):
        scaler = ampkit.GradScaler(device)
        loop = Loop(scaler, fused, device)
        loop.step(False)
        before = scaler._core.host_reads
        scaler.step_was_skipped(loop.opt)
        scaler.step_was_skipped(loop.opt)  # remembered
        assert scaler._core.host_reads - before == reads


def test_holding_the_scheduler_back_on_skipped_steps_is_one_line_and_warns_nothing(device):
    model = torch.nn.Linear(4, 2, device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    scaler = ampkit.GradScaler(device, init_scale=2.0 ** 16)
    lrs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns "lr_scheduler.step() before optimizer.step()"
        for step in range(4):
            opt.zero_grad()
            loss = model(torch.ones(3, 4, device=device)).sum()
            scaler.scale(loss).backward()
            if step == 0:  # the first step skips, as a too-large initial scale makes it
                model.weight.grad[0, 0] = float("inf")
            scaler.step(opt)
            scaler.update()
            if not scaler.step_was_skipped(opt):
                scheduler.step()
            lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [0.1, 0.05, 0.025, 0.0125]


# ---- overflow report ---------------------------------------------------------------------------

def test_overflow_report_names_the_parameters_and_counts_inf_and_nan(device):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(),
                                torch.nn.Linear(3, 2)).to(device)
    opt = torch.optim.SGD(model.named_parameters(), lr=0.1)
    scaler = ampkit.GradScaler(device, track_overflow=True)
    scaler.scale(model(torch.ones(2, 4, device=device)).sum()).backward()
    model[2].weight.grad[0, :2] = float("inf")
    model[2].weight.grad[1, 0] = float("-inf")
    model[0].bias.grad[1] = float("nan")
    scaler.step(opt)
    scaler.update()
    assert scaler.overflow_report() == [{"name": "0.bias", "inf": 0, "nan": 1},
                                        {"name": "2.weight", "inf": 3, "nan": 0}]
    # a clean iteration empties it
    opt.zero_grad()
    scaler.scale(model(torch.ones(2, 4, device=device)).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.overflow_report() == []


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_overflow_report_without_param_names_uses_group_and_index(fused, device):
    a = torch.nn.Parameter(torch.ones(2, device=device))
    b = torch.nn.Parameter(torch.ones(3, device=device))
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1, fused=fused or None)
    scaler = ampkit.GradScaler(device, track_overflow=True)
    scaler.scale(a.sum() + b.sum()).backward()
    b.grad[2] = float("nan")
    scaler.step(opt)
    scaler.update()
    assert scaler.overflow_report() == [{"name": "group1.param0", "inf": 0, "nan": 1}]
    assert scaler.step_was_skipped(opt) is True
    assert torch.equal(b.detach().cpu(), torch.ones(3))  # the fused kernel skipped the step


def test_track_overflow_costs_no_read_on_clean_steps_and_one_on_a_skip(device):
    for track in (False, True):
        scaler = ampkit.GradScaler(device, track_overflow=track)
        loop = Loop(scaler, device=device)
        for _ in range(5):
            loop.step(False)
        assert scaler._core.host_reads == 5  # the skip decision, one per step
        loop.step(True)
        assert scaler._core.host_reads == 6 + int(track)


def test_the_policy_adds_no_host_read_on_clean_steps(device):
    scaler = ampkit.GradScaler(device, min_scale=1.0, max_scale=2.0 ** 20, hysteresis=2)
    loop = Loop(scaler, device=device)
    for _ in range(5):
        loop.step(False)
    assert scaler._core.host_reads == 5


# ---- collapse ----------------------------------------------------------------------------------

def test_collapse_raises_a_state_error_naming_the_scale_and_the_floor(device):
    scaler = ampkit.GradScaler(device, init_scale=4.0, min_scale=2.0)
    loop = Loop(scaler, device=device)
    assert loop.step(True) == ([], None)  # 4 -> 2
    _, error = loop.step(True)  # an overflow at the floor
    assert isinstance(error, ampkit.StateError) and isinstance(error, RuntimeError)
    assert "`min_scale` (2)" in str(error)
    assert scaler.get_scale() == 2.0  # the update was applied; the scaler goes on
    assert loop.step(False) == ([], None)


def test_collapse_warns_once_per_run_or_is_ignored(device):
    for mode, expected in (("warn", [1, 0, 0, 1]), ("ignore", [0, 0, 0, 0])):
        scaler = ampkit.GradScaler(device, init_scale=2.0, min_scale=2.0, on_min_scale=mode)
        loop = Loop(scaler, device=device)
        counts, messages = [], []
        for overflow in (True, True, False, True):
            caught, error = loop.step(overflow)
            assert error is None
            counts.append(len(caught))
            messages += [str(w.message) for w in caught]
        assert counts == expected
        assert all("loss scale collapsed" in m and "`min_scale` (2)" in m for m in messages)


# ---- checkpoints -------------------------------------------------------------------------------

def test_torch_amp_loads_an_ampkit_state_and_ampkit_loads_torch_amps(device):
    ours = ampkit.GradScaler(device, init_scale=64.0, min_scale=1.0, hysteresis=2,
                             growth_interval=3)
    loop = Loop(ours, device=device)
    for overflow in (False, True, False):
        loop.step(overflow)
    theirs = torch.amp.GradScaler(device)
    theirs.load_state_dict(ours.state_dict())  # ignores ampkit's keys
    state = ours.state_dict()
    assert theirs.state_dict() == {k: state[k] for k in theirs.state_dict()}
    back = ampkit.GradScaler(device, min_scale=0.5, hysteresis=3)
    back.load_state_dict(theirs.state_dict())
    loaded = back.state_dict()
    assert {k: loaded[k] for k in theirs.state_dict()} == theirs.state_dict()
    # the policy it was built with stays; the counters start afresh
    assert (loaded["min_scale"], loaded["hysteresis"], loaded["_hysteresis_tracker"]) == (0.5, 3, 3)
    assert back.stats() == {"steps": 0, "skipped_steps": 0, "consecutive_skipped_steps": 0,
                            "scale": state["scale"]}


@pytest.mark.parametrize("tensor_ops", [False, True])
def test_a_run_resumed_from_a_checkpoint_continues_as_an_uninterrupted_one(tensor_ops, device):
    options = dict(init_scale=256.0, growth_interval=2, min_scale=4.0, max_scale=1024.0,
                   hysteresis=2, consecutive_hysteresis=True, on_min_scale="ignore",
                   track_overflow=True)
    overflows = [False, True, True, False, False, True, False, False, False, True, True, True]

    def run(scaler, steps):
        loop = Loop(scaler, device=device)
        return [(loop.step(o), _state(scaler), scaler.overflow_report())[1:] for o in steps]

    def make(**kw):
        scaler = ampkit.GradScaler(device, **kw)
        if device == "cpu":  # an accelerator's scale always takes the tensor-ops path
            scaler._core.use_tensor_ops_for_policy(tensor_ops)
        return scaler

    whole = run(make(**options), overflows)
    first = make(**options)
    head = run(first, overflows[:5])
    resumed = make()  # built with the defaults: everything comes from the checkpoint
    resumed.load_state_dict(first.state_dict())
    assert resumed.state_dict() == first.state_dict()
    tail = run(resumed, overflows[5:])
    assert head + tail == whole


def test_bad_checkpoint_values_are_refused_by_key_and_change_nothing(device):
    scaler = ampkit.GradScaler(device, min_scale=1.0)
    good = scaler.state_dict()
    before = scaler.state_dict()
    bad_values = {"min_scale": ("a", TypeError), "hysteresis": (0, ValueError),
                  "consecutive_hysteresis": (1, TypeError), "on_min_scale": ("loud", ValueError),
                  "track_overflow": (None, TypeError), "_steps": (-1, ValueError),
                  "max_scale": (0.5, ValueError)}
    for key, (value, error) in bad_values.items():
        with pytest.raises(error, match=f"`{key}`|`max_scale`"):
            scaler.load_state_dict({**good, key: value})
        assert scaler.state_dict() == before
    with pytest.raises(ValueError, match="unknown key"):
        scaler.load_state_dict({**good, "min_scal": 1.0})


def test_the_fuzzer_draws_factors_whose_float32_product_would_round_otherwise():
    # backoff 0.3 is drawn above: a double product rounded once (torch.amp's kernels, on the CPU
    # and in CUDA) and a float32 product of float32 operands round 3 * 0.3 differently, so the
    # fuzzer tells the two apart on both paths.
    assert host_mul(f32(3.0), 0.3) != f32(f32(3.0) * f32(0.3))
