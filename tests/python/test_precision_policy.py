"""ampkit.precision_policy: a precision per module without editing the model.

The oracle is the hand edit torch.amp asks for: the module's forward wrapped in
``torch.autocast(device, enabled=False)`` with its inputs cast to float32 (or in
``torch.autocast(device, dtype=...)`` for a lower-precision subtree). Outputs and gradients
under a policy must equal the hand-edited model's bit for bit, eagerly and compiled.
"""

from __future__ import annotations

import copy
import socket
import time
import warnings

import ampkit
import precision_worker as worker
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x, scale=None):
        h = self.norm(self.proj(x))
        return h if scale is None else h * scale


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), Block(16),
                               torch.nn.Linear(16, 4))


class HandEdited(torch.nn.Module):
    """What a user writes by hand: the inner module's forward inside torch.autocast."""

    def __init__(self, inner: torch.nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.inner, self.dtype = inner, dtype

    def forward(self, *args):
        if self.dtype == torch.float32:
            with torch.autocast("cpu", enabled=False):
                args = [a.float() if a.dtype in (torch.float16, torch.bfloat16) else a
                        for a in args]
                return self.inner(*args)
        with torch.autocast("cpu", dtype=self.dtype):
            return self.inner(*args)


def _edited(model: torch.nn.Module, edits: dict) -> torch.nn.Module:
    """A deep copy of `model` with the modules at the given top-level or dotted paths wrapped
    in HandEdited (the innermost paths first)."""
    clone = copy.deepcopy(model)
    for path in sorted(edits, key=lambda p: -p.count(".")):
        *parents, last = path.split(".")
        owner = clone
        for p in parents:
            owner = getattr(owner, p) if not p.isdigit() else owner[int(p)]
        current = owner[int(last)] if last.isdigit() else getattr(owner, last)
        wrapped = HandEdited(current, edits[path])
        if last.isdigit():
            owner[int(last)] = wrapped
        else:
            setattr(owner, last, wrapped)
    return clone


def _run(model, x, outer=torch.float16):
    """Forward (under an outer ampkit.autocast region unless outer is None) and backward; the
    output and every parameter's gradient."""
    model.zero_grad(set_to_none=True)
    if outer is None:
        y = model(x)
    else:
        with ampkit.autocast("cpu", dtype=outer):
            y = model(x)
    y.float().square().mean().backward()
    return y, [p.grad.clone() for p in model.parameters()]


def _assert_same(a, b):
    (ya, ga), (yb, gb) = a, b
    assert ya.dtype == yb.dtype
    assert torch.equal(ya, yb)
    assert len(ga) == len(gb) and all(torch.equal(x, y) for x, y in zip(ga, gb))


def _forwards(model):
    return [name for name, m in model.named_modules() if "forward" in m.__dict__]


X = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))


# -- which modules the rules match ----------------------------------------------------------

@pytest.mark.parametrize("rules,expected", [
    ({torch.nn.Linear: torch.float32}, {"0": "float32", "2.proj": "float32", "3": "float32"}),
    ({"2.norm": torch.float32}, {"2.norm": "float32"}),
    ({"2.*": "float32"}, {"2.proj": "float32", "2.norm": "float32"}),
    ({"re:[03]": torch.bfloat16}, {"0": "bfloat16", "3": "bfloat16"}),
    ({"": torch.float16, "2": torch.float32}, {"": "float16", "2": "float32"}),
    ({torch.nn.LayerNorm: torch.float32, "*norm": torch.float32}, {"2.norm": "float32"}),
])
def test_rules_by_type_name_glob_and_regex(rules, expected):
    model = _model()
    with ampkit.precision_policy(model, rules) as policy:
        assert policy.modules == expected
        assert sorted(_forwards(model)) == sorted(expected)
    assert _forwards(model) == []


def test_glob_star_crosses_dots_and_regex_must_match_the_whole_name():
    model = _model()
    with ampkit.precision_policy(model, {"*proj": torch.float32}) as policy:
        assert policy.modules == {"2.proj": "float32"}
    with ampkit.precision_policy(model, {"re:2": torch.float32}) as policy:
        assert policy.modules == {"2": "float32"}
    with pytest.raises(ampkit.ArgumentError, match="rule 're:2.pro' matches no module"):
        ampkit.precision_policy(model, {"re:2": torch.float32, "re:2.pro": torch.float32})


