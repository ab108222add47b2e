"""ampkit.autocast_audit: small models whose answer is known by hand, results unchanged, casts
told apart from the user's, forward and backward, nesting, the decorator, bad input, and the
benchmark's casts-per-step columns. Each test that makes tensors runs once per device (the
`device` fixture of tests/conftest.py: cpu, and cuda where there is CUDA)."""

import threading

import ampkit
import pytest
import torch
import torch.nn.functional as F
from ampkit.bench import report, training
from ampkit.bench.cli import SUITES_DIR, load_suites
from ampkit.bench.workloads import build
from devices import enter_thread, requires_cuda

BF16, FP32 = 2, 4  # bytes per element


def _model(device="cpu"):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(),
                               torch.nn.Linear(3, 2)).to(device)


def _data(device="cpu"):
    g = torch.Generator().manual_seed(1)
    return torch.randn(5, 4, generator=g).to(device), torch.randn(5, 2, generator=g).to(device)


def _rows(summary, **match):
    return [r for r in summary["ops"] if all(r[k] == v for k, v in match.items())]


def _step(model, x, y, device="cpu", region=None):
    with (region() if region else ampkit.autocast(device, dtype=torch.bfloat16)):
        loss = F.mse_loss(model(x), y)
    loss.backward()
    return loss


def _no_modes_left():
    return (torch._C._len_torch_function_stack() == 0
            and torch._C._len_torch_dispatch_stack() == 0)


# -- the known answers ---------------------------------------------------------------------------


def test_linear_layers_run_bfloat16_matmuls_and_mse_loss_in_float32(device):
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast_audit() as audit:
        _step(model, x, y, device)
    s = audit.summary()
    addmm = _rows(s, op="addmm")
    assert len(addmm) == 1 and addmm[0]["calls"] == 2
    assert addmm[0]["in_dtypes"] == ["bfloat16"] * 3 and addmm[0]["out_dtype"] == "bfloat16"
    assert addmm[0]["autocast"] is True and addmm[0]["backward"] is False
    (mse,) = _rows(s, op="mse_loss")
    assert mse["in_dtypes"] == ["float32", "float32"] and mse["out_dtype"] == "float32"
    assert mse["autocast"] is True
    # Backward runs in the dtypes autocast chose: bfloat16 products (two weight gradients,
    # one input gradient: x needs none), outside the region.
    (mm,) = _rows(s, op="mm", backward=True)
    assert mm["in_dtypes"] == ["bfloat16", "bfloat16"] and mm["calls"] == 3
    assert mm["autocast"] is False
    (mse_bwd,) = _rows(s, op="mse_loss_backward")
    assert mse_bwd["out_dtype"] == "float32" and mse_bwd["backward"] is True
    assert s["fp32_matmuls_outside_autocast"] == 0
    assert s["user_casts"] == 0


def test_casts_and_bytes_match_a_count_by_hand(device):
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast_audit() as audit:
        _step(model, x, y, device)
    s = audit.summary()
    w1, b1, w2, b2 = (p.numel() for p in model.parameters())  # 12, 3, 6, 2
    out = 5 * 2
    # forward: x, W1, b1, W2, b2 to bfloat16 (the ReLU's output already is); the output back
    # to float32 for mse_loss.
    forward = [x.numel() * BF16, w1 * BF16, b1 * BF16, w2 * BF16, b2 * BF16, out * FP32]
    # backward: the loss's gradient to bfloat16; each parameter's gradient back to float32.
    backward = [out * BF16, w1 * FP32, b1 * FP32, w2 * FP32, b2 * FP32]
    assert s["casts"] == len(forward) + len(backward) == 11
    assert s["cast_bytes"] == sum(forward) + sum(backward) == 238
    casts = _rows(s, op="_to_copy", cast="autocast")
    assert sum(r["calls"] for r in casts if not r["backward"]) == len(forward)
    assert sum(r["bytes"] for r in casts if not r["backward"]) == sum(forward)
    assert sum(r["calls"] for r in casts if r["backward"]) == len(backward)
    assert {(r["in_dtypes"][0], r["out_dtype"], r["backward"]) for r in casts} == {
        ("float32", "bfloat16", False), ("bfloat16", "float32", False),
        ("float32", "bfloat16", True), ("bfloat16", "float32", True)}
    assert all(r["autocast"] for r in casts if not r["backward"])


@pytest.mark.parametrize("cache, casts, nbytes", [(True, 14, 338), (False, 22, 476)])
def test_the_weight_cast_cache_casts_weights_once_per_region(cache, casts, nbytes, device):
    # Two forward passes in one region: x and the output are cast twice; the weights once
    # with the cache (their backward casts once too, after their gradients add up in
    # bfloat16), twice without it.
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast_audit() as audit:
        with ampkit.autocast(device, dtype=torch.bfloat16, cache_enabled=cache):
            loss = F.mse_loss(model(x), y) + F.mse_loss(model(x), y)
        loss.backward()
    s = audit.summary()
    assert (s["casts"], s["cast_bytes"]) == (casts, nbytes)


