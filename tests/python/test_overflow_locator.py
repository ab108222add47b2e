"""ampkit.overflow_locator and ampkit.suggest_policy.

The locator's numbers are held to torch itself: each module's output (captured by a hook of
the test's own) gives the abs max, inf and NaN counts directly, and the float16 underflow and
overflow fractions are what ``x.half()`` does to the values. Models are built to overflow at a
known module, in the forward pass and in the backward pass.
"""

from __future__ import annotations

import math

import ampkit
import pytest
import torch
from torch.overrides import TorchFunctionMode


class Scale(torch.nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


class _BlowUpGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 1e6


class BlowUpGrad(torch.nn.Module):
    """Identity forward; the backward multiplies the gradient by 1e6 (inf in float16)."""

    def forward(self, x):
        return _BlowUpGrad.apply(x)


def _forward_overflow_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), Scale(1e5), torch.nn.Linear(8, 8),
                               torch.nn.ReLU())


def _backward_overflow_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), BlowUpGrad(), torch.nn.Linear(8, 8),
                               torch.nn.Linear(8, 2))


X = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))


def _capture(model):
    """Hooks of the test's own: every module's forward output, every output's gradient."""
    seen = {"forward": [], "backward": []}
    handles = []
    for name, module in model.named_modules():
        shown = name or "(model)"

        def hook(m, args, out, shown=shown):
            seen["forward"].append((shown, out.detach().clone()))
            if out.requires_grad:
                out.register_hook(lambda g, shown=shown: seen["backward"].append(
                    (shown, g.clone())))

        handles.append(module.register_forward_hook(hook))
    return seen, handles


def _expected_row(t):
    finite = torch.isfinite(t)
    half = t.half()
    a = t.abs().float()
    return {"amax": torch.where(torch.isnan(a), 0.0, a).max().item(),
            "inf": int(torch.isinf(t).sum()), "nan": int(torch.isnan(t).sum()),
            "underflow": int(((t != 0) & finite & (half == 0)).sum()) / t.numel(),
            "overflow": int((finite & torch.isinf(half)).sum()) / t.numel()}


def _step(model, x, dtype=torch.float16):
    with ampkit.autocast("cpu", dtype=dtype):
        y = model(x)
    y.float().sum().backward()
    return y


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_statistics_equal_torchs_own_per_module_and_pass(dtype):
    model = _forward_overflow_model()
    seen, handles = _capture(model)
    with ampkit.overflow_locator(model) as loc:
        _step(model, X, dtype)
    for h in handles:
        h.remove()
    rows = loc.summary()
    for phase in ("forward", "backward"):
        mine = [r for r in rows if r["pass"] == phase]
        assert [r["module"] for r in mine] == [name for name, _ in seen[phase]]
        for row, (name, tensor) in zip(mine, seen[phase]):
            expected = _expected_row(tensor)
            got = {k: row[k] for k in expected}
            assert got == expected, (phase, name)
            assert row["dtype"] == str(tensor.dtype)[6:] and row["numel"] == tensor.numel()
            assert row["headroom"] == (math.log2(65504 / row["amax"]) if row["amax"] and
                                       math.isfinite(row["amax"]) else row["headroom"])


def test_underflow_and_overflow_are_what_a_cast_to_float16_does():
    tiny, big = 2.0 ** -25, 65520.0
    values = torch.tensor([0.0, tiny, -tiny, tiny * 1.0000001, 2.0 ** -24, 1e-30, 1.0, 65504.0,
                           65519.99, big, -big, 1e6, math.inf, -math.inf, math.nan, 3e38])
    model = torch.nn.Sequential(torch.nn.Identity())
    with ampkit.overflow_locator(model) as loc:
        model(values)
        model(values.double())
        model(values.bfloat16())
        model(values.half())
    rows = [r for r in loc.summary() if r["module"] == "0"]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]  # each pass of the model is a step
    for row, t in zip(rows, [values, values.double(), values.bfloat16(),
                                      values.half()]):
        expected = _expected_row(t)
        assert {k: row[k] for k in expected} == expected, row["dtype"]
    first = rows[0]
    assert first["underflow"] == 3 / 16 and first["overflow"] == 4 / 16  # tiny x2, 1e-30
    assert first["inf"] == 2 and first["nan"] == 1 and first["amax"] == math.inf