# -- bit for bit against the hand edit --------------------------------------------------------

@pytest.mark.parametrize("outer", [torch.float16, torch.bfloat16])
def test_float32_rule_equals_the_hand_edited_forward(outer):
    model = _model()
    oracle = _run(_edited(model, {"0": torch.float32, "2.norm": torch.float32}), X, outer)
    with ampkit.precision_policy(model, {"0": torch.float32, "2.norm": torch.float32}):
        got = _run(model, X, outer)
    _assert_same(got, oracle)
    plain = _run(model, X, outer)  # removed: plain autocast again, and it differs
    _assert_same(plain, _run(copy.deepcopy(model), X, outer))
    assert not torch.equal(plain[0], got[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_rule_without_a_region_equals_the_hand_edit(dtype):
    model = _model()
    oracle = _run(_edited(model, {"3": dtype}), X, outer=None)
    with ampkit.precision_policy(model, {"3": dtype}):
        got = _run(model, X, outer=None)
    _assert_same(got, oracle)


def test_nested_rules_innermost_wins_inside_torch_and_ampkit_regions():
    model = _model()
    edits = {"2": torch.float32, "2.proj": torch.bfloat16}
    for outer in (torch.float16, torch.bfloat16):
        oracle = _run(_edited(model, edits), X, outer)
        with ampkit.precision_policy(model, edits):
            got = _run(model, X, outer)
            with torch.autocast("cpu", dtype=outer):  # torch's region around the policy's
                y = model(X)
        _assert_same(got, oracle)
        assert torch.equal(y, oracle[0])


def test_keyword_and_nested_inputs_are_cast_to_float32():
    model = Block(4)
    x = torch.randn(2, 4).half()
    scale = torch.full((4,), 2.0, dtype=torch.bfloat16)
    with ampkit.precision_policy(model, {"": torch.float32}):
        with ampkit.autocast("cpu", dtype=torch.float16):
            y = model(x, scale=scale)
    with torch.autocast("cpu", enabled=False):
        expected = Block.forward(model, x.float(), scale=scale.float())
    assert y.dtype == torch.float32 and torch.equal(y, expected)


def test_the_outputs_dtype():
    """float32 rule: float32 out; float16/bfloat16 rule: autocast's dtypes (a Linear's output
    in that dtype), inside an outer region of the other dtype or with no region at all (and
    outputs are not cast back: a float16 output goes on to the next module as it is)."""
    model = _model()
    cases = [({"0": torch.float32}, torch.float16, torch.float32),
             ({"0": torch.bfloat16}, torch.float16, torch.bfloat16),
             ({"3": torch.float16}, None, torch.float16),
             ({"2.norm": torch.float32}, torch.bfloat16, torch.float32)]
    for rules, outer, expected in cases:
        name = next(iter(rules))
        module = model.get_submodule(name)
        seen: list = []
        handle = module.register_forward_hook(
            lambda m, a, out, seen=seen: seen.append(out.dtype))
        with ampkit.precision_policy(model, rules):
            if outer is None:
                model(X)
            else:
                with ampkit.autocast("cpu", dtype=outer):
                    model(X)
        handle.remove()
        assert seen == [expected], (rules, outer)


def test_an_exception_inside_a_kept_module_closes_its_region():
    class Boom(torch.nn.Module):
        def forward(self, x):
            assert not torch.is_autocast_enabled("cpu")
            raise RuntimeError("boom")

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), Boom())
    with ampkit.precision_policy(model, {Boom: torch.float32}):
        with ampkit.autocast("cpu", dtype=torch.float16):
            with pytest.raises(RuntimeError, match="boom"):
                model(torch.randn(1, 2))
            assert torch.is_autocast_enabled("cpu")
            assert torch.get_autocast_dtype("cpu") == torch.float16
    assert not torch.is_autocast_enabled("cpu")


# -- torch.compile -----------------------------------------------------------------------------

def _compiled_step(model, x):
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    model.zero_grad(set_to_none=True)
    with ampkit.autocast("cpu", dtype=torch.float16):
        y = compiled(x)
    y.float().square().mean().backward()
    return y, [p.grad.clone() for p in model.parameters()]