def test_float32_matmuls_outside_autocast_are_counted_forward_only(device):
    model, (x, y) = _model(device), _data(device)
    a = torch.randn(4, 4, device=device)
    with ampkit.autocast_audit() as audit:
        _step(model, x, y, device)           # none: both products run in bfloat16
        b = a @ a                    # 1: outside any region
        with torch.autocast(device, dtype=torch.bfloat16):
            with ampkit.autocast(device, enabled=False):
                c = torch.mm(a, a)   # 2: in a region that turned autocast off
            d = torch.mm(a, a)       # bfloat16
        e = torch.mm(a.double(), a.double())  # float64: not float32
        loss = F.mse_loss(model(x), y)        # 3, 4: the model in float32, forward
        loss.backward()                       # its float32 backward products: not counted
    s = audit.summary()
    assert s["fp32_matmuls_outside_autocast"] == 4
    assert b.dtype == c.dtype == torch.float32 and d.dtype == torch.bfloat16
    assert e.dtype == torch.float64
    assert _rows(s, op="mm", backward=True, out_dtype="float32")


# -- observing changes nothing -------------------------------------------------------------------


def _train(suite, mode, audited, device, steps=3):
    w = build(suite, suite["sizes"]["tiny"], device)
    scaler = ampkit.GradScaler(device, enabled=mode == "autocast+scaler")
    region = ampkit.autocast(device, dtype=w.dtype, enabled=mode != "fp32")
    audit = ampkit.autocast_audit()
    losses = []
    for i in range(steps):
        x, y = w.inputs[i % len(w.inputs)], w.targets[i % len(w.targets)]
        if audited:
            audit.__enter__()
        try:
            with region:
                loss = w.loss_fn(w.model(x), y)
            scaler.scale(loss).backward()
            scaler.step(w.optimizer)
            scaler.update()
            w.optimizer.zero_grad()
        finally:
            if audited:
                audit.__exit__(None, None, None)
        losses.append(loss.detach())
    return [p.detach().clone() for p in w.model.parameters()], losses, audit


@pytest.mark.parametrize("mode", ["fp32", "autocast", "autocast+scaler"])
@pytest.mark.parametrize("name", ["many_params", "recipe_mlp", "transformer"])
def test_results_are_bit_identical_with_and_without_the_audit(name, mode, device):
    (suite,) = load_suites(SUITES_DIR, [name])
    params, losses, _ = _train(suite, mode, audited=False, device=device)
    params_a, losses_a, audit = _train(suite, mode, audited=True, device=device)
    assert all(torch.equal(p, q) for p, q in zip(params, params_a))
    assert all(torch.equal(a, b) for a, b in zip(losses, losses_a))
    assert _no_modes_left()
    assert (audit.summary()["casts"] > 0) == (mode != "fp32")


def test_no_state_is_left_behind_and_an_error_leaves_the_audit(device):
    x = torch.randn(3, 3, device=device)
    with pytest.raises(ValueError, match="boom"):
        with ampkit.autocast_audit() as audit:
            with ampkit.autocast(device):
                torch.mm(x, x)
                raise ValueError("boom")
    assert _no_modes_left()
    assert not torch.is_autocast_enabled(device)
    calls = audit.summary()["calls"]
    torch.mm(x, x)  # after the audit: not seen
    assert audit.summary()["calls"] == calls


# -- casts told apart ----------------------------------------------------------------------------


def test_the_users_own_casts_are_not_autocasts(device):
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast_audit() as audit:
        with ampkit.autocast(device, dtype=torch.bfloat16):
            h = x.to(torch.bfloat16)               # user: 20 elements
            out = model(h.float()).float()         # user twice: h.float(), the output
            loss = F.mse_loss(out.half().float(), y)   # user: .half() and .float()
            s16 = torch.softmax(out, -1, dtype=torch.float64)  # an explicit dtype: user
        loss.backward()
    s = audit.summary()
    assert s16.dtype == torch.float64
    user = _rows(s, cast="user")
    forward_user = sum(r["calls"] for r in user if not r["backward"])
    assert forward_user == 5 + 1  # five conversions above, and softmax's dtype=
    # The backward of the user's conversions that carry gradients (out.float(), .half(),
    # .float()) is theirs too; x needs no gradient, so neither do h and h.float().
    assert sum(r["calls"] for r in user if r["backward"]) == 3
    assert s["user_casts"] == forward_user + 3
    # autocast cast h.float() (x's float32 copy), W1, b1, W2, b2 to bfloat16; mse_loss's
    # inputs are float32 already: no cast. Backward: the four parameters' gradients.
    assert s["casts"] == 5 + 4


