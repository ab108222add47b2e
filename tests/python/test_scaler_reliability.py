"""Reliability of the scaler and the autocast guard: threads, exceptions, checkpoints.

- Threads: autocast state is per thread under many threads at once; the scaler's contract (calls
  serialised by the GIL, each atomic) means scalers driven by separate threads give the results of
  running them one after the other, and a reader on another thread never sees a torn state.
- Exceptions: an optimizer whose own step raises leaves the scaler usable, exactly as torch.amp.
- Checkpoints: loading a state from a scaler with other settings, fresh or mid-training, trains
  on exactly as torch.amp.GradScaler loaded with the same state. (Malformed states, key by key,
  are rows of the table in test_bad_input.py.)
- Once bugs, now regression tests: one minimal repro each (a known bug would be an xfail,
  strict for every test by pyproject.toml: fixing it makes the test fail until the mark goes).

Every test runs once per device (the `device` fixture of tests/conftest.py: cpu, and cuda where
there is CUDA).
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

import ampkit
import pytest
import torch
import torch.nn.functional as F
from devices import AUTOCAST_DTYPE, enter_thread
from parity_models import mlp, torch_amp_state

LIBS = {"ampkit": ampkit.GradScaler, "torch": torch.amp.GradScaler}
AUTOCASTS = {"ampkit": ampkit.autocast, "torch": torch.autocast}

OPTIMIZERS: Dict[str, Callable] = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adam_fused": lambda ps: torch.optim.Adam(ps, lr=1e-2, fused=True),
    "adamw_fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True),
    "sgd_fused": lambda ps: torch.optim.SGD(ps, lr=0.05, fused=True),
}


def _batch(step: int) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(8, 6, generator=g), torch.randn(8, 2, generator=g)


def _params(model: torch.nn.Module) -> List[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _same_params(a: List[torch.Tensor], b: List[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


class Trainer:
    """A model, an optimizer and a scaler of one library, stepped one iteration at a time."""

    def __init__(self, lib: str, optimizer: str = "adam", seed: int = 0, device: str = "cpu",
                 **scaler_kwargs) -> None:
        self.lib, self.device = lib, device
        self.model = mlp(6, 12, 2, seed=seed).to(device)
        self.opt = OPTIMIZERS[optimizer](self.model.parameters())
        self.scaler = LIBS[lib](device, **scaler_kwargs)
        self.autocast = AUTOCASTS[lib]

    def backward(self, step: int, inject: Optional[float] = None) -> None:
        x, y = (t.to(self.device) for t in _batch(step))
        self.opt.zero_grad()
        with self.autocast(self.device, dtype=torch.bfloat16):
            loss = F.mse_loss(self.model(x).float(), y)
        self.scaler.scale(loss).backward()
        if inject is not None:
            self.model[0].weight.grad[0, 0] = inject

    def iteration(self, step: int, inject: Optional[float] = None) -> dict:
        self.backward(step, inject)
        self.scaler.step(self.opt)
        self.scaler.update()
        return torch_amp_state(self.scaler.state_dict())

    def record(self) -> tuple:
        # state_dict() hands out the optimizer's live tensors: copy them
        return (torch_amp_state(self.scaler.state_dict()), _params(self.model),
                copy.deepcopy(self.opt.state_dict()["state"]))


def _same_record(a: tuple, b: tuple) -> bool:
    def same(x, y):
        if isinstance(x, torch.Tensor):
            return torch.equal(x, y)
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)):
            return (type(x) is type(y) and len(x) == len(y)
                    and all(same(u, v) for u, v in zip(x, y)))
        return x == y
    return same(a, b)


# ---- threads -------------------------------------------------------------------------------------

@pytest.mark.usefixtures("one_intra_op_thread")
def test_autocast_state_is_per_thread_under_many_concurrent_threads(device):
    """16 threads enter and leave nested regions with their own settings, all at once."""
    n_threads, cycles = 16, 400
    settings = [(dtype, enabled, cache)
                for dtype in (torch.bfloat16, torch.float16)
                for enabled in (True, False)
                for cache in (True, False)]
    barrier = threading.Barrier(n_threads)
    errors: List[str] = []
    a = torch.randn(8, 8, device=device)

    def worker(index: int) -> None:
        dtype, enabled, cache = settings[index % len(settings)]
        inner_dtype = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
        outer_lib = ampkit.autocast if index % 2 == 0 else torch.autocast
        enter_thread(device)
        barrier.wait()
        try:
            for i in range(cycles):
                with outer_lib(device, dtype=dtype, enabled=enabled, cache_enabled=cache):
                    seen = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device),
                            torch.is_autocast_cache_enabled())
                    if seen != (enabled, dtype, cache):
                        errors.append(f"thread {index} cycle {i}: outer {seen}")
                    with ampkit.autocast(device, dtype=inner_dtype, enabled=not enabled):
                        out = a @ a  # an op releases the GIL: other threads run meanwhile
                        expected = inner_dtype if not enabled else torch.float32
                        if out.dtype != expected or torch.get_autocast_dtype(device) != inner_dtype:
                            errors.append(f"thread {index} cycle {i}: inner {out.dtype}")
                    if (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)) != (
                            enabled, dtype):
                        errors.append(f"thread {index} cycle {i}: not restored after inner")
                if (torch.is_autocast_enabled(device)
                        or torch.get_autocast_dtype(device) != AUTOCAST_DTYPE[device]):
                    errors.append(f"thread {index} cycle {i}: not restored after outer")
        except Exception as error:  # noqa: BLE001
            errors.append(f"thread {index}: {error!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # switch threads often
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []


def _make_job(job: dict, device: str) -> Trainer:
    # Built on the main thread: model initialisation draws from torch's global generator.
    return Trainer("ampkit", job["optimizer"], seed=job["seed"], device=device,
                   init_scale=job["init_scale"], growth_interval=job["growth_interval"])


def _run_job(job: dict, trainer: Trainer) -> List[tuple]:
    records = []
    for step in range(job["steps"]):
        trainer.iteration(step, float("inf") if step in job["inf_at"] else None)
        records.append(trainer.record())
    return records


JOBS = [
    dict(optimizer="adam_fused", seed=1, init_scale=2.0**12, growth_interval=2, steps=40,
         inf_at={3, 17, 30}),
    dict(optimizer="sgd", seed=2, init_scale=2.0**20, growth_interval=3, steps=40,
         inf_at={5, 6, 33}),
]


@pytest.mark.usefixtures("one_intra_op_thread")
def test_threads_driving_their_own_scalers_match_running_one_after_the_other(device):
    sequential = [_run_job(job, _make_job(job, device)) for job in JOBS]
    trainers = [_make_job(job, device) for job in JOBS]
    concurrent: Dict[int, List[tuple]] = {}
    barrier = threading.Barrier(len(JOBS))

    def worker(i: int) -> None:
        barrier.wait()
        concurrent[i] = _run_job(JOBS[i], trainers[i])

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(JOBS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    for i in range(len(JOBS)):
        assert len(concurrent[i]) == len(sequential[i])
        for step, (a, b) in enumerate(zip(concurrent[i], sequential[i])):
            assert _same_record(a, b), f"job {i} step {step} differs when run concurrently"


@pytest.mark.parametrize("mode", ["update", "update_new_scale"])
@pytest.mark.usefixtures("one_intra_op_thread")
def test_reads_from_another_thread_never_see_a_torn_state(mode, device):
    """A reader polls get_scale() and state_dict() while a trainer runs; every value it sees is
    one of the states the trainer passes through (found by running it alone first). A torn read
    would be, e.g., the grown scale with the tracker not yet reset."""
    steps = 150
    inf_at = set(range(0, steps, 7))
    new_scales = [2.0**k for k in range(4, 12)]

    def make() -> Trainer:
        return Trainer("ampkit", "sgd", device=device, init_scale=2.0**10, growth_interval=2)

    def drive(trainer: Trainer, on_state: Callable[[dict], None]) -> None:
        on_state(trainer.scaler.state_dict())
        for step in range(steps):
            trainer.backward(step, float("inf") if step in inf_at else None)
            trainer.scaler.step(trainer.opt)
            if mode == "update":
                trainer.scaler.update()
            else:
                trainer.scaler.update(new_scales[step % len(new_scales)])
            on_state(trainer.scaler.state_dict())

    valid: List[dict] = []
    drive(make(), valid.append)
    valid_states = {tuple(sorted(s.items())) for s in valid}
    valid_scales = {s["scale"] for s in valid}
    assert len(valid_scales) > 3  # the trajectory does move

    live = make()
    seen_states: List[dict] = []
    seen_scales: List[float] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            seen_scales.append(live.scaler.get_scale())
            seen_states.append(live.scaler.state_dict())
            time.sleep(0)  # let the trainer have the GIL back at once

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        t_reader = threading.Thread(target=reader)
        t_reader.start()
        try:
            drive(live, lambda state: None)
        finally:
            done.set()
            t_reader.join()
    finally:
        sys.setswitchinterval(old)

    assert len(seen_states) > 100, "the reader hardly ran"
    torn = [s for s in seen_states if tuple(sorted(s.items())) not in valid_states]
    assert torn == [], f"{len(torn)} torn reads, e.g. {torn[:3]}"
    assert set(seen_scales) <= valid_scales
    assert len({tuple(sorted(s.items())) for s in seen_states}) > 1, "no read overlapped training"
    assert live.scaler.state_dict() == valid[-1]  # and it ends where it ends when run alone


# ---- exceptions in the optimizer's step ----------------------------------------------------------

class Boom(Exception):
    pass


def _raise_on_call(opt: torch.optim.Optimizer, call: int, after_real_step: bool) -> None:
    """Make the optimizer's own step raise on its `call`-th call (before or after stepping)."""
    real = opt.step
    count = [0]

    def step(*args, **kwargs):
        count[0] += 1
        if count[0] != call:
            return real(*args, **kwargs)
        if after_real_step:
            real(*args, **kwargs)
        raise Boom(f"optimizer step {call} failed")

    opt.step = step


