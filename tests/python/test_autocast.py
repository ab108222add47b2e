"""ampkit.autocast against torch.autocast, the reference, on the CPU."""

import threading

import ampkit
import pytest
import torch
import torch.nn.functional as F

LOWER = [torch.bfloat16, torch.float16]


def _state():
    return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
            torch.is_autocast_cache_enabled())


def _ops():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 8, generator=g)
    img = torch.randn(2, 3, 8, 8, generator=g)
    w = torch.randn(4, 3, 3, 3, generator=g)
    batch = torch.randn(2, 8, 8, generator=g)
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
@pytest.mark.parametrize("op", list(_ops()))
def test_output_dtype_and_values_equal_torch(op, dtype):
    fn = _ops()[op]
    with torch.autocast("cpu", dtype=dtype):
        expected = fn()
    with ampkit.autocast("cpu", dtype=dtype):
        actual = fn()
    assert actual.dtype == expected.dtype
    assert torch.equal(actual, expected)


def test_lower_precision_ops_are_lower_and_reductions_float32():
    ops = _ops()
    with ampkit.autocast("cpu", dtype=torch.bfloat16):
        lower = ("mm", "linear", "conv2d", "bmm")
        assert {name: ops[name]().dtype for name in lower} == dict.fromkeys(lower, torch.bfloat16)
        assert ops["mse_loss"]().dtype == torch.float32  # on CPU's float32 list


def test_sets_the_state_torch_reads():
    with ampkit.autocast("cpu", dtype=torch.float16, cache_enabled=False):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.float16
        assert not torch.is_autocast_cache_enabled()
        assert ampkit.is_autocast_enabled("cpu")
        assert ampkit.get_autocast_dtype("cpu") == torch.float16
    assert not ampkit.is_autocast_enabled("cpu")


def test_unset_dtype_and_cache_mean_current_values():
    with torch.autocast("cpu", dtype=torch.float16, cache_enabled=False):
        inner = ampkit.autocast("cpu")
        assert inner.fast_dtype == torch.float16
        assert inner.cache_enabled is False


@pytest.mark.parametrize("outer_lib,inner_lib",
                         [(torch, ampkit), (ampkit, torch), (ampkit, ampkit)])
def test_nesting_with_torch_in_either_order(outer_lib, inner_lib):
    states = []
    with outer_lib.autocast("cpu", dtype=torch.bfloat16):
        states.append(_state())
        with inner_lib.autocast("cpu", enabled=False):
            states.append(_state())
            with outer_lib.autocast("cpu", dtype=torch.float16, cache_enabled=False):
                states.append(_state())
            states.append(_state())
        states.append(_state())
    assert states == [
        (True, torch.bfloat16, True),
        (False, torch.bfloat16, True),
        (True, torch.float16, False),
        (False, torch.bfloat16, True),
        (True, torch.bfloat16, True),
    ]


def test_inner_disabled_region_runs_float32():
    a = torch.randn(4, 4)
    with ampkit.autocast("cpu"):
        with ampkit.autocast("cpu", enabled=False):
            assert torch.mm(a, a).dtype == torch.float32
        assert torch.mm(a, a).dtype == torch.bfloat16


def test_exception_in_body_restores_state():
    before = _state()
    with pytest.raises(ZeroDivisionError):
        with ampkit.autocast("cpu", dtype=torch.float16, cache_enabled=False):
            _ = 1 / 0
    assert _state() == before


def test_decorator_and_reentrant_instance():
    region = ampkit.autocast("cpu", dtype=torch.float16)

    @region
    def depth(n):
        assert torch.get_autocast_dtype("cpu") == torch.float16
        return torch.is_autocast_enabled("cpu") and (n == 0 or depth(n - 1))

    assert depth(3)
    assert not torch.is_autocast_enabled("cpu")
    with region:
        with region:  # the same instance twice: each level restores its own state
            assert torch.is_autocast_enabled("cpu")
        assert torch.is_autocast_enabled("cpu")
    assert not torch.is_autocast_enabled("cpu")


def test_decorator_rejects_non_callable():
    with pytest.raises(TypeError, match="callable"):
        ampkit.autocast("cpu")(42)


def test_custom_fwd_bwd_inside_region():
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            assert not torch.is_autocast_enabled("cpu")  # custom_fwd with cast_inputs disables it
            return x * x

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.randn(3, requires_grad=True)
    with ampkit.autocast("cpu"):
        y = Square.apply(x.to(torch.bfloat16))
        assert torch.is_autocast_enabled("cpu")
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad is not None


def test_threads_do_not_see_each_others_state():
    barrier = threading.Barrier(2)
    seen = {}

    def worker(name, dtype, enabled):
        with ampkit.autocast("cpu", dtype=dtype, enabled=enabled):
            barrier.wait()  # both regions are open at once
            seen[name] = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
            barrier.wait()

    threads = [threading.Thread(target=worker, args=("a", torch.float16, True)),
               threading.Thread(target=worker, args=("b", torch.bfloat16, False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": (True, torch.float16), "b": (False, torch.bfloat16)}
    assert not torch.is_autocast_enabled("cpu")


def test_unsupported_cpu_dtype_warns_and_disables_like_torch():
    with pytest.warns(UserWarning) as ours:
        region = ampkit.autocast("cpu", dtype=torch.float64)
    with pytest.warns(UserWarning) as theirs:
        torch.autocast("cpu", dtype=torch.float64)
    assert str(ours[0].message) == str(theirs[0].message)
    assert ours[0].filename == __file__  # attributed to the caller's line
    with region:
        assert not torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.float64  # as torch.autocast does


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_warns_and_disables():
    with pytest.warns(UserWarning, match="Disabling autocast"):
        region = ampkit.autocast("cuda")
    with region:
        assert not torch.is_autocast_enabled("cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_float16_matches_torch():
    a = torch.randn(16, 16, device="cuda")
    with torch.autocast("cuda"):
        expected = torch.mm(a, a)
    with ampkit.autocast("cuda"):
        actual = torch.mm(a, a)
    assert actual.dtype == torch.float16 and torch.equal(actual, expected)


@pytest.mark.parametrize("args,error,match", [
    (("tpu9",), ValueError, "`device_type` must be a device type"),
    (("meta",), ValueError, "unsupported autocast device_type 'meta'"),
    ((3,), TypeError, "`device_type` must be a str"),
    (("cpu", "bfloat16"), TypeError, "`dtype` must be a torch.dtype"),
    (("cpu", None, "yes"), TypeError, "`enabled` must be a bool"),
    (("cpu", None, True, "no"), TypeError, "`cache_enabled` must be a bool or None"),
])
def test_bad_arguments_name_the_argument(args, error, match):
    with pytest.raises(error, match=match):
        ampkit.autocast(*args)


def test_exit_out_of_order_is_refused_and_changes_nothing():
    outer = ampkit.autocast("cpu", dtype=torch.float16)
    inner = ampkit.autocast("cpu", dtype=torch.bfloat16)
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(RuntimeError, match="innermost first"):
        outer.__exit__(None, None, None)
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="not open"):
        outer.__exit__(None, None, None)


def test_public_api_is_documented():
    for name in ampkit.__all__:
        obj = getattr(ampkit, name)
        assert obj.__doc__ and ("Example" in obj.__doc__ or name.endswith("Error")), name