def test_compile_fullgraph_gives_the_compiled_hand_edits_results():
    """Dynamo traces the policy's regions (fullgraph: no graph break): the compiled model under
    a policy equals the compiled hand-edited model bit for bit, forward and backward, and its
    forward equals the eager policy's."""
    model = _model()
    edits = {"0": torch.float32, "2": torch.bfloat16}
    expected = _compiled_step(_edited(model, edits), X)
    with ampkit.precision_policy(model, edits):
        got = _compiled_step(model, X)
        eager = _run(model, X, torch.float16)
    _assert_same(got, expected)
    assert torch.equal(got[0], eager[0])
    torch._dynamo.reset()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inductor's own use of torch.jit
def test_compile_inductor_fullgraph_inside_a_compiled_region():
    model = _model()
    with ampkit.precision_policy(model, {"0": torch.float32}):

        @torch.compile(fullgraph=True)
        def f(x):
            with ampkit.autocast("cpu", dtype=torch.bfloat16):
                return model[0](x), model(x)

        with torch.no_grad():
            kept, y = f(X)
            with ampkit.autocast("cpu", dtype=torch.bfloat16):
                eager_kept, eager_y = model[0](X), model(X)
    assert kept.dtype == torch.float32 and y.dtype == torch.bfloat16
    torch.testing.assert_close(kept, eager_kept)
    torch.testing.assert_close(y, eager_y)
    torch._dynamo.reset()


# -- the audit ---------------------------------------------------------------------------------

def test_the_audit_shows_the_kept_float32_ops_as_such():
    model = _model()
    with ampkit.precision_policy(model, {"0": torch.float32}):
        with ampkit.autocast_audit() as audit:
            with ampkit.autocast("cpu", dtype=torch.bfloat16):
                model(X)
    s = audit.summary()
    addmm = [r for r in s["ops"] if r["op"] == "addmm"]
    assert {(r["out_dtype"], r["autocast"], r["policy"]) for r in addmm} == {
        ("float32", False, "float32"), ("bfloat16", True, None)}
    assert s["fp32_matmuls_outside_autocast"] == 0 and s["policy_fp32_matmuls"] == 1
    assert "policy" in audit.table()
    with ampkit.autocast_audit() as plain:  # without the policy: no policy field set
        with ampkit.autocast("cpu", dtype=torch.bfloat16):
            model(X)
    assert {r["policy"] for r in plain.summary()["ops"]} == {None}


# -- removal -----------------------------------------------------------------------------------

def test_remove_restores_the_model_and_an_instance_forward_of_its_own():
    model = _model()
    own = model[3].forward
    model[3].forward = own  # an instance attribute the user set before
    state = {k: v.clone() for k, v in model.state_dict().items()}
    policy = ampkit.precision_policy(model, {"0": torch.float32, "3": torch.float32})
    assert policy.active and "policy" in repr(policy)
    policy.remove()
    policy.remove()  # harmless
    assert not policy.active and "removed" in repr(policy)
    assert _forwards(model) == ["3"] and model[3].__dict__["forward"] is own
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    ampkit.precision_policy(model, {"0": torch.float32}).remove()  # applicable again


# -- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rules,error,words", [
    ({"0": torch.float32, "encoder": torch.float32}, ampkit.ArgumentError,
     ["'encoder'", "matches no module", "are '(the model)', '0', ", "'2.proj'"]),
    ({"0": torch.float64}, ampkit.ArgumentError, ["'0'", "torch.float64", "torch.float32"]),
    ({"0": "half"}, ampkit.ArgumentError, ["'0'", "'half'"]),
    ({torch.nn.Linear: torch.float32, "3": torch.bfloat16}, ampkit.ArgumentError,
     ["torch.nn.modules.linear.Linear", "'3'", "both claim module '3'"]),
    ({"re:(": torch.float32}, ampkit.ArgumentError, ["'re:('", "regular expression"]),
    ({3: torch.float32}, ampkit.ArgumentTypeError, ["int 3", "module type"]),
    ({}, ampkit.ArgumentError, ["`rules` is empty"]),
])
def test_bad_rules_name_the_rule_and_leave_the_model_untouched(rules, error, words):
    model = _model()
    with pytest.raises(error) as info:
        ampkit.precision_policy(model, rules)
    for word in words:
        assert word in str(info.value)
    assert _forwards(model) == []