def _train_through_exception(lib: str, optimizer: str, after_real_step: bool,
                             inject_at_raise: bool, device: str) -> List[tuple]:
    trainer = Trainer(lib, optimizer, device=device, init_scale=2.0**8, growth_interval=2)
    raise_at = 3  # the third call of opt.step
    _raise_on_call(trainer.opt, raise_at, after_real_step)
    records = []
    for step in range(8):
        inject = None
        if step == 5 or (inject_at_raise and step == raise_at - 1):
            inject = float("inf")
        trainer.backward(step, inject)
        try:
            trainer.scaler.step(trainer.opt)
        except Boom:
            records.append("raised")
            if lib == "torch":
                # torch.amp leaves grad_scale/found_inf on a fused optimizer whose step raised,
                # and the next step multiplies them in (scale * stale scale). ampkit removes them;
                # tidy torch.amp's side so that the two can be compared.
                for name in ("grad_scale", "found_inf"):
                    if hasattr(trainer.opt, name):
                        delattr(trainer.opt, name)
            else:
                assert not hasattr(trainer.opt, "grad_scale")
                assert not hasattr(trainer.opt, "found_inf")
        trainer.scaler.update()
        records.append(trainer.record())
    return records


@pytest.mark.parametrize("inject_at_raise", [False, True], ids=["finite", "inf_too"])
@pytest.mark.parametrize("after_real_step", [False, True], ids=["before_step", "after_step"])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_optimizer_exception_leaves_the_scaler_usable_like_torch_amp(optimizer, after_real_step,
                                                                      inject_at_raise, device):
    ours = _train_through_exception("ampkit", optimizer, after_real_step, inject_at_raise, device)
    theirs = _train_through_exception("torch", optimizer, after_real_step, inject_at_raise, device)
    assert [r == "raised" for r in ours] == [r == "raised" for r in theirs]
    assert "raised" in ours  # the optimizer's step did raise
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a == "raised":
            continue
        assert _same_record(a, b), f"record {i} differs"