def test_first_nonfinite_module_in_the_forward_pass():
    model = _forward_overflow_model()
    with ampkit.overflow_locator(model) as loc:
        for _ in range(2):
            _step(model, X)
    first = loc.first_nonfinite()
    assert [f["forward"] for f in first] == ["1", "1"]  # Scale(1e5), not the Linear after it
    rows = [r for r in loc.summary() if r["step"] == 0 and r["pass"] == "forward"]
    assert [r["module"] for r in rows] == ["0", "1", "2", "3", "(model)"]
    assert rows[0]["inf"] == 0 and rows[1]["inf"] > 0 and rows[1]["headroom"] == -math.inf


def test_first_nonfinite_module_in_the_backward_pass():
    model = _backward_overflow_model()
    with ampkit.overflow_locator(model) as loc:
        _step(model, X)
    (first,) = loc.first_nonfinite()
    assert first["forward"] is None
    # grads in execution order: 3 (the model's output too), 2, 1 (finite), then 0's: inf,
    # made by the backward of BlowUpGrad, the module that consumed 0's output
    assert first["backward"] == "0"
    order = [r["module"] for r in loc.summary() if r["pass"] == "backward"]
    assert order == ["3", "(model)", "2", "1", "0"]
    assert first["parameters"] == "0"  # layer 0's weight gradient, from the inf


def test_the_locator_changes_nothing():
    model = _forward_overflow_model()
    y0 = _step(model, X)
    g0 = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with ampkit.overflow_locator(model):
        y1 = _step(model, X)
    g1 = [p.grad.clone() for p in model.parameters()]
    for a, b in zip([y0, *g0], [y1, *g1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


class _SyncCounter(TorchFunctionMode):
    """Counts the calls that read a tensor's values to the host."""

    READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__",
             "nonzero", "equal", "__format__"}

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.READS:
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


def test_one_host_read_per_step_not_one_per_module():
    model = _backward_overflow_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    steps = 4
    counter = _SyncCounter()
    with ampkit.overflow_locator(model) as loc:
        with counter:
            for _ in range(steps):
                opt.zero_grad()
                _step(model, X)
                opt.step()
    assert loc.host_reads == steps
    assert counter.reads == ["tolist"] * (steps - 1)  # the last step is read on leaving
    modules = len(list(model.modules()))
    assert len(loc.summary()) >= steps * 2 * modules  # many rows, from steps reads
    assert loc.host_reads == steps  # summary() after the last step reads nothing more


def test_steps_and_the_decorator_and_a_module_called_twice():
    shared = torch.nn.Linear(4, 4)
    model = torch.nn.Sequential(shared, torch.nn.ReLU(), shared)
    loc = ampkit.overflow_locator(model)

    @loc
    def train_step(x):
        _step(model, x)

    train_step(X)
    train_step(X)
    rows = loc.summary()
    assert sorted({r["step"] for r in rows}) == [0, 1]
    row = next(r for r in rows if r["module"] == "0" and r["pass"] == "forward")
    assert row["calls"] == 2 and row["numel"] == 2 * X.numel()
    assert loc.host_reads == 2 and "2 steps" in repr(loc)
    assert "headroom" in loc.table() and "forward" in str(loc)


def test_plot_writes_a_png(tmp_path):
    model = _forward_overflow_model()
    with ampkit.overflow_locator(model) as loc:
        for _ in range(3):
            _step(model, X)
    path = loc.plot(str(tmp_path / "headroom.png"), modules=["0", "1", "2"])
    data = (tmp_path / "headroom.png").read_bytes()
    assert path.endswith("headroom.png") and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000


def test_bad_use():
    with pytest.raises(ampkit.ArgumentTypeError, match="`model` must be a torch.nn.Module"):
        ampkit.overflow_locator(lambda x: x)
    model = torch.nn.Linear(2, 2)
    loc = ampkit.overflow_locator(model)
    with loc:
        with pytest.raises(ampkit.StateError, match="already active"):
            loc.__enter__()
    with pytest.raises(ampkit.ArgumentTypeError, match="`func` must be a callable"):
        loc(3)


def test_table_and_plot_refuse_what_would_select_nothing(tmp_path):
    model = _forward_overflow_model()
    with ampkit.overflow_locator(model) as loc:
        _step(model, X)
    # a string, an unknown pass or none: the table was its header alone
    for passes in ("forward", ["fwd"], []):
        with pytest.raises(ampkit.ArgumentError, match="`passes` must be a list naming"):
            loc.table(passes=passes)
    assert len(loc.table(passes=["forward"]).splitlines()) > 1
    # a string ("10" plotted modules '1' and '0'), an unknown module or none: an empty panel
    for modules in ("10", ["nosuch"], []):
        with pytest.raises(ampkit.ArgumentError, match="`modules` must be a list of the modules"):
            loc.plot(str(tmp_path / "p.png"), modules=modules)
    assert not (tmp_path / "p.png").exists()


# -- suggest_policy --------------------------------------------------------------------------

def test_suggest_policy_keeps_the_forward_overflow_in_float32():
    model = _forward_overflow_model()
    before = [p.clone() for p in model.parameters()]
    suggestion = ampkit.suggest_policy(model, [X, X * 2])
    # Scale(1e5) overflows (not layer 2 or the ReLU, which pass its inf on); kept in float32
    # it hands 1e5-sized float32 values to layer 2, which (autocast casting them to float16)
    # overflows in the next round; its ReLU then gets float32.
    assert suggestion.rules == {"1": torch.float32, "2": torch.float32}
    assert suggestion.rounds == 3
    assert suggestion.reasons["1"] == ["output held 46 inf and 0 NaN in float16"]
    assert "output held" in suggestion.reasons["2"][0]
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with ampkit.precision_policy(model, suggestion.rules):
        with ampkit.overflow_locator(model) as loc:
            with torch.no_grad(), ampkit.autocast("cpu", dtype=torch.float16):
                model(X)
    assert loc.first_nonfinite()[0]["forward"] is None


def _guide_data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    x[:, 3] *= 300
    return x, torch.randn(64, 1, generator=g)


def _guide_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 1))