def test_a_device_type_autocast_cannot_use_is_refused_before_anything_is_installed():
    model = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if torch.cuda.is_available():
            pytest.skip("needs a machine without CUDA")
        # float32 rules too: under autocast("cpu") the policy's regions for "cuda" would
        # silently leave every module in bfloat16
        for rules in ({"2": torch.float32}, {"2": torch.float32, "0": torch.float16}):
            with pytest.raises(ampkit.ArgumentError,
                               match=r"`device_type` 'cuda' is one autocast cannot use here"):
                ampkit.precision_policy(model, rules, device_type="cuda")
    # a device string autocast does not know: its own error, at once (it came at the forward)
    with pytest.raises(ampkit.DeviceStringError):
        ampkit.precision_policy(model, {"2": torch.float32}, device_type="nosuch")
    assert _forwards(model) == []


def test_a_second_policy_on_the_same_model_is_refused_and_installs_nothing():
    model = _model()
    first = ampkit.precision_policy(model, {"0": torch.float32})
    with pytest.raises(ampkit.StateError, match="module '0' already has a precision policy"):
        ampkit.precision_policy(model, {"3": torch.float32, "0": torch.float32})
    assert _forwards(model) == ["0"]  # the first policy's only
    first.remove()
    assert _forwards(model) == []


def test_model_and_rules_of_the_wrong_type():
    with pytest.raises(ampkit.ArgumentTypeError, match="`model` must be a torch.nn.Module"):
        ampkit.precision_policy(lambda x: x, {"": torch.float32})
    with pytest.raises(ampkit.ArgumentTypeError, match="`rules` must be a mapping"):
        ampkit.precision_policy(_model(), [("0", torch.float32)])


# -- DDP and FSDP2 -----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed missing")
@pytest.mark.parametrize("kind", ["ddp", "fsdp2"])
def test_distributed_policy_equals_the_hand_edit_on_every_rank(kind, tmp_path):
    world = 2
    context = mp.start_processes(worker.run, args=(world, _free_port(), kind, str(tmp_path)),
                                 nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + 240
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the ranks did not finish within 240 s")
    records = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    for rank, record in enumerate(records):
        assert record["kept_dtype"] == torch.float32
        assert len(record["policy"]) == len(record["hand"]) == worker.STEPS
        for step, (a, b) in enumerate(zip(record["policy"], record["hand"])):
            assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b)), \
                f"rank {rank} step {step}"


# -- the benchmark's rows --------------------------------------------------------------------

def test_the_precision_benchmark_suite_gives_its_rows_at_tiny_size():
    """Rows, not timings: the three comparisons, positive times, the locator's reads."""
    import json

    from ampkit.bench import precision
    from ampkit.bench.cli import SUITES_DIR

    with open(f"{SUITES_DIR}/precision.json") as f:
        suite = json.load(f)
    rows = precision.run(suite, suite["sizes"]["tiny"], "cpu")
    assert [r["variant"] for r in rows] == ["policy, no change", "policy, layer 0 float32",
                                            "locator", "policy"]
    assert all(r["variant_s"] > 0 and r["reference_s"] > 0 for r in rows)
    assert 0 < rows[2]["host_reads_per_step"] <= 1
    assert "locator:" in precision.table(rows)


# -- copies, pickling, signatures ----------------------------------------------------------------

def test_a_deep_copy_keeps_the_policy_on_its_own_modules_and_the_model_pickles():
    import inspect
    import io

    model = _model()
    signature = inspect.signature(model[2].forward)
    policy = ampkit.precision_policy(model, {"0": torch.float32, "2": torch.bfloat16})
    assert inspect.signature(model[2].forward) == signature  # (x, scale=None)
    clone = copy.deepcopy(model)
    with torch.no_grad():
        clone[0].weight.mul_(2)  # the copy's forward must use the copy's weights
    oracle = _edited(clone, {"0": torch.float32, "2": torch.bfloat16})
    with ampkit.autocast("cpu", dtype=torch.float16):
        got, expected, original = clone(X), oracle(X), model(X)
    assert torch.equal(got, expected) and not torch.equal(got, original)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    with ampkit.autocast("cpu", dtype=torch.float16):
        assert torch.equal(loaded(X), original)
    policy.remove()
    assert _forwards(model) == [] and sorted(_forwards(clone)) == ["0", "2"]
