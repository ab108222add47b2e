"""GradScaler.from_deepspeed and from_megatron against the peers' own scaler classes.

DeepSpeed's ``DynamicLossScaler`` (deepspeed 0.19.8, runtime/fp16/loss_scaler.py) and Megatron-LM's
``DynamicGradScaler`` (megatron-core 0.16.1, core/optimizer/grad_scaler.py) are read from the
pinned distributions that ``make setup`` downloads into .venv/peers (only those modules run:
their packages need GPUs and much else). Both are driven with the same random overflow
sequences as a real ampkit scaler stepping a real optimizer: the scale after every step, the
skip decisions, the trackers (Megatron's) and where DeepSpeed raises must be equal.
"""

from __future__ import annotations

import builtins
import pathlib
import random
import sys
import tarfile
import types
import warnings
import zipfile

import ampkit
import pytest
import torch

PEERS = pathlib.Path(__file__).resolve().parents[2] / ".venv" / "peers"
SEQUENCES = 300  # per preset


def _source(archive_glob: str, member: str) -> str:
    archives = sorted(PEERS.glob(archive_glob))
    if not archives:
        pytest.fail(f"{PEERS}/{archive_glob} is missing: run `make setup` (it downloads the peers)")
    path = archives[0]
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as whl:
            return whl.read(member).decode()
    with tarfile.open(path) as tar:
        name = next(n for n in tar.getnames() if n.endswith(member))
        return tar.extractfile(name).read().decode()


def _module(name: str, source: str, stubs: dict) -> types.ModuleType:
    """Runs a peer's module with the imports in `stubs` answered by stand-ins (DeepSpeed's
    logging and process-group helpers); every other import is the real one."""
    real_import = builtins.__import__

    def imports(module, globals=None, locals=None, fromlist=(), level=0):
        if module in stubs:
            return stubs[module]
        return real_import(module, globals, locals, fromlist, level)

    mod = types.ModuleType(name)
    mod.__dict__["__builtins__"] = {**vars(builtins), "__import__": imports}
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    try:
        exec(compile(source, name, "exec"), mod.__dict__)
    finally:
        del sys.modules[name]
    return mod


class _Quiet:
    def __getattr__(self, _):
        return lambda *args, **kwargs: None


@pytest.fixture(scope="module")
def deepspeed_scaler():
    comm = types.SimpleNamespace(get_rank=lambda: 0)
    utils = types.SimpleNamespace(log_dist=lambda *a, **k: None, logger=_Quiet())
    stubs = {
        "deepspeed": types.SimpleNamespace(comm=comm),
        "deepspeed.runtime.config_utils": types.SimpleNamespace(DeepSpeedConfigObject=object),
        "deepspeed.utils": utils,
        "deepspeed.runtime.utils": types.SimpleNamespace(has_inf_or_nan=None),
    }
    source = _source("deepspeed-0.19.8.tar.gz", "deepspeed/runtime/fp16/loss_scaler.py")
    return _module("deepspeed_loss_scaler", source, stubs).DynamicLossScaler