@pytest.mark.parametrize("optimizer", ["adam", "adam_fused"])
def test_step_with_bad_optimizer_kwargs_leaves_the_scaler_usable(optimizer, device):
    """The optimizer's own TypeError passes through, and the iteration still finishes."""
    records = {}
    for lib in LIBS:
        trainer = Trainer(lib, optimizer, device=device, init_scale=2.0**8, growth_interval=1)
        out = []
        for step in range(4):
            trainer.backward(step)
            if step == 1:
                with pytest.raises(TypeError):
                    trainer.scaler.step(trainer.opt, no_such_argument=1)
                for name in ("grad_scale", "found_inf"):  # torch.amp leaks them (see above)
                    if lib == "torch" and hasattr(trainer.opt, name):
                        delattr(trainer.opt, name)
                assert not hasattr(trainer.opt, "grad_scale")
            trainer.scaler.step(trainer.opt)
            trainer.scaler.update()
            out.append(trainer.record())
        records[lib] = out
    for a, b in zip(records["ampkit"], records["torch"]):
        assert _same_record(a, b)


def test_torch_amp_leaks_grad_scale_after_a_fused_step_raises_and_ampkit_does_not(device):
    """Pins the difference the tests above tidy away (torch.amp's, not a fault of ampkit)."""
    leaked = {}
    for lib in LIBS:
        trainer = Trainer(lib, "adam_fused", device=device)
        _raise_on_call(trainer.opt, 1, after_real_step=False)
        trainer.backward(0)
        with pytest.raises(Boom):
            trainer.scaler.step(trainer.opt)
        leaked[lib] = hasattr(trainer.opt, "grad_scale")
    assert leaked == {"ampkit": False, "torch": True}