def test_the_backward_of_casts_made_before_the_audit_is_other(device):
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast(device, dtype=torch.bfloat16):
        loss = F.mse_loss(model(x), y)
    with ampkit.autocast_audit() as audit:
        loss.backward()
    s = audit.summary()
    other = _rows(s, op="_to_copy", cast="other", backward=True)
    assert sum(r["calls"] for r in other) == 5 and s["casts"] == s["user_casts"] == 0


# -- regions, nesting, threads, the decorator ----------------------------------------------------


@pytest.mark.parametrize("outer, inner", [("ampkit", "torch"), ("torch", "ampkit")])
def test_regions_of_ampkit_and_torch_nest(outer, inner, device):
    regions = {"ampkit": ampkit.autocast, "torch": torch.autocast}
    a = torch.randn(4, 4, device=device)
    with ampkit.autocast_audit() as audit:
        with regions[outer](device, dtype=torch.bfloat16):
            torch.mm(a, a)
            with regions[inner](device, enabled=False):
                torch.mm(a, a)
                with regions[outer](device, dtype=torch.float16):
                    torch.mm(a, a)
            torch.relu(a)
    s = audit.summary()
    mm = {(r["out_dtype"], r["autocast"]) for r in _rows(s, op="mm")}
    assert mm == {("bfloat16", True), ("float32", False), ("float16", True)}
    assert _rows(s, op="relu")[0]["autocast"] is True
    # a is cast for each argument of each autocast product (not a leaf that needs a
    # gradient: no cache)
    assert s["fp32_matmuls_outside_autocast"] == 1 and s["casts"] == 4


def test_nested_audits_each_see_everything(device):
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast_audit() as outer:
        with ampkit.autocast_audit() as inner:
            _step(model, x, y, device)
        torch.mm(x, x.T)
    o, i = outer.summary(), inner.summary()
    assert (i["casts"], i["cast_bytes"]) == (o["casts"], o["cast_bytes"]) == (11, 238)
    assert (i["fp32_matmuls_outside_autocast"], o["fp32_matmuls_outside_autocast"]) == (0, 1)


def test_one_audit_entered_twice_counts_once(device):
    model, (x, y) = _model(device), _data(device)
    audit = ampkit.autocast_audit()
    with audit:
        with audit:
            _step(model, x, y, device)
        assert not _no_modes_left()
    assert _no_modes_left()
    assert audit.summary()["casts"] == 11


