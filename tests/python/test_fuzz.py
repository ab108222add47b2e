"""Model-based fuzzing: ampkit.GradScaler against torch.amp.GradScaler, call by call.

Hypothesis draws scaler settings, one or two optimizers (plain, foreach and fused) and a sequence
of calls: scale (a tensor, a list, a tuple), backward, zero_grad, inf/NaN written into a gradient,
unscale_, step, update, update(new_scale), the setters, state_dict, load_state_dict of a state
from another scaler, and a pickle round trip. Each side has its own identical copy of the model
and optimizers; ampkit's side runs its forward under ampkit.autocast, torch's under
torch.autocast. After every call both sides returned the same value or both raised (ampkit's
exception an instance of the type torch raised, except where ampkit refuses a value by name with
ArgumentError and torch fails inside its kernels), and the scale, state_dict, parameters and
gradients are bit for bit the same.

It runs once per device (tests/parity/devices.py: cpu, and cuda where there is CUDA).

The default run draws 300 sequences, the same ones every time (derandomised, no example
database). AMPKIT_FUZZ_EXAMPLES=N draws N sequences from a fresh random seed each run and keeps
failures in Hypothesis' database (.hypothesis/, ignored by git) so that they are replayed.

Inputs torch.amp and ampkit handle differently by design are not drawn: Python ints and [1]-shaped
tensors for new_scale (torch.amp rejects them, ampkit accepts them), and invalid factors (torch.amp
accepts them unchecked). A step of a fused optimizer after an unscale_ that found no gradient
(scale, unscale_, then backward) is skipped: torch.amp fails with an AttributeError (its found_inf
is the int 0), ampkit refuses with StateError("No inf checks were recorded for this optimizer.");
test_scaler_reliability.py keeps that case.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
from typing import Any, Callable, List, Optional, Tuple

import ampkit
import pytest
import torch
import torch.nn.functional as F
from devices import DEVICES
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from parity_models import mlp, torch_amp_state

pytestmark = pytest.mark.usefixtures("one_intra_op_thread")

DEFAULT_EXAMPLES = 300
EXAMPLES = int(os.environ.get("AMPKIT_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
EXPLORING = "AMPKIT_FUZZ_EXAMPLES" in os.environ

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "adam_fused": lambda ps: torch.optim.Adam(ps, lr=1e-2, fused=True),
    "adamw_fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True),
    # No momentum here: when torch's fused SGD skips its first step (found_inf), the momentum
    # buffers it has just made with empty_like stay uninitialised, and the next step reads them,
    # so two runs of torch.amp alone differ. That is torch's, not the scaler's.
    "sgd_fused": lambda ps: torch.optim.SGD(ps, lr=0.05, fused=True),
}

N_BATCHES = 4


def _batches() -> List[Tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(99)
    return [(torch.randn(6, 4, generator=g), torch.randn(6, 3, generator=g))
            for _ in range(N_BATCHES)]


BATCHES = _batches()


# ---- comparing values bit for bit ----------------------------------------------------------------

_INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_tensor(a: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> bool:
    """Bit-identical (NaN payloads included); both None counts as the same."""
    if a is None or b is None:
        return a is None and b is None
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    a, b = a.detach().contiguous(), b.detach().contiguous()
    if a.is_floating_point():
        bits = _INT_OF_SIZE[a.element_size()]
        return torch.equal(a.view(bits), b.view(bits))
    return torch.equal(a, b)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and same_tensor(a, b)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same_value(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(same_value(a[k], b[k]) for k in a))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# ---- one side of the comparison ------------------------------------------------------------------

class Side:
    """A scaler, its own copy of the model and optimizers, and the autocast of its library."""

    def __init__(self, lib: str, scaler_settings: dict, model: torch.nn.Module,
                 optimizer_kinds: List[str], device: str = "cpu") -> None:
        self.lib, self.device = lib, device
        self.scaler_cls = ampkit.GradScaler if lib == "ampkit" else torch.amp.GradScaler
        self.autocast = ampkit.autocast if lib == "ampkit" else torch.autocast
        self.model = model.to(device)
        params = list(model.parameters())
        groups = [params] if len(optimizer_kinds) == 1 else [params[:2], params[2:]]
        self.optimizers = [OPTIMIZERS[kind](group) for kind, group in zip(optimizer_kinds, groups)]
        self.scaler = self.scaler_cls(device, **scaler_settings)

    def optimizer(self, index: int) -> torch.optim.Optimizer:
        return self.optimizers[index % len(self.optimizers)]

    # Each op returns the value to compare; an exception is compared too.
    def backward(self, use_autocast: bool, batch: int, container: str, backprop: bool) -> Any:
        x, y = (t.to(self.device) for t in BATCHES[batch])
        with self.autocast(self.device, dtype=torch.bfloat16, enabled=use_autocast):
            loss = F.mse_loss(self.model(x).float(), y)
        wrapped = {"tensor": loss, "list": [loss], "tuple": (loss,), "empty": []}[container]
        scaled = self.scaler.scale(wrapped)
        if backprop and container != "empty":
            (scaled if container == "tensor" else scaled[0]).backward()
        return scaled

    def zero_grad(self, set_to_none: bool) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def inject(self, param: int, element: int, value: float) -> None:
        p = list(self.model.parameters())[param]
        if p.grad is not None:
            p.grad.view(-1)[element % p.numel()] = value

    def unscale(self, index: int) -> None:
        return self.scaler.unscale_(self.optimizer(index))

    def step(self, index: int) -> Any:
        return self.scaler.step(self.optimizer(index))

    def step_each(self) -> List[Any]:
        return [self.scaler.step(opt) for opt in self.optimizers]

    def unscale_each(self) -> None:
        for opt in self.optimizers:
            self.scaler.unscale_(opt)

    def update(self) -> None:
        return self.scaler.update()

    def update_to(self, kind: str, value: float) -> None:
        new_scale = (value if kind == "float"
                     else torch.tensor(value, dtype=torch.float32, device=self.device))
        return self.scaler.update(new_scale)

    def setter(self, name: str, value: float) -> None:
        return getattr(self.scaler, name)(value)

    def state_dict(self) -> dict:
        return torch_amp_state(self.scaler.state_dict())

    def load(self, source: str, init_scale: float, growth_factor: float, backoff_factor: float,
             growth_interval: int, tracker: int, initialised: bool) -> None:
        # A valid state, taken from a freshly made scaler with other settings.
        cls = ampkit.GradScaler if source == "ampkit" else torch.amp.GradScaler
        src = cls(self.device, init_scale=init_scale, growth_factor=growth_factor,
                  backoff_factor=backoff_factor, growth_interval=growth_interval)
        src.load_state_dict({**src.state_dict(), "_growth_tracker": tracker})
        if initialised:
            src.scale(torch.ones((), device=self.device))  # a float32 tensor now: rounded
        return self.scaler.load_state_dict(src.state_dict())

    def pickle_round_trip(self) -> None:
        self.scaler = pickle.loads(pickle.dumps(self.scaler))


def _outcome(fn: Callable[[], Any]) -> Tuple[bool, Any]:
    try:
        return True, fn()
    except Exception as error:  # noqa: BLE001  (every exception is compared)
        return False, error


def _assert_same_state(ours: Side, theirs: Side, where: str) -> None:
    assert same_value(ours.scaler.get_scale(), theirs.scaler.get_scale()), (
        f"{where}: get_scale {ours.scaler.get_scale()} != {theirs.scaler.get_scale()}")
    assert same_value(ours.state_dict(), theirs.state_dict()), (
        f"{where}: state_dict {ours.state_dict()} != {theirs.state_dict()}")
    for i, (a, b) in enumerate(zip(ours.model.parameters(), theirs.model.parameters())):
        assert same_tensor(a, b), f"{where}: parameter {i} differs"
        assert same_tensor(a.grad, b.grad), f"{where}: gradient {i} differs"


def _assert_same_optimizer_state(ours: Side, theirs: Side, where: str) -> None:
    for i, (a, b) in enumerate(zip(ours.optimizers, theirs.optimizers)):
        sa, sb = a.state_dict()["state"], b.state_dict()["state"]
        assert same_value(sa, sb), f"{where}: optimizer {i} state differs"
        # ampkit never leaves grad_scale/found_inf behind on the optimizer.
        assert not hasattr(a, "grad_scale") and not hasattr(a, "found_inf"), where
        assert hasattr(a, "grad_scale") == hasattr(b, "grad_scale"), where


def _fused_step_after_empty_unscale(side: Side, args: tuple) -> bool:
    """Whether a step would hit a fused optimizer whose unscale_ found no gradient to check."""
    targets = [side.optimizer(args[0])] if args else side.optimizers
    states = getattr(side.scaler, "_per_optimizer_states", {})
    for opt in targets:
        state = states.get(id(opt))
        if (getattr(opt, "_step_supports_amp_scaling", False) and state is not None
                and state["stage"].name == "UNSCALED" and not state["found_inf_per_device"]):
            return True
    return False


def _run_op(op: tuple, ours: Side, theirs: Side, index: int) -> None:
    name, args = op[0], op[1:]
    where = f"op {index} {op}"
    note(where)
    if name.startswith("step") and _fused_step_after_empty_unscale(theirs, args):
        event("skipped: fused step after an unscale_ that saw no gradient")
        return  # known difference, see the module doc
    ok_ours, got_ours = _outcome(lambda: getattr(ours, name)(*args))
    ok_theirs, got_theirs = _outcome(lambda: getattr(theirs, name)(*args))
    if ok_theirs and not ok_ours:
        raise AssertionError(f"{where}: ampkit raised {got_ours!r}, torch.amp returned") \
            from got_ours
    if ok_ours and not ok_theirs:
        raise AssertionError(f"{where}: torch.amp raised {got_theirs!r}, ampkit returned") \
            from got_theirs
    event(f"{name}: " + ("returned" if ok_ours else f"both raised {type(got_theirs).__name__}"))
    if not ok_ours:
        # A value outside its rule is refused by name (ArgumentError); torch.amp fails on it
        # too but with whatever its kernels raise (c10's RuntimeError on float32 overflow).
        assert isinstance(got_ours, (ampkit.ArgumentError, type(got_theirs))), (
            f"{where}: torch.amp raised {type(got_theirs).__name__}({got_theirs}), ampkit "
            f"{type(got_ours).__name__}({got_ours}), which is not an instance of it")
    else:
        assert same_value(got_ours, got_theirs), f"{where}: returned {got_ours!r} != {got_theirs!r}"
    _assert_same_state(ours, theirs, where)
    if name.startswith("step"):
        _assert_same_optimizer_state(ours, theirs, where)


# ---- strategies ----------------------------------------------------------------------------------

positive_scales = st.one_of(
    st.sampled_from([1.0, 2.0**16, 0.1, 3.0, 2.0**-24, 2.0**100]),  # 2**100 overflows float32
    st.floats(min_value=1e-30, max_value=1e30),
)
growth_factors = st.one_of(st.sampled_from([2.0, 1.5, 4.0]),
                           st.floats(min_value=1.0, max_value=10.0, exclude_min=True))
backoff_factors = st.one_of(st.sampled_from([0.5, 0.25, 0.9]),
                            st.floats(min_value=0.0, max_value=1.0, exclude_min=True,
                                      exclude_max=True))
growth_intervals = st.integers(min_value=1, max_value=4)

scaler_settings = st.fixed_dictionaries({
    "init_scale": positive_scales,
    "growth_factor": growth_factors,
    "backoff_factor": backoff_factors,
    "growth_interval": growth_intervals,
})

optimizer_kinds = st.lists(st.sampled_from(sorted(OPTIMIZERS)), min_size=1, max_size=2)

_new_scale_floats = st.one_of(
    st.floats(min_value=1e-30, max_value=1e30),
    st.sampled_from([1.0, 2.0**16, 1e39, 1e-46]),  # 1e39: both raise; 1e-46: both round to 0
)

_backward = st.tuples(st.just("backward"), st.booleans(), st.integers(0, N_BATCHES - 1),
                      st.sampled_from(["tensor", "list", "tuple", "empty"]), st.booleans())
_inject = st.tuples(st.just("inject"), st.integers(0, 3), st.integers(0, 31),
                    st.sampled_from([math.inf, -math.inf, math.nan]))


@st.composite
def _load(draw) -> tuple:
    interval = draw(growth_intervals)
    return ("load", draw(st.sampled_from(["torch", "ampkit"])),
            draw(positive_scales.filter(lambda s: s < 3e38)), draw(growth_factors),
            draw(backoff_factors), interval, draw(st.integers(0, interval - 1)),
            draw(st.booleans()))


@st.composite
def _iteration(draw) -> List[tuple]:
    """A whole training iteration, so that sequences make progress and the scale grows."""
    ops = [("zero_grad", draw(st.booleans()))]
    ops.append(draw(_backward.map(lambda op: op[:3] + ("tensor", True))))
    if draw(st.integers(0, 3)) == 0:
        ops.append(draw(_inject))
    if draw(st.booleans()):
        ops.append(("unscale_each",))
    ops += [("step_each",), ("update",)]
    return ops


_single_ops = st.one_of(
    _backward,
    st.tuples(st.just("zero_grad"), st.booleans()),
    _inject,
    st.tuples(st.just("unscale"), st.integers(0, 1)),
    st.tuples(st.just("step"), st.integers(0, 1)),
    st.tuples(st.just("update")),
    st.tuples(st.just("update_to"), st.just("float"), _new_scale_floats),
    st.tuples(st.just("update_to"), st.just("tensor"), st.floats(min_value=1e-30, max_value=1e30)),
    st.tuples(st.just("state_dict")),
    _load(),
    st.tuples(st.just("pickle_round_trip")),
    st.tuples(st.just("setter"), st.just("set_growth_factor"), growth_factors),
    st.tuples(st.just("setter"), st.just("set_backoff_factor"), backoff_factors),
    st.tuples(st.just("setter"), st.just("set_growth_interval"), growth_intervals),
).map(lambda op: [op])

call_sequences = st.lists(st.one_of(_iteration(), _single_ops), min_size=1, max_size=14).map(
    lambda groups: [op for group in groups for op in group])


# ---- the test ------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not EXPLORING,
    database=settings.default.database if EXPLORING else None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scaler_settings=scaler_settings, optimizer_kinds=optimizer_kinds, calls=call_sequences)
def test_ampkit_and_torch_amp_agree_call_by_call(device, scaler_settings, optimizer_kinds, calls):
    model = mlp(4, 8, 3, seed=7)
    ours = Side("ampkit", scaler_settings, copy.deepcopy(model), optimizer_kinds, device)
    theirs = Side("torch", scaler_settings, copy.deepcopy(model), optimizer_kinds, device)
    _assert_same_state(ours, theirs, "start")
    for index, op in enumerate(calls):
        _run_op(op, ours, theirs, index)
    _assert_same_optimizer_state(ours, theirs, "end")
