"""Error parity, Python's half: the misuse cases of runner.R's misuse_cases(), same names."""
import ampkit
import torch


def _setup():
    torch.manual_seed(0)
    lin = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    s = ampkit.GradScaler("cpu")
    s.scale(lin(torch.ones(1, 2)).sum()).backward()
    return opt, s


def _unscale_twice():
    opt, s = _setup(); s.unscale_(opt); s.unscale_(opt)


def _step_twice():
    opt, s = _setup(); s.step(opt); s.step(opt)


def _update_without_step():
    opt, s = _setup(); s.update()


def _new_scale_non_number():
    opt, s = _setup(); s.step(opt); s.update(new_scale="x")


def _autocast(**kw):
    with ampkit.autocast(**kw):
        pass


CASES = {
    "unscale_twice": _unscale_twice,
    "step_twice": _step_twice,
    "update_without_step": _update_without_step,
    "load_empty_state": lambda: ampkit.GradScaler("cpu").load_state_dict({}),
    "growth_factor_le_1": lambda: ampkit.GradScaler("cpu", growth_factor=0.5),
    "backoff_factor_ge_1": lambda: ampkit.GradScaler("cpu", backoff_factor=2.0),
    "growth_interval_0": lambda: ampkit.GradScaler("cpu", growth_interval=0),
    "unknown_device": lambda: ampkit.GradScaler("nodevice"),
    "autocast_unknown_device": lambda: _autocast(device_type="nodevice"),
    "unsupported_dtype": lambda: _autocast(device_type="cpu", dtype=torch.int32),
    "scale_non_tensor": lambda: ampkit.GradScaler("cpu").scale("a"),
    "new_scale_non_number": _new_scale_non_number,
}


def run_misuse():
    import warnings
    out = {}
    for name, case in CASES.items():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                case()
                out[name] = f"<warning: {seen[0].message}>" if seen else "<no error>"
            except Exception as e:  # noqa: BLE001
                out[name] = f"{type(e).__name__}: {e}"
    return out