class _CpuTorch(types.ModuleType):
    """torch, with the tensors Megatron makes on 'cuda' made on the CPU."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def tensor(data, dtype=None, device=None):
        return torch.tensor(data, dtype=dtype)


@pytest.fixture(scope="module")
def megatron_scaler():
    source = _source("megatron_core-0.16.1-*.whl", "megatron/core/optimizer/grad_scaler.py")
    return _module("megatron_grad_scaler", source, {"torch": _CpuTorch("torch")}).DynamicGradScaler


class _Driven:
    """An ampkit scaler stepping SGD on one parameter whose gradient is inf or finite."""

    def __init__(self, scaler: ampkit.GradScaler) -> None:
        self.scaler = scaler
        self.param = torch.nn.Parameter(torch.zeros(1))
        self.opt = torch.optim.SGD([self.param], lr=0.0)
        scaler.scale(torch.ones(()))  # the scale exists from here on

    def step(self, overflow: bool) -> None:
        self.param.grad = torch.tensor([float("inf") if overflow else 1.0])
        self.scaler.step(self.opt)
        self.scaler.update()
        assert self.scaler.step_was_skipped(self.opt) is overflow


def _sequence(rng: random.Random) -> list:
    p = rng.choice([0.01, 0.05, 0.2, 0.5, 0.9])
    return [rng.random() < p for _ in range(rng.randint(50, 300))]


def test_deepspeed_schedule_step_for_step(deepspeed_scaler):
    rng = random.Random(20)
    raised_runs = 0
    for _ in range(SEQUENCES):
        power = rng.randint(0, 20)
        fp16 = {"initial_scale_power": power, "loss_scale_window": rng.randint(4, 64),
                "hysteresis": rng.randint(1, 4), "consecutive_hysteresis": rng.random() < 0.5,
                "min_loss_scale": 2 ** rng.randint(0, power)}
        peer = deepspeed_scaler(init_scale=2 ** power, scale_window=fp16["loss_scale_window"],
                                min_scale=fp16["min_loss_scale"],
                                delayed_shift=fp16["hysteresis"],
                                consecutive_hysteresis=fp16["consecutive_hysteresis"])
        ours = _Driven(ampkit.GradScaler.from_deepspeed({"fp16": fp16}, "cpu"))
        for step, overflow in enumerate(_sequence(rng)):
            try:
                peer.update_scale(overflow)
            except Exception as peer_error:  # DeepSpeed raises a bare Exception at the floor
                assert "minimum" in str(peer_error)
                with pytest.raises(ampkit.ScaleCollapseError):
                    ours.step(overflow)
                raised_runs += 1
                break
            ours.step(overflow)
            assert ours.scaler.get_scale() == peer.cur_scale, (fp16, step)
    assert raised_runs > 10  # the floor was reached and raised at the same step, many times


def test_megatron_schedule_step_for_step(megatron_scaler):
    rng = random.Random(21)
    for _ in range(SEQUENCES):
        args = {"initial_scale": float(2 ** rng.randint(4, 32)),
                "growth_factor": rng.choice([2.0, 2.0, 1.5, 3.0]),
                "backoff_factor": rng.choice([0.5, 0.5, 0.25, 0.7]),
                "growth_interval": rng.randint(8, 64), "hysteresis": rng.randint(1, 4)}
        args["min_scale"] = rng.choice([1.0, args["initial_scale"] / 64, args["initial_scale"]])
        peer = megatron_scaler(**args)
        ours = _Driven(ampkit.GradScaler.from_megatron(**args, device="cpu"))
        for step, overflow in enumerate(_sequence(rng)):
            peer.update(overflow)
            ours.step(overflow)
            state = ours.scaler.state_dict()
            assert state["scale"] == peer.scale.item(), (args, step)
            assert state["_growth_tracker"] == peer._growth_tracker, (args, step)
            assert state["_hysteresis_tracker"] == peer._hysteresis_tracker, (args, step)


def test_deepspeed_first_growth_comes_one_clean_step_after_torch_amps():
    torch_amp_rule = _Driven(ampkit.GradScaler("cpu", init_scale=8.0, growth_interval=3))
    deepspeed = _Driven(ampkit.GradScaler.from_deepspeed(
        {"initial_scale_power": 3, "loss_scale_window": 3, "hysteresis": 1}, "cpu"))
    scales = {"torch.amp": [], "deepspeed": []}
    for overflow in [False] * 7 + [True] + [False] * 4:
        for name, driven in (("torch.amp", torch_amp_rule), ("deepspeed", deepspeed)):
            driven.step(overflow)
            scales[name].append(driven.scaler.get_scale())
    assert scales["torch.amp"] == [8, 8, 16, 16, 16, 32, 32, 16, 16, 16, 32, 32]
    assert scales["deepspeed"] == [8, 8, 8, 16, 16, 16, 32, 16, 16, 16, 16, 32]


def test_deepspeed_raises_only_when_a_back_off_is_due_at_the_floor():
    """The issue's case: init_scale = min_scale = 1, hysteresis 2, overflows O O O."""
    scaler = ampkit.GradScaler.from_deepspeed(
        {"initial_scale_power": 0, "min_loss_scale": 1, "hysteresis": 2}, "cpu")
    driven = _Driven(scaler)
    driven.step(True)  # absorbed by hysteresis: no collapse
    for _ in range(2):
        with pytest.raises(ampkit.ScaleCollapseError):
            driven.step(True)
    assert scaler.get_scale() == 1.0


def test_presets_state_dicts_carry_the_schedule():
    ds = ampkit.GradScaler.from_deepspeed({"fp16": {"hysteresis": 3}}, "cpu").state_dict()
    assert (ds["growth_delay"], ds["hysteresis"], ds["min_scale"], ds["on_min_scale"],
            ds["_growth_tracker"]) == (1, 3, 1.0, "raise", -1)
    mg = ampkit.GradScaler.from_megatron(growth_factor=1.1, device="cpu").state_dict()
    assert mg["growth_factor"] == float(torch.tensor(1.1, dtype=torch.float32))
    assert (mg["scale"], mg["on_min_scale"], mg["growth_delay"]) == (2.0**32, "ignore", 0)



@pytest.mark.parametrize("make", [lambda: ampkit.GradScaler.from_deepspeed({"fp16": {}}),
                                  lambda: ampkit.GradScaler.from_megatron()],
                         ids=["deepspeed", "megatron"])
def test_presets_without_a_device_scale_where_torch_computes(make):
    """No device given: "cuda" where torch sees a CUDA device, else "cpu"; not, as
    GradScaler()'s "cuda" would be on a CPU-only machine, a disabled scaler (a warning, then
    stats that stay 0). A device given explicitly is kept (the other tests give "cpu")."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler = make()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert scaler.is_enabled()
    assert repr(scaler).startswith(f"ampkit.GradScaler(device={device!r}, enabled=True")
    model = torch.nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler.scale(model(torch.randn(8, 4, device=device)).float().pow(2).mean()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.stats()["steps"] == 1


def test_a_disabled_deepspeed_section_gives_a_disabled_scaler():
    # DeepSpeed scales no loss where its fp16 section is disabled; the preset ignored the key
    off = ampkit.GradScaler.from_deepspeed({"fp16": {"enabled": False}}, "cpu")
    assert not off.is_enabled()
    assert ampkit.GradScaler.from_deepspeed({"fp16": {"enabled": True}}, "cpu").is_enabled()
    assert ampkit.GradScaler.from_deepspeed({"fp16": {}}, "cpu").is_enabled()
