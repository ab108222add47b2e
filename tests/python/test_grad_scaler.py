"""ampkit.GradScaler against torch.amp.GradScaler, the reference, on each device (the `device`
fixture of tests/conftest.py: cpu, and cuda where there is CUDA).

The training scenarios are the JSON files of tests/parity/scenarios, trained by the Python
runner of the parity suite (tests/parity/runners.py) with each library and compared step by
step: loss, scale, growth tracker, skipped or not, and every parameter.
"""

import pathlib
import pickle

import ampkit
import parity_models as pm
import pytest
import runners
import torch
from devices import requires_cuda

SCENARIO_DIR = pathlib.Path(pm.__file__).resolve().parent / "scenarios"
SPECS = [pm.load_scenario(str(p)) for p in sorted(SCENARIO_DIR.glob("*.json"))]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["name"])
def test_scenario_is_bit_identical_to_torch_amp_at_every_step(spec, device):
    ours = runners.run(spec, "ampkit", device=device)
    theirs = runners.run(spec, "torch.amp", device=device)
    difference = pm.first_difference(theirs, ours)
    assert difference is None, difference
    assert len(ours["loss"]) == spec["steps"]
    if spec["inject"] and spec["scaler"]:
        assert any(ours["skipped"]), "an injected inf/NaN must skip a step"


@pytest.mark.parametrize("direction", ["ampkit_to_torch", "torch_to_ampkit"])
@pytest.mark.parametrize("spec", [s for s in SPECS if s["checkpoint_at"] is not None],
                         ids=lambda s: s["name"])
def test_checkpoint_interchange_mid_training(spec, direction, tmp_path, device):
    """k steps with one library, torch.save of model, optimizers and scaler state, torch.load
    with weights_only=True, the rest with the other: the same as torch.amp uninterrupted."""
    k = spec["checkpoint_at"]
    first, second = (("ampkit", "torch.amp") if direction == "ampkit_to_torch"
                     else ("torch.amp", "ampkit"))
    ckpt = str(tmp_path / "ckpt.pt")
    head = runners.run(spec, first, 0, k, save_to=ckpt, device=device)
    tail = runners.run(spec, second, k, resume_from=ckpt, device=device)
    joined = {key: head[key] + tail[key] for key in pm.RECORD_KEYS}
    difference = pm.first_difference(runners.run(spec, "torch.amp", device=device), joined)
    assert difference is None, difference


def test_state_dict_has_torch_keys_and_values(device):
    ours = ampkit.GradScaler(device, init_scale=3.0, growth_interval=7)
    theirs = torch.amp.GradScaler(device, init_scale=3.0, growth_interval=7)
    assert list(ours.state_dict())[:5] == list(theirs.state_dict())
    assert pm.torch_amp_state(ours.state_dict()) == theirs.state_dict()
    for s in (ours, theirs):
        s.scale(torch.ones((), device=device))
    assert pm.torch_amp_state(ours.state_dict()) == theirs.state_dict()


def _one_iteration(scaler, opt, param):
    opt.zero_grad()
    scaler.scale((param * 2).sum()).backward()


def _misuse_cases():
    """Each case drives a scaler into one misuse; the same exception type must come out."""
    def unscale_twice(s, o, p):
        _one_iteration(s, o, p); s.unscale_(o); s.unscale_(o)

    def unscale_after_step(s, o, p):
        _one_iteration(s, o, p); s.step(o); s.unscale_(o)

    def step_twice(s, o, p):
        _one_iteration(s, o, p); s.step(o); s.step(o)

    def update_without_step(s, o, p):
        _one_iteration(s, o, p); s.update()

    def step_before_scale(s, o, p):
        s.step(o)

    def closure(s, o, p):
        _one_iteration(s, o, p); s.step(o, closure=lambda: 0.0)

    def load_empty(s, o, p):
        s.load_state_dict({})

    def scale_non_tensor(s, o, p):
        s.scale([torch.ones((), device=p.device), 3])

    def unscale_fp16_grads(s, o, p):
        _one_iteration(s, o, p); p.grad = p.grad.half(); s.unscale_(o)

    def no_gradients(s, o, p):
        s.scale(torch.ones((), device=p.device)); o.zero_grad(); s.step(o)

    return [unscale_twice, unscale_after_step, step_twice, update_without_step, step_before_scale,
            closure, load_empty, scale_non_tensor, unscale_fp16_grads, no_gradients]


@pytest.mark.parametrize("misuse", _misuse_cases(), ids=lambda f: f.__name__)
def test_misuse_raises_the_exception_type_torch_raises(misuse, device):
    raised = []
    for cls in (torch.amp.GradScaler, ampkit.GradScaler):
        param = torch.nn.Parameter(torch.ones(3, device=device))
        opt = torch.optim.SGD([param], lr=0.1)
        with pytest.raises(Exception) as info:
            misuse(cls(device), opt, param)
        raised.append(info.value)
    theirs, ours = raised
    assert isinstance(ours, type(theirs)), f"torch raised {type(theirs)}, ampkit {type(ours)}"


