"""ampkit.autocast against torch.autocast, the reference, on each device (the `device` fixture of
tests/conftest.py: cpu, and cuda where there is CUDA)."""

import threading
import warnings

import ampkit
import pytest
import torch
import torch.nn.functional as F
from devices import AUTOCAST_DTYPE

LOWER = [torch.bfloat16, torch.float16]
OPS = ["mm", "linear", "conv2d", "bmm", "sum", "softmax", "mse_loss", "layer_norm"]


def _state(device="cpu"):
    return (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device),
            torch.is_autocast_cache_enabled())


def _ops(device="cpu"):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 8, generator=g).to(device)
    img = torch.randn(2, 3, 8, 8, generator=g).to(device)
    w = torch.randn(4, 3, 3, 3, generator=g).to(device)
    batch = torch.randn(2, 8, 8, generator=g).to(device)
    return {
        "mm": lambda: torch.mm(a, a),
        "linear": lambda: F.linear(a, a),
        "conv2d": lambda: F.conv2d(img, w),
        "bmm": lambda: torch.bmm(batch, batch),
        "sum": lambda: torch.mm(a, a).sum(),
        "softmax": lambda: F.softmax(torch.mm(a, a), dim=-1),
        "mse_loss": lambda: F.mse_loss(torch.mm(a, a), a),
        "layer_norm": lambda: F.layer_norm(torch.mm(a, a), (8,)),
    }


@pytest.mark.parametrize("dtype", LOWER)
@pytest.mark.parametrize("op", OPS)
def test_output_dtype_and_values_equal_torch(op, dtype, device):
    fn = _ops(device)[op]
    with torch.autocast(device, dtype=dtype):
        expected = fn()
    with ampkit.autocast(device, dtype=dtype):
        actual = fn()
    assert actual.dtype == expected.dtype
    assert torch.equal(actual, expected)


def test_ops_list_is_the_ops_made():
    assert list(_ops()) == OPS


def test_lower_precision_ops_are_lower_and_reductions_float32(device):
    ops = _ops(device)
    with ampkit.autocast(device, dtype=torch.bfloat16):
        lower = ("mm", "linear", "conv2d", "bmm")
        assert {name: ops[name]().dtype for name in lower} == dict.fromkeys(lower, torch.bfloat16)
        assert ops["mse_loss"]().dtype == torch.float32  # on the float32 list (CPU and CUDA)


def test_sets_the_state_torch_reads(device):
    with ampkit.autocast(device, dtype=torch.float16, cache_enabled=False):
        assert torch.is_autocast_enabled(device)
        assert torch.get_autocast_dtype(device) == torch.float16
        assert not torch.is_autocast_cache_enabled()
        assert ampkit.is_autocast_enabled(device)
        assert ampkit.get_autocast_dtype(device) == torch.float16
    assert not ampkit.is_autocast_enabled(device)


def test_unset_dtype_and_cache_mean_current_values(device):
    with torch.autocast(device, dtype=torch.float16, cache_enabled=False):
        inner = ampkit.autocast(device)
        assert inner.fast_dtype == torch.float16
        assert inner.cache_enabled is False


@pytest.mark.parametrize("outer_lib,inner_lib",
                         [(torch, ampkit), (ampkit, torch), (ampkit, ampkit)])
def test_nesting_with_torch_in_either_order(outer_lib, inner_lib, device):
    states = []
    with outer_lib.autocast(device, dtype=torch.bfloat16):
        states.append(_state(device))
        with inner_lib.autocast(device, enabled=False):
            states.append(_state(device))
            with outer_lib.autocast(device, dtype=torch.float16, cache_enabled=False):
                states.append(_state(device))
            states.append(_state(device))
        states.append(_state(device))
    assert states == [
        (True, torch.bfloat16, True),
        (False, torch.bfloat16, True),
        (True, torch.float16, False),
        (False, torch.bfloat16, True),
        (True, torch.bfloat16, True),
    ]


def test_inner_disabled_region_runs_float32(device):
    a = torch.randn(4, 4, device=device)
    with ampkit.autocast(device):
        with ampkit.autocast(device, enabled=False):
            assert torch.mm(a, a).dtype == torch.float32
        assert torch.mm(a, a).dtype == AUTOCAST_DTYPE[device]  # the device's default


def test_exception_in_body_restores_state(device):
    before = _state(device)
    with pytest.raises(ZeroDivisionError):
        with ampkit.autocast(device, dtype=torch.float16, cache_enabled=False):
            _ = 1 / 0
    assert _state(device) == before


@pytest.mark.parametrize("inner_lib", [ampkit, torch])
def test_exception_closes_regions_left_open_inside(inner_lib, device):
    # torch.autocast restores the state it found whatever was left open inside; so does ampkit's
    # region when an exception leaves it, closing the inner region and keeping the exception.
    before = _state(device)
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    inner = inner_lib.autocast(device, dtype=torch.bfloat16, cache_enabled=False)
    with pytest.raises(ZeroDivisionError):
        with ampkit.autocast(device, dtype=torch.float16):
            inner.__enter__()
            _ = 1 / 0
    assert _state(device) == before
    assert torch.autocast_increment_nesting() - 1 == depth
    torch.autocast_decrement_nesting()
    if inner_lib is ampkit:  # its region was closed with the outer one: exiting it says so
        with pytest.raises(RuntimeError, match="closed with a region around it"):
            inner.__exit__(None, None, None)
        with pytest.raises(RuntimeError, match="not open"):
            inner.__exit__(None, None, None)