# ---- checkpoints: a state from a scaler with other settings -----------------------------------

SOURCE = dict(init_scale=2.0**5, growth_factor=4.0, backoff_factor=0.25, growth_interval=5)
TARGET = dict(init_scale=3.0, growth_factor=1.5, backoff_factor=0.75, growth_interval=2)


def _source_state(lib: str, steps: int, device: str) -> dict:
    trainer = Trainer(lib, "sgd", seed=9, device=device, **SOURCE)
    for step in range(steps):
        trainer.iteration(100 + step, float("nan") if step == 1 else None)
    return trainer.scaler.state_dict()


@pytest.mark.parametrize("source_lib", ["torch", "ampkit"])
@pytest.mark.parametrize("source_steps", [0, 4], ids=["source_fresh", "source_trained"])
@pytest.mark.parametrize("target_steps", [0, 3], ids=["into_fresh", "into_mid_training"])
@pytest.mark.parametrize("optimizer", ["adam", "adamw_fused"])
def test_loading_a_state_from_other_settings_trains_on_like_torch_amp(
        source_lib, source_steps, target_steps, optimizer, device):
    state = _source_state(source_lib, source_steps, device)
    assert state["_growth_tracker"] > 0 or source_steps == 0
    runs = {}
    for lib in LIBS:
        trainer = Trainer(lib, optimizer, device=device, **TARGET)
        records = []
        for step in range(target_steps):
            trainer.iteration(step, float("inf") if step == 1 else None)
        trainer.scaler.load_state_dict(dict(state))
        records.append(torch_amp_state(trainer.scaler.state_dict()))
        for step in range(target_steps, target_steps + 9):
            trainer.iteration(step, float("inf") if step == target_steps + 6 else None)
            records.append(trainer.record())
        runs[lib] = records
    assert runs["ampkit"][0] == runs["torch"][0]
    factors = ("growth_factor", "backoff_factor", "growth_interval")
    assert {k: runs["ampkit"][0][k] for k in factors} == {k: SOURCE[k] for k in factors}
    for i, (a, b) in enumerate(zip(runs["ampkit"], runs["torch"])):
        assert _same_record(a, b), f"step {i} after loading differs"


def test_loading_a_tracker_beyond_a_smaller_interval_behaves_like_torch_amp(device):
    """A tracker of 7 kept when the interval is then set to 3: it never equals it again."""
    state = {"scale": 64.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 10,
             "_growth_tracker": 7}
    runs = {}
    for lib in LIBS:
        trainer = Trainer(lib, "sgd", device=device)
        trainer.scaler.load_state_dict(state)
        trainer.scaler.set_growth_interval(3)
        runs[lib] = [trainer.iteration(step) for step in range(6)]
    assert runs["ampkit"] == runs["torch"]


# ---- once bugs, now regression tests -----------------------------------------------------------

def test_a_scaler_with_a_scale_of_zero_survives_a_pickle_round_trip(device):
    scaler = ampkit.GradScaler(device, init_scale=1.0, backoff_factor=1e-30)
    p = torch.nn.Parameter(torch.ones(1, device=device))
    opt = torch.optim.SGD([p], lr=0.1)
    for _ in range(2):  # 1 -> 1e-30 -> 0 (float32 underflow)
        opt.zero_grad()
        scaler.scale(p.sum()).backward()
        p.grad.fill_(float("inf"))
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 0.0
    reference = torch.amp.GradScaler(device, init_scale=1.0, backoff_factor=1e-30)
    reference.load_state_dict(scaler.state_dict())
    ours = torch_amp_state(scaler.state_dict())
    assert pickle.loads(pickle.dumps(reference)).state_dict() == ours
    assert pickle.loads(pickle.dumps(scaler)).state_dict() == scaler.state_dict()


def test_fused_step_after_an_unscale_that_saw_no_gradient_is_refused(device):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.ones(2, device=device))
    opt = torch.optim.Adam([p], lr=0.1, fused=True)
    scaler = ampkit.GradScaler(device, init_scale=2.0**16)
    loss = scaler.scale((p * p).sum())
    scaler.unscale_(opt)        # no gradient yet: nothing is checked or unscaled
    loss.backward()
    p.grad[0] = float("inf")
    before = p.detach().clone()
    with pytest.raises(RuntimeError, match="No inf checks were recorded"):
        scaler.step(opt)
    assert torch.equal(p.detach(), before)