def _mse(out, target):
    return torch.nn.functional.mse_loss(out.float(), target)


def test_suggest_policy_on_the_guides_model_ends_the_skips():
    x, y = _guide_data()
    model = _guide_model()
    grads = [torch.full_like(p, 7.0) for p in model.parameters()]
    for p, g in zip(model.parameters(), grads):
        p.grad = g
    suggestion = ampkit.suggest_policy(model, [(x, y)], loss_fn=_mse)
    assert suggestion.rules == {"0": torch.float32, "2": torch.float32, "4": torch.float32}
    assert all(any("parameters' gradients (loss scale 65536) held" in w for w in why)
               for why in suggestion.reasons.values()), suggestion.reasons
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))  # put back
    for p in model.parameters():
        p.grad = None
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    scaler = ampkit.GradScaler("cpu")
    with ampkit.precision_policy(model, suggestion.rules):
        for _ in range(4):
            opt.zero_grad()
            with ampkit.autocast("cpu", dtype=torch.float16):
                loss = _mse(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            assert not scaler.step_was_skipped(opt)
    assert scaler.stats()["skipped_steps"] == 0


def test_suggest_policy_bad_input():
    model = _guide_model()
    with pytest.raises(ampkit.ArgumentError, match="`dtype` must be torch.float16"):
        ampkit.suggest_policy(model, [X], dtype=torch.float32)
    with pytest.raises(ampkit.ArgumentError, match="`batches` is empty"):
        ampkit.suggest_policy(model, [])
    with pytest.raises(ampkit.ArgumentError, match="pair"):
        ampkit.suggest_policy(model, [X], loss_fn=_mse)
    with pytest.raises(ampkit.ArgumentTypeError, match="`model` must be"):
        ampkit.suggest_policy("model", [X])
    # each of these measured nothing, or measured wrongly, and returned a suggestion
    with pytest.raises(ampkit.ArgumentTypeError, match="got a tensor; give \\[x\\]"):
        ampkit.suggest_policy(model, X)  # was split into its rows, one batch each
    for rounds in (0, -3, 1.5, "4", True):
        with pytest.raises(ampkit.ArgumentError, match="`max_rounds` must be a whole number"):
            ampkit.suggest_policy(model, [X], max_rounds=rounds)
    for margin in (float("nan"), -1, "1", float("inf")):
        with pytest.raises(ampkit.ArgumentError, match="`margin` must be a finite number >= 0"):
            ampkit.suggest_policy(model, [X], margin=margin)
    for scale in (0, -2.0, float("nan"), "x"):
        with pytest.raises(ampkit.ArgumentError, match="`loss_scale` must be a finite number > 0"):
            ampkit.suggest_policy(model, [(X, X[:, :1])], loss_fn=_mse, loss_scale=scale)
    if not torch.cuda.is_available():  # autocast would run disabled: nothing measured in float16
        with pytest.raises(ampkit.ArgumentError, match="`device_type` 'cuda' is one autocast"):
            ampkit.suggest_policy(model, [X], device_type="cuda")
    # margin 0 is a rule of its own: only values beyond float16's largest number
    assert ampkit.suggest_policy(model, [_guide_data()[0]], margin=0).rounds >= 1


@pytest.mark.parametrize("module", ["ampkit.precision_policy", "ampkit.overflow_locator"])
def test_the_documented_examples_run(module):
    import doctest
    import sys

    result = doctest.testmod(sys.modules[module], optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