def test_decorated_function_raising_closes_regions_left_open_inside(device):
    before = _state(device)
    inner = ampkit.autocast(device, dtype=torch.bfloat16)

    @ampkit.autocast(device, dtype=torch.float16)
    def leaves_a_region_open():
        inner.__enter__()
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        leaves_a_region_open()
    assert _state(device) == before


def test_decorator_and_reentrant_instance(device):
    region = ampkit.autocast(device, dtype=torch.float16)

    @region
    def depth(n):
        assert torch.get_autocast_dtype(device) == torch.float16
        return torch.is_autocast_enabled(device) and (n == 0 or depth(n - 1))

    assert depth(3)
    assert not torch.is_autocast_enabled(device)
    with region:
        with region:  # the same instance twice: each level restores its own state
            assert torch.is_autocast_enabled(device)
        assert torch.is_autocast_enabled(device)
    assert not torch.is_autocast_enabled(device)


def test_decorator_rejects_non_callable():
    with pytest.raises(TypeError, match="callable"):
        ampkit.autocast("cpu")(42)


def test_custom_fwd_bwd_inside_region(device):
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type=device, cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            assert not torch.is_autocast_enabled(device)  # custom_fwd with cast_inputs disables it
            return x * x

        @staticmethod
        @torch.amp.custom_bwd(device_type=device)
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.randn(3, device=device, requires_grad=True)
    with ampkit.autocast(device):
        y = Square.apply(x.to(torch.bfloat16))
        assert torch.is_autocast_enabled(device)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad is not None


def test_threads_do_not_see_each_others_state(device):
    barrier = threading.Barrier(2)
    seen = {}

    def worker(name, dtype, enabled):
        with ampkit.autocast(device, dtype=dtype, enabled=enabled):
            barrier.wait()  # both regions are open at once
            seen[name] = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            barrier.wait()

    threads = [threading.Thread(target=worker, args=("a", torch.float16, True)),
               threading.Thread(target=worker, args=("b", torch.bfloat16, False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": (True, torch.float16), "b": (False, torch.bfloat16)}
    assert not torch.is_autocast_enabled(device)


def test_an_unsupported_dtype_is_treated_as_torch_treats_it(device):
    # torch.autocast's rule: on the CPU a dtype other than bfloat16/float16 warns and disables
    # the region; on CUDA any dtype is taken as given. The dtype is installed either way.
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        region = ampkit.autocast(device, dtype=torch.float64)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        oracle = torch.autocast(device, dtype=torch.float64)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert all(w.filename == __file__ for w in ours)  # attributed to the caller's line
    assert (len(ours) == 1) == (device == "cpu")
    seen = []
    for r in (region, oracle):
        with r:
            seen.append((torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)))
    assert seen[0] == seen[1] == (device != "cpu", torch.float64)


# CPU-only by nature: what "cuda" does where there is no CUDA. (On CUDA, float16 against
# torch.autocast is test_output_dtype_and_values_equal_torch[...-cuda].)
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_warns_and_disables():
    with pytest.warns(UserWarning, match="Disabling autocast"):
        region = ampkit.autocast("cuda")
    with region:
        assert not torch.is_autocast_enabled("cuda")


@pytest.mark.parametrize("args,error,match", [
    (("tpu9",), ValueError, "`device_type` must be a device type"),
    (("meta",), ValueError, "unsupported autocast device_type 'meta'"),
    (("meta",), RuntimeError, "unsupported"),  # torch's type: `except RuntimeError` catches it
    ((3,), TypeError, "`device_type` must be a str"),
    (("cpu", "bfloat16"), TypeError, "`dtype` must be a torch.dtype"),
    (("cpu", None, "yes"), TypeError, "`enabled` must be a bool"),
    (("cpu", None, True, "no"), TypeError, "`cache_enabled` must be a bool or None"),
])
def test_bad_arguments_name_the_argument(args, error, match):
    with pytest.raises(error, match=match):
        ampkit.autocast(*args)


def test_exit_out_of_order_is_refused_and_changes_nothing(device):
    outer = ampkit.autocast(device, dtype=torch.float16)
    inner = ampkit.autocast(device, dtype=torch.bfloat16)
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(RuntimeError, match="innermost first"):
        outer.__exit__(None, None, None)
    assert torch.get_autocast_dtype(device) == torch.bfloat16
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="not open"):
        outer.__exit__(None, None, None)


def test_public_api_is_documented():
    for name in ampkit.__all__:
        obj = getattr(ampkit, name)
        assert obj.__doc__ and ("Example" in obj.__doc__ or name.endswith("Error")), name