def test_the_decorator_adds_up_its_calls_on_several_threads(device):
    model, (x, _) = _model(device), _data(device)
    audit = ampkit.autocast_audit()

    @audit
    def forward(x):
        with ampkit.autocast(device, dtype=torch.bfloat16):
            return model(x)

    assert forward.__name__ == "forward"
    forward(x)
    for _ in range(3):  # one after the other: each region casts the weights afresh
        t = threading.Thread(target=forward, args=(x,))
        t.start()
        t.join()
    # 5 casts per call (x, W1, b1, W2, b2), on the main thread and three others.
    assert audit.summary()["casts"] == 4 * 5
    # At once: the weight-cast cache is the process's, so a thread may find another's casts
    # there; every call's products are counted. Both regions: a region's exit clears that cache
    # under its lock without holding the GIL, so a thread whose cast holds the lock and calls
    # into Python (the audit's dispatch mode) cannot deadlock against it.
    for n, region in enumerate((torch.autocast, ampkit.autocast), start=1):

        @audit
        def concurrent_forward(x, region=region):
            with region(device, dtype=torch.bfloat16):
                return model(x)

        threads = [threading.Thread(target=concurrent_forward, args=(x,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), f"{region.__module__}: threads stuck"
        assert _rows(audit.summary(), op="addmm")[0]["calls"] == 2 * 4 * (n + 1)
    assert _no_modes_left()


def test_another_threads_ops_are_not_audited(device):
    a = torch.randn(4, 4, device=device)
    done = []

    def other_thread():
        enter_thread(device)
        torch.mm(a, a)
        done.append(True)

    with ampkit.autocast_audit() as audit:
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert done == [True]
    assert audit.summary()["calls"] == 0


def test_autograd_grad_is_a_backward_pass(device):
    w = torch.randn(3, 3, device=device, requires_grad=True)
    with ampkit.autocast_audit() as audit:
        with ampkit.autocast(device, dtype=torch.bfloat16):
            loss = torch.mm(w, w).float().sum()
        (g,) = torch.autograd.grad(loss, w)
    s = audit.summary()
    assert g.dtype == torch.float32
    assert _rows(s, op="mm", backward=True, out_dtype="bfloat16")
    # w to bfloat16 once (the cache), its gradient back to float32 once.
    assert s["casts"] == 2


# -- output --------------------------------------------------------------------------------------


def test_print_shows_a_table_costliest_first(device):
    model, (x, y) = _model(device), _data(device)
    with ampkit.autocast_audit() as audit:
        _step(model, x, y, device)
    text = str(audit)
    lines = text.splitlines()
    assert lines[0].startswith("autocast audit: ") and "autocast casts: 11 (238 B" in lines[0]
    assert lines[1].split()[:5] == ["op", "device", "in_dtypes", "out_dtype", "calls"]
    times = [r["time_s"] for r in audit.summary()["ops"]]
    assert times == sorted(times, reverse=True)
    assert len(lines) == 3 + len(times)
    short = audit.table(limit=2).splitlines()
    assert len(short) == 3 + 2 + 1 and short[-1].endswith("more rows")
    assert "11 autocast casts (238 bytes)" in repr(audit)


def test_an_empty_audit():
    with ampkit.autocast_audit() as audit:
        pass
    s = audit.summary()
    assert s["ops"] == [] and s["casts"] == s["cast_bytes"] == s["calls"] == 0
    assert str(audit).splitlines()[0].startswith("autocast audit: 0 op calls")


# -- bad input -----------------------------------------------------------------------------------


def test_bad_input_names_the_argument():
    with pytest.raises(ampkit.ArgumentTypeError, match="`func` must be a callable, got int"):
        ampkit.autocast_audit()(3)
    with pytest.raises(TypeError, match=r"takes no arguments, got a function.*parentheses"):
        ampkit.autocast_audit(lambda: None)
    with pytest.raises(ampkit.ArgumentError, match="`limit` must be a whole number"):
        ampkit.autocast_audit().table(limit=-1)
    with pytest.raises(ampkit.ArgumentTypeError, match="`limit` must be a whole number"):
        ampkit.autocast_audit().table(limit="3")
    with pytest.raises(ampkit.StateError, match="without a matching __enter__"):
        ampkit.autocast_audit().__exit__(None, None, None)


# -- CUDA ----------------------------------------------------------------------------------------


@requires_cuda
def test_cuda_float16_autocast():
    model, (x, y) = _model(), _data()
    model, x, y = model.cuda(), x.cuda(), y.cuda()
    with ampkit.autocast_audit() as audit:
        _step(model, x, y, region=lambda: ampkit.autocast("cuda", dtype=torch.float16))
    s = audit.summary()
    addmm = _rows(s, op="addmm", device="cuda")
    assert addmm and all(r["out_dtype"] == "float16" and r["autocast"] for r in addmm)
    assert _rows(s, op="mm", backward=True, out_dtype="float16")
    # the same count as on the CPU, with float16's 2 bytes per element
    assert (s["casts"], s["cast_bytes"]) == (11, 238)


# -- the benchmark -------------------------------------------------------------------------------


def test_the_benchmark_rows_carry_casts_per_step(device):
    (suite,) = load_suites(SUITES_DIR, ["many_params"])
    size = suite["sizes"]["tiny"]  # 4 layers of width 8, batch 4
    rows = training.run_python_cells(suite, size, device, "autocast", ["ampkit-py", "torch.amp"],
                                     audit=True)
    by_impl = {r["impl"]: r for r in rows}
    # forward: the input, 4 weights and 4 biases to bfloat16, the output to float32;
    # backward: the loss's gradient to bfloat16, 8 parameter gradients to float32.
    width, batch, layers = size["width"], size["batch"], size["layers"]
    forward = batch * width * BF16 + layers * (width * width + width) * BF16 \
        + batch * width * FP32
    backward = batch * width * BF16 + layers * (width * width + width) * FP32
    assert by_impl["ampkit-py"]["casts_per_step"] == 1 + 2 * layers + 1 + 1 + 2 * layers
    assert by_impl["ampkit-py"]["cast_bytes_per_step"] == forward + backward
    assert by_impl["torch.amp"]["casts_per_step"] is None
    # the audited step is a loop of its own: the timed loops end on the same loss
    assert by_impl["ampkit-py"]["final_loss"] == by_impl["torch.amp"]["final_loss"]
    fp32 = training.run_python_cells(suite, size, device, "fp32", ["ampkit-py"], audit=True)
    assert fp32[0]["casts_per_step"] == 0
    plain = training.run_python_cells(suite, size, device, "fp32", ["ampkit-py"])
    assert "casts_per_step" not in plain[0]
    for r in rows + fp32 + plain:
        r["speedup_vs_fp32"] = r["ratio_vs_torch"] = None
    table = report.training_table(rows + fp32 + plain).splitlines()
    assert table[0].split()[-3:] == ["casts/step", "cast", "KiB/step"]
    assert table[2].split()[-2:] == ["19", f"{(forward + backward) / 1024:.1f}"]
    assert table[3].split()[-2:] == ["-", "-"]
