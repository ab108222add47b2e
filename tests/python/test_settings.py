"""The scaler's one table of settings (core/include/ampkit/scaler_settings.h) and what derives
from it: Python's signatures and defaults, the state dict's keys, the R glue's option list; and
the small behaviours of issue 20 (the warn flag resumes, report names, overflow_report without
tracking)."""

from __future__ import annotations

import inspect
import warnings

import ampkit
import pytest
import torch
from ampkit import _C, r_glue


def _keywords(cls, skip=("self", "device", "process_group", "policy")):
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if name not in skip}


def test_gradscaler_signature_is_the_tables_options_in_order_with_its_defaults():
    table = dict(_C.SCALER_OPTIONS)
    signature = _keywords(ampkit.GradScaler)
    assert list(signature) == list(table)
    for name, default in table.items():
        assert signature[name] == default and type(signature[name]) is type(default), name
    # torch.amp's positional part: the same names, order and defaults as torch.amp's
    torch_amp = _keywords(torch.amp.GradScaler)
    assert list(signature)[:len(torch_amp)] == list(torch_amp)
    assert all(signature[name] == default for name, default in torch_amp.items())


def test_sharded_scaler_defaults_are_the_tables():
    table = dict(_C.SCALER_OPTIONS)
    for name, default in _keywords(ampkit.ShardedGradScaler).items():
        assert default == table[name], name


def test_state_dict_keys_are_the_tables_torch_amps_first():
    state = ampkit.GradScaler("cpu").state_dict()
    assert list(state) == list(_C.STATE_KEYS)
    assert list(state)[:5] == list(torch.amp.GradScaler("cpu").state_dict())
    assert list(_C.TORCH_AMP_STATE_KEYS) == list(state)[:5]
    # counts are ints at the border, flags bools
    assert type(state["growth_interval"]) is int and type(state["_growth_tracker"]) is int
    assert type(state["_collapse_warned"]) is bool


def test_every_option_round_trips_through_the_core():
    given = {"init_scale": 512.0, "growth_factor": 3.0, "backoff_factor": 0.25,
             "growth_interval": 7, "enabled": True, "min_scale": 2.0, "max_scale": 4096.0,
             "hysteresis": 3, "consecutive_hysteresis": True, "growth_delay": 2,
             "on_min_scale": "warn", "track_overflow": True}
    assert set(given) == set(dict(_C.SCALER_OPTIONS))
    scaler = ampkit.GradScaler("cpu", **given)
    assert scaler._core.options() == given
    state = scaler.state_dict()
    assert state["_growth_tracker"] == -2  # the tracker starts at -growth_delay
    fresh = ampkit.GradScaler("cpu")
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
    assert {k: v for k, v in fresh._core.options().items() if k != "init_scale"} == {
        k: v for k, v in given.items() if k != "init_scale"}


def test_an_unknown_option_is_refused_by_the_core():
    with pytest.raises(ampkit.ArgumentError, match="no option `growth_fctor`"):
        _C.GradScaler("cpu", {"growth_fctor": 2.0})


def _collapse_step(scaler, opt, param):
    param.grad = torch.full_like(param, float("inf"))
    scaler.step(opt)
    scaler.update()


def test_warn_on_min_scale_warns_once_per_run_across_a_resume(device):
    def make():
        param = torch.nn.Parameter(torch.zeros(1, device=device))
        opt = torch.optim.SGD([param], lr=0.0)
        scaler = ampkit.GradScaler(device, init_scale=1.0, min_scale=1.0, on_min_scale="warn")
        scaler.scale(torch.ones((), device=device))
        return scaler, opt, param

    scaler, opt, param = make()
    with pytest.warns(RuntimeWarning, match="collapsed"):
        _collapse_step(scaler, opt, param)
    state = scaler.state_dict()
    assert state["_collapse_warned"] is True
    resumed, opt2, param2 = make()
    resumed.load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same run of collapses: no second warning
        _collapse_step(resumed, opt2, param2)
    # a torch.amp state starts afresh: the run is over
    resumed.load_state_dict({k: state[k] for k in _C.TORCH_AMP_STATE_KEYS})
    assert resumed.state_dict()["_collapse_warned"] is False


def test_report_names_are_unique_across_optimizers(device):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)).to(device)
    first = torch.optim.SGD(model[0].parameters(), lr=0.1)
    second = torch.optim.SGD(model[1].parameters(), lr=0.1)
    scaler = ampkit.GradScaler(device, track_overflow=True)
    scaler.scale(model(torch.ones(1, 2, device=device)).sum()).backward()
    model[0].bias.grad[0] = float("inf")
    model[1].bias.grad[0] = float("nan")
    scaler.step(first)
    scaler.step(second)
    scaler.update()
    names = [row["name"] for row in scaler.overflow_report()]
    assert names == ["group0.param1", "optimizer1.group0.param1"]


def test_overflow_report_without_tracking_says_so(device):
    scaler = ampkit.GradScaler(device)
    with pytest.raises(ampkit.StateError, match="track_overflow"):
        scaler.overflow_report()
    assert ampkit.GradScaler(device, enabled=False).overflow_report() == []


# ---- autocast subclasses, the patterns of torch.cpu.amp.autocast and torch_xla --------------