def test_step_returns_optimizer_value_or_none_when_skipped(device):
    param = torch.nn.Parameter(torch.ones(2, device=device))
    opt = torch.optim.SGD([param], lr=0.1)
    opt.step = lambda *a, **k: "stepped"
    scaler = ampkit.GradScaler(device)
    _one_iteration(scaler, opt, param)
    assert scaler.step(opt) == "stepped"
    scaler.update()
    _one_iteration(scaler, opt, param)
    param.grad[0] = float("inf")
    assert scaler.step(opt) is None


def test_one_host_read_per_step_and_none_for_fused(device):
    for fused, reads_per_step in ((False, 1), (True, 0)):
        model = torch.nn.Linear(4, 4, device=device)
        opt = torch.optim.Adam(model.parameters(), fused=fused)
        scaler = ampkit.GradScaler(device)
        for _ in range(5):
            opt.zero_grad()
            scaler.scale(model(torch.randn(2, 4, device=device)).sum()).backward()
            scaler.step(opt)
            scaler.update()
        assert scaler._core.host_reads == 5 * reads_per_step


def test_param_groups_change_is_seen(device):
    a = torch.nn.Parameter(torch.ones(2, device=device))
    b = torch.nn.Parameter(torch.ones(2, device=device))
    opt = torch.optim.SGD([a], lr=1.0)
    scaler = ampkit.GradScaler(device, init_scale=4.0)
    for step in range(2):
        if step == 1:
            opt.add_param_group({"params": [b]})
        opt.zero_grad()
        scaler.scale((a + b).sum()).backward()
        scaler.step(opt)
        scaler.update()
    # b joined on step 1: its gradient was unscaled (1, not 4) and it stepped once.
    assert torch.equal(b.detach().cpu(), torch.zeros(2))
    assert torch.equal(a.detach().cpu(), -torch.ones(2))


def test_pickle_between_iterations_and_not_within(device):
    scaler = ampkit.GradScaler(device, init_scale=16.0, growth_interval=3)
    param = torch.nn.Parameter(torch.ones(2, device=device))
    opt = torch.optim.SGD([param], lr=0.1)
    _one_iteration(scaler, opt, param)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="pickled"):
        pickle.dumps(scaler)
    scaler.update()
    clone = pickle.loads(pickle.dumps(scaler))
    assert clone.state_dict() == scaler.state_dict()


def test_disabled_scaler_is_transparent(device):
    scaler = ampkit.GradScaler(device, enabled=False)
    loss = torch.ones((), device=device)
    assert scaler.scale(loss) is loss
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    param = torch.nn.Parameter(torch.ones(1, device=device))
    opt = torch.optim.SGD([param], lr=1.0)
    param.grad = torch.ones(1, device=device)
    scaler.step(opt)
    assert torch.equal(param.detach().cpu(), torch.zeros(1))


# CPU-only by nature: what "cuda" does where there is no CUDA.
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = ampkit.GradScaler("cuda")
    assert not scaler.is_enabled()


def test_update_with_new_scale_float_and_tensor(device):
    scaler = ampkit.GradScaler(device)
    scaler.scale(torch.ones((), device=device))
    scaler.update(1024.0)
    assert scaler.get_scale() == 1024.0
    scaler.update(torch.tensor([512.0], device=device))
    assert scaler.get_scale() == 512.0
    with pytest.raises(ValueError, match="`new_scale`"):
        scaler.update(torch.ones(2, device=device))


def test_setters_and_getters(device):
    scaler = ampkit.GradScaler(device)
    scaler.set_growth_factor(3.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(5)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == (3.0, 0.25, 5)
    with pytest.raises(ValueError, match="`new_factor` must be a finite number > 1"):
        scaler.set_growth_factor(1.0)
    assert scaler.get_growth_factor() == 3.0


@requires_cuda
def test_cuda_float16_training_matches_torch():
    def run(cls):
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 64).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = cls("cuda", growth_interval=2)
        for i in range(6):
            opt.zero_grad()
            with torch.autocast("cuda"):
                loss = model(torch.randn(8, 64, device="cuda")).float().pow(2).mean()
            scaler.scale(loss).backward()
            if i == 3:
                model.weight.grad[0, 0] = float("inf")
            scaler.step(opt)
            scaler.update()
        params = [p.detach().cpu() for p in model.parameters()]
        return pm.torch_amp_state(scaler.state_dict()), params
    a, b = run(ampkit.GradScaler), run(torch.amp.GradScaler)
    assert a[0] == b[0] and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))


def test_optimizer_without_weakref_support_keeps_its_stage(device):
    class SlotOptimizer:  # a duck-typed optimizer that cannot be weakly referenced
        __slots__ = ("param_groups", "steps")

        def __init__(self, params):
            self.param_groups = [{"params": list(params)}]
            self.steps = 0

        def step(self):
            self.steps += 1

    param = torch.nn.Parameter(torch.ones(2, device=device))
    opt = SlotOptimizer([param])
    scaler = ampkit.GradScaler(device, init_scale=4.0)
    scaler.scale(param.sum()).backward()
    scaler.unscale_(opt)
    scaler.step(opt)  # must not unscale a second time
    assert torch.equal(param.grad.cpu(), torch.ones(2)) and opt.steps == 1