class CpuAutocast(ampkit.autocast):
    """Its own __init__, calling super().__init__ with the device type."""

    def __init__(self, enabled=True, dtype=torch.bfloat16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class PlainSubclass(ampkit.autocast):
    pass


class TorchCpuAutocast(torch.autocast):
    def __init__(self, enabled=True, dtype=torch.bfloat16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def _matmul(x):
    return (x @ x).sum(0)


@pytest.mark.parametrize("make, oracle", [
    (lambda: CpuAutocast(), lambda: TorchCpuAutocast()),
    (lambda: CpuAutocast(enabled=False), lambda: TorchCpuAutocast(enabled=False)),
    (lambda: PlainSubclass("cpu", dtype=torch.float16),
     lambda: torch.autocast("cpu", torch.float16)),
])
def test_subclasses_work_as_torch_autocasts_do(make, oracle):
    x = torch.randn(4, 4)
    with oracle():
        expected = _matmul(x)
    region = make()
    assert isinstance(region, ampkit.autocast)
    with region:
        got = _matmul(x)
    assert got.dtype == expected.dtype and torch.equal(got, expected)
    assert make()(_matmul)(x).dtype == expected.dtype  # as a decorator
    assert not torch.is_autocast_enabled("cpu")


def test_a_subclass_that_skips_super_init_is_told_to_call_it():
    class Forgetful(ampkit.autocast):
        def __init__(self):
            pass

    with pytest.raises(TypeError, match="__init__"):
        Forgetful()


def test_subclasses_under_torch_compile_match_eager():
    x = torch.randn(4, 4)

    def with_subclass(x):
        with CpuAutocast():
            return _matmul(x)

    def with_plain(x):
        with PlainSubclass("cpu"):
            return _matmul(x)

    torch._dynamo.reset()
    for fn, fullgraph in ((with_subclass, False), (with_plain, True)):
        compiled = torch.compile(fn, backend="eager", fullgraph=fullgraph)
        got, expected = compiled(x), fn(x)
        assert got.dtype == torch.bfloat16 and torch.equal(got, expected)


# ---- the R glue, from Python's side ---------------------------------------------------------

def test_r_glue_presets_sharded_scaler_and_param_signature():
    # What R asks of Python (ampkit.r_glue): the presets' options, judged by Python's presets;
    # a sharded scaler; the identities of a PyTorch optimizer's parameters.
    options = r_glue.deepspeed_options({"fp16": {"initial_scale_power": 3}})
    assert set(options) == {name for name, _ in _C.SCALER_OPTIONS}
    assert options["init_scale"] == 8.0
    assert options == ampkit.GradScaler.from_deepspeed(
        {"fp16": {"initial_scale_power": 3}}, "cpu")._core.options()
    assert r_glue.megatron_options(initial_scale=4.0)["init_scale"] == 4.0
    with pytest.raises(ampkit.ArgumentError):
        r_glue.megatron_options(initial_scale=4.0, growth_factor=0.5)
    p, q = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.1)
    before = r_glue.param_signature(opt)
    opt.add_param_group({"params": [q]})
    assert before == [[id(p)]] and r_glue.param_signature(opt) == [[id(p)], [id(q)]]
    scaler = ampkit.GradScaler("cpu", init_scale=8.0)
    assert r_glue.scale_tensor(scaler) is None
    scaler.scale(torch.ones(1))
    assert r_glue.scale_tensor(scaler).item() == 8.0


# ---- the binding's stub ----------------------------------------------------------------------

def _stub_names():
    import ast
    import pathlib
    stub = pathlib.Path(ampkit.__file__).with_name("_C.pyi")
    tree = ast.parse(stub.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            top.add(node.name)
            if isinstance(node, ast.ClassDef):
                members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)
                                      } | {n.target.id for n in node.body
                                           if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    return top, members


def test_the_shipped_stub_declares_what_the_extension_has():
    top, members = _stub_names()
    assert top == {name for name in dir(_C) if not name.startswith("__")}
    for cls in ("GradScaler", "AutocastRegion", "ParamList", "FusedStepArgs"):
        public = {name for name in dir(getattr(_C, cls)) if not name.startswith("_")}
        assert members[cls] - {"__init__", "__enter__", "__exit__"} == public, cls


# ---- found in review ----------------------------------------------------------------------

def test_autocast_new_refuses_a_class_that_is_no_region():
    with pytest.raises(TypeError, match="not a subtype of autocast"):
        ampkit.autocast.__new__(int, "cpu")


def test_integers_beyond_int64_are_not_taken_for_flags():
    with pytest.raises(ampkit.ArgumentTypeError, match="`track_overflow` must be True or False"):
        ampkit.GradScaler("cpu", track_overflow=2**64)
    with pytest.raises(ampkit.ArgumentError, match="`growth_interval` must be at most"):
        ampkit.GradScaler("cpu", growth_interval=2**70)
    state = ampkit.GradScaler("cpu").state_dict()
    with pytest.raises(ampkit.ArgumentTypeError, match="`consecutive_hysteresis`"):
        ampkit.GradScaler("cpu").load_state_dict({**state, "consecutive_hysteresis": 2**64})


def test_a_new_scale_outside_the_bounds_is_refused_so_every_checkpoint_loads(device):
    scaler = ampkit.GradScaler(device, init_scale=4.0, min_scale=2.0, max_scale=64.0)
    scaler.scale(torch.ones((), device=device))
    for bad in (0.5, 128.0):
        with pytest.raises(ampkit.ArgumentError, match="`new_scale` must be"):
            scaler.update(bad)
    assert scaler.get_scale() == 4.0
    scaler.update(8.0)
    target = ampkit.GradScaler(device, init_scale=4.0, min_scale=2.0, max_scale=64.0)
    target.load_state_dict(scaler.state_dict())
    assert target.get_scale() == 8.0


def test_a_hysteresis_tracker_above_hysteresis_is_refused():
    state = ampkit.GradScaler("cpu", hysteresis=2).state_dict()
    target = ampkit.GradScaler("cpu", hysteresis=2)
    before = target.state_dict()
    with pytest.raises(ampkit.ArgumentError, match="`_hysteresis_tracker` must be <= `hysteresis`"):
        target.load_state_dict({**state, "_hysteresis_tracker": 3})
    assert target.state_dict() == before
