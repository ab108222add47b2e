"""``ampkit.overflow_locator`` and ``ampkit.suggest_policy``: which module made the inf, and
which modules to keep in float32.

The locator puts a forward hook on every module of a model. Each hook computes, on the
tensors' device and without reading anything, a few statistics of the module's output (its
absolute maximum, its inf and NaN counts, how many of its values float16 would flush to zero or
overflow to inf), and registers a tensor hook on the output that computes the same of the
gradient with respect to it in the backward pass. The statistics of a step stay on the device
until the step ends; then they are stacked into one tensor and read to the host in one
transfer (``host_reads`` counts these reads). A step is one forward pass of the model and the
backward pass through it: the next forward pass of the model, ``step()``, leaving the ``with``
and ``summary()`` end it.

Exact definitions, per module and step (a module called several times in a step adds up):

- ``amax``: the largest absolute value of the output's floating-point tensors, NaN ignored
  (inf when an element is +-inf; 0 for an output without elements);
- ``inf``, ``nan``: the number of +-inf and NaN elements;
- ``underflow``: the fraction of elements that are nonzero and finite and that casting to
  float16 turns into zero: ``0 < |x| <= 2**-25`` (half of float16's smallest subnormal,
  2**-24; round-to-nearest-even sends exactly 2**-25 to zero);
- ``overflow``: the fraction of elements that are finite and that casting to float16 turns into
  inf: ``|x| >= 65520`` (65504, float16's largest number, plus half its spacing there);
- ``headroom``: ``log2(65504 / amax)``, the bits of float16 range left above the largest value
  (negative when beyond float16's range, -inf with an inf, inf for an all-zero output).

Both fractions are what ``x.half()`` would do (the tests hold them to it), and both are 0 for
an output already in float16.

The statistics and how they add up are the core's (``core/include/ampkit/tensor_stats.h``:
``_C.tensor_stats`` measures, ``_C.StatsSummary`` adds up), shared with R's
``overflow_locator()``; so is the rule of :func:`suggest_policy` (:func:`modules_to_keep`,
which R's ``suggest_policy()`` calls with its own locator's rows).
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, TypeVar

import torch

from . import _C

__all__ = ["overflow_locator", "suggest_policy", "PolicySuggestion", "modules_to_keep",
           "plot_summary"]

F = TypeVar("F", bound=Callable[..., Any])

FP16_MAX = 65504.0
_LOW = (torch.float16, torch.bfloat16)
_PASSES = ("forward", "backward", "parameters")


def _tensors(value: Any) -> List[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


# [amax, inf, nan, underflow count, overflow count] of the tensors on their device, or None
# when there is nothing to measure (the core's: tensor_stats.h).
_stats = _C.tensor_stats


def _numel(tensors: List[torch.Tensor]) -> int:
    return sum(t.numel() for t in tensors)


class _Step:
    """One step's statistics, on the device until read."""

    def __init__(self, index: int) -> None:
        self.index = index
        # (pass, module name, output dtype, numel, stats tensor) in execution order
        self.pending: List[tuple] = []

    def read(self, locator: "overflow_locator") -> None:
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        values = torch.stack([p[4] for p in pending]).tolist()  # the one host read
        locator.host_reads += 1
        add = locator._summary.add
        for (phase, name, dtype, numel, _), v in zip(pending, values):
            add(self.index, phase, name, dtype, numel, v)


class overflow_locator:
    """Find the module whose output overflows, and how close every module comes to float16's
    range, step by step.

    A context manager and a decorator over ``model``: while active, every module of the model
    (``model.named_modules()``, the model itself named ``"(model)"``) has its forward outputs
    and the gradients with respect to them measured on their device (see the module's notes for
    the exact definitions), and the measurements of a step are read to the host once, in one
    transfer, when the step ends (the next forward pass of the model, ``step()``, leaving, or
    ``summary()``). Nothing else is read and nothing is changed: outputs and gradients are the
    same as without the locator. Its cost is a Python hook and a few reductions per module and
    pass (the benchmark prints it per step): locate, then train without it.

    Run it eagerly: it observes through module and tensor hooks, which ``torch.compile``
    would trace into the graph or break it at. A decorated function runs inside the locator on
    each call (steps go on counting across
    calls). The locator can be entered again after leaving; it must not be entered while
    already active.

    Results:

    - ``summary()``: a list of dicts, one per step, pass and module, in execution order; the
      passes are ``"forward"`` (the module's output), ``"backward"`` (the gradient with respect
      to that output) and ``"parameters"`` (the gradients of the module's own parameters, as
      accumulated in ``.grad``: scaled, before any unscale). Keys: ``step``, ``module``,
      ``pass``, ``dtype`` (of the output or gradient), ``calls``, ``numel``, ``amax``, ``inf``,
      ``nan``, ``underflow``, ``overflow``, ``headroom``;
    - ``first_nonfinite()``: per step and pass, the first module in execution order whose
      output (forward), output's gradient (backward) or parameters' gradients held an inf or
      NaN:
      ``[{"step": 0, "forward": "2", "backward": None, "parameters": None}, ...]``;
    - ``plot(path)``: each module's forward headroom over the steps, saved as a PNG;
    - ``host_reads``: how many times the locator has read to the host (one per step).

    Example:
        >>> import torch, ampkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        >>> with torch.no_grad():
        ...     _ = model[0].weight.fill_(1e4)
        >>> with ampkit.overflow_locator(model) as loc:
        ...     with ampkit.autocast("cpu", dtype=torch.float16):
        ...         y = model(torch.full((2, 4), 10.0))
        >>> loc.first_nonfinite()
        [{'step': 0, 'forward': '0', 'backward': None, 'parameters': None}]
        >>> [(r["module"], r["inf"]) for r in loc.summary() if r["pass"] == "forward"]
        [('0', 8), ('1', 8), ('(model)', 8)]
        >>> loc.host_reads
        1
    """

    def __init__(self, model: torch.nn.Module) -> None:
        if not isinstance(model, torch.nn.Module):
            raise _C.ArgumentTypeError(
                f"overflow_locator: `model` must be a torch.nn.Module, got "
                f"{type(model).__name__}; write `ampkit.overflow_locator(model)`.")
        self._model = weakref.ref(model)
        self._handles: List[Any] = []
        self._steps: List[_Step] = []
        self._current: Optional[_Step] = None
        self._active = False
        self._summary = _C.StatsSummary()  # the steps read so far, added up
        self.host_reads = 0

    # -- entering and leaving ------------------------------------------------------------------

    def __enter__(self) -> "overflow_locator":
        if self._active:
            raise _C.StateError("overflow_locator: already active; leave it before entering "
                                "it again.")
        model = self._model()
        if model is None:
            raise _C.StateError("overflow_locator: its model no longer exists.")
        try:
            for name, module in model.named_modules():
                shown = name or "(model)"
                if module is model:
                    self._handles.append(module.register_forward_pre_hook(self._on_model))
                self._handles.append(module.register_forward_hook(self._make_hook(shown)))
                for param in module.parameters(recurse=False):
                    if param.requires_grad:
                        self._handles.append(param.register_post_accumulate_grad_hook(
                            self._make_param_hook(shown)))
        except BaseException:
            self._remove_hooks()
            raise
        self._active = True
        return self

    def __exit__(self, *exc: Any) -> bool:
        self._remove_hooks()
        self._active = False
        self.step()
        return False

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise _C.ArgumentTypeError(
                f"overflow_locator(model)(func): `func` must be a callable, got "
                f"{type(func).__name__}.")

        @functools.wraps(func)
        def located(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return located  # type: ignore[return-value]

    # -- hooks ---------------------------------------------------------------------------------

    def _on_model(self, module: Any, args: Any) -> None:
        self.step()  # a new forward pass of the model: the previous step ends
        self._current = _Step(len(self._steps))
        self._steps.append(self._current)

    def _make_hook(self, name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, output: Any) -> None:
            step = self._current
            if step is None:  # a submodule called on its own, outside a pass of the model
                step = self._current = _Step(len(self._steps))
                self._steps.append(step)
            tensors = _tensors(output)
            stats = _stats(tensors)
            if stats is None:
                return
            step.pending.append(("forward", name, str(tensors[0].dtype)[6:], _numel(tensors),
                                 stats))
            for t in tensors:
                if t.requires_grad:
                    t.register_hook(self._make_grad_hook(step, name))

        return hook

    def _make_grad_hook(self, step: _Step, name: str) -> Callable[[torch.Tensor], None]:
        def grad_hook(grad: torch.Tensor) -> None:
            stats = _stats([grad])
            if stats is not None:
                step.pending.append(("backward", name, str(grad.dtype)[6:], grad.numel(),
                                     stats))

        return grad_hook

    def _make_param_hook(self, name: str) -> Callable[[torch.Tensor], None]:
        def param_hook(param: torch.Tensor) -> None:
            step = self._current or (self._steps[-1] if self._steps else None)
            grad = param.grad
            if step is None or grad is None or grad.is_sparse:
                return
            stats = _stats([grad])
            if stats is not None:
                step.pending.append(("parameters", name, str(grad.dtype)[6:], grad.numel(),
                                     stats))

        return param_hook

    # -- results -------------------------------------------------------------------------------

    def step(self) -> None:
        """End the current step: read its statistics to the host (one transfer). Called by the
        next forward pass of the model, by leaving the locator and by ``summary()``."""
        for step in self._steps:
            if step.pending:
                step.read(self)
        self._current = None

    def summary(self) -> List[Dict[str, Any]]:
        """One dict per step, pass and module (see the class's docs), in execution order."""
        for step in self._steps:
            if step.pending:
                step.read(self)
        return self._summary.rows()

    def first_nonfinite(self) -> List[Dict[str, Any]]:
        """Per step, the first module in execution order whose output (forward) or output's
        gradient (backward) held an inf or NaN; None where none did."""
        self.summary()
        first = self._summary.first_nonfinite
        return [{"step": s.index, "forward": first(s.index, "forward"),
                 "backward": first(s.index, "backward"),
                 "parameters": first(s.index, "parameters")} for s in self._steps]

    def table(self, passes: Iterable[str] = ("forward", "backward", "parameters")) -> str:
        """The summary as a readable table (``print(loc)`` prints it), of the rows of
        ``passes``."""
        passes = _passes(passes, "overflow_locator.table")
        rows = [r for r in self.summary() if r["pass"] in passes]
        columns = ["step", "pass", "module", "dtype", "amax", "inf", "nan", "underflow",
                   "overflow", "headroom"]
        body = [[str(r["step"]), r["pass"], r["module"], r["dtype"], f"{r['amax']:.4g}",
                 str(r["inf"]), str(r["nan"]), f"{r['underflow']:.3g}",
                 f"{r['overflow']:.3g}", f"{r['headroom']:.2f}"] for r in rows]
        widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(columns)]
        text = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
        text += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
        return "\n".join(text)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return (f"<ampkit.overflow_locator: {len(self._steps)} steps, "
                f"{self.host_reads} host reads{', active' if self._active else ''}>")

    def plot(self, path: str, modules: Optional[Iterable[str]] = None,
             title: Optional[str] = None,
             passes: Iterable[str] = ("forward",)) -> str:
        """Save each module's headroom (``log2(65504 / amax)``) over the steps as a PNG at
        ``path`` (matplotlib, Agg): one panel per pass in ``passes`` (``"forward"``,
        ``"backward"``, ``"parameters"``); ``modules`` limits the lines to those names
        (default: every module). A step where the values held an inf is drawn at the bottom of
        its panel with an ``x``. Returns ``path``."""
        return plot_summary(self.summary(), path, modules=modules, title=title, passes=passes)


def plot_summary(summary: List[Dict[str, Any]], path: str,
                 modules: Optional[Iterable[str]] = None, title: Optional[str] = None,
                 passes: Iterable[str] = ("forward",)) -> str:
    """:meth:`overflow_locator.plot` for the rows of a locator's summary (R's
    ``overflow_locator()`` hands its rows here): each module's headroom over the steps, saved
    as a PNG at ``path``. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    passes = _passes(passes, "overflow_locator.plot")
    modules = _modules(modules, summary)
    order: List[str] = []  # one colour per module in every panel, in forward order
    for r in sorted(summary, key=lambda r: r["pass"] != "forward"):
        if r["module"] not in order:
            order.append(r["module"])
    palette = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    colours = {name: palette[i % len(palette)] for i, name in enumerate(order)}
    fig, axes = plt.subplots(len(passes), 1, figsize=(7, 3.2 * len(passes)), dpi=100,
                             squeeze=False)
    try:
        for ax, phase in zip(axes[:, 0], passes):
            _panel(ax, [r for r in summary if r["pass"] == phase], modules, phase, colours)
        fig.suptitle(title or "float16 headroom of each module")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path


def _check_number(value: Any, name: str, rule: Callable[[float], bool], text: str) -> None:
    """A finite real number that keeps ``rule``, or an ArgumentError naming it."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or not rule(value)):
        raise _C.ArgumentError(
            f"suggest_policy: `{name}` must be a finite number {text}, got {value!r}.")


def _passes(passes: Iterable[str], where: str) -> List[str]:
    """``passes`` as a list, refused unless it names some of the three (a string alone would
    be read letter by letter, and an unknown name would select nothing)."""
    given = [] if isinstance(passes, str) else list(passes)
    if not given or any(p not in _PASSES for p in given):
        raise _C.ArgumentError(
            f"{where}: `passes` must be a list naming some of 'forward', 'backward' and "
            f"'parameters', got {passes!r}.")
    return given


def _modules(modules: Optional[Iterable[str]],
             summary: List[Dict[str, Any]]) -> Optional[List[str]]:
    """The module names a plot is limited to, each one the summary has (a name that is not
    would draw nothing, silently)."""
    if modules is None:
        return None
    known = list(dict.fromkeys(r["module"] for r in summary))
    given = [] if isinstance(modules, str) else list(modules)
    if not given or any(m not in known for m in given):
        shown = ", ".join(repr(m) for m in known[:12]) + (", ..." if len(known) > 12 else "")
        raise _C.ArgumentError(
            f"overflow_locator.plot: `modules` must be a list of the modules measured "
            f"({shown}), got {modules!r}.")
    return given


def _panel(ax: Any, rows: List[Dict[str, Any]], modules: Optional[Iterable[str]],
           phase: str, colours: Dict[str, str]) -> None:
    from matplotlib.ticker import MaxNLocator

    wanted = None if modules is None else list(modules)
    names: List[str] = []
    for r in rows:
        if r["module"] not in names and (wanted is None or r["module"] in wanted):
            names.append(r["module"])
    finite = [r["headroom"] for r in rows if math.isfinite(r["headroom"])]
    low = min([0.0] + finite) - 1.0
    for name in sorted(names, key=list(colours).index):
        mine = [r for r in rows if r["module"] == name]
        steps = [r["step"] for r in mine]
        ys = [r["headroom"] if math.isfinite(r["headroom"]) else
              (low if r["headroom"] < 0 else math.nan) for r in mine]
        (line,) = ax.plot(steps, ys, marker="o", label=name, color=colours[name])
        bad = [(s, low) for s, r in zip(steps, mine) if r["headroom"] == -math.inf]
        if bad:
            ax.plot(*zip(*bad), marker="x", linestyle="none", color=line.get_color(),
                    markersize=10)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("log2(65504 / amax)")
    what = {"forward": "outputs", "backward": "gradients w.r.t. the outputs",
            "parameters": "parameters' gradients"}[phase]
    ax.set_title(f"{phase}: {what}", fontsize="medium")
    if names:
        ax.legend(fontsize="small", ncol=min(len(names), 4))


class PolicySuggestion:
    """What :func:`suggest_policy` found: ``rules`` (qualified name -> ``torch.float32``, for
    :func:`ampkit.precision_policy`), ``reasons`` (name -> a list of sentences saying why), and
    ``rounds`` (how many measuring rounds ran).

    Example:
        >>> import torch, ampkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2))
        >>> with torch.no_grad():
        ...     _ = model[0].weight.fill_(1e5)
        >>> s = ampkit.suggest_policy(model, [torch.ones(1, 2)])
        >>> s.rules, s.rounds
        ({'0': torch.float32}, 2)
        >>> s.reasons
        {'0': ['output held 2 inf and 0 NaN in float16']}
    """

    def __init__(self, rules: Dict[str, torch.dtype], reasons: Dict[str, List[str]],
                 rounds: int) -> None:
        self.rules = rules
        self.reasons = reasons
        self.rounds = rounds

    def __repr__(self) -> str:
        inner = "; ".join(f"{name}: {', '.join(why)}" for name, why in self.reasons.items())
        return f"<ampkit.PolicySuggestion: {len(self.rules)} kept in float32 ({inner})>"


def _leaf_names(model: torch.nn.Module) -> Dict[str, torch.nn.Module]:
    return {name: m for name, m in model.named_modules()
            if name and next(m.children(), None) is None}


def suggest_policy(model: torch.nn.Module, batches: Iterable[Any],
                   dtype: torch.dtype = torch.float16, *, loss_fn: Optional[Callable] = None,
                   loss_scale: float = 65536.0, margin: float = 1.0,
                   device_type: Optional[str] = None, max_rounds: int = 4) -> PolicySuggestion:
    """Suggest which modules to keep in float32 so that ``model`` runs in ``dtype`` without
    overflowing.

    Runs the model on each of ``batches`` under ``ampkit.autocast(device_type, dtype)`` with an
    :class:`overflow_locator`, and keeps in float32 each module that

    - is the first, in execution order, whose output held an inf or NaN in a forward pass
      (the module that made it; the modules after it only pass it on);
    - is a leaf (a module without children) whose ``dtype`` output came within ``margin`` bits
      of that dtype's largest number (``amax > finfo(dtype).max / 2**margin``: 65504 / 2 for
      float16 at the default margin of 1 bit);
    - with ``loss_fn``, with the loss multiplied by ``loss_scale`` (a GradScaler's starting
      scale) for the backward pass: is a leaf whose parameters' gradients held an inf or NaN
      or came within ``margin`` bits of the range (the gradients for which the scaler would
      skip the step), or whose output's gradient was the first non-finite one of the
      backward pass or, in ``dtype``, came within ``margin`` bits.

    It then measures again under the rules found so far (a module kept in float32 hands
    float32 values to the next, which may now be the one to overflow), until a round finds
    nothing new or ``max_rounds`` rounds have run. The model itself is named ``""`` in the
    rules (``"(model)"`` in the locator).

    Args:
        model: the model; its parameters and their ``.grad`` are left as they were (the
            gradients computed here are put back to what they were before).
        batches: an iterable of inputs: a tensor, a tuple of positional arguments, or with
            ``loss_fn`` a pair ``(inputs, target)``. Reused in each round: a list, not a
            one-shot iterator.
        dtype: the autocast dtype to check for (``torch.float16`` or ``torch.bfloat16``).
        loss_fn: ``loss_fn(output, target)`` -> a scalar loss; ``None``: forward passes only.
        loss_scale: the factor of the loss in the backward pass.
        margin: bits of float16 range a module must keep (``headroom >= margin``).
        device_type: the autocast device type; ``None``: that of the model's parameters.

    Returns:
        a :class:`PolicySuggestion`: ``rules`` for ``ampkit.precision_policy(model, rules)``,
        ``reasons`` for each.

    Example:
        >>> import torch, ampkit
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
        ...                             torch.nn.Linear(8, 1))
        >>> x = torch.randn(16, 4); x[:, 0] *= 1e5            # a feature far beyond float16
        >>> s = ampkit.suggest_policy(model, [x])
        >>> s.rules    # layer 0 overflows; kept in float32, it hands 1e5s on to layer 2
        {'0': torch.float32, '2': torch.float32}
        >>> s.reasons["0"]
        ['output held 96 inf and 0 NaN in float16']
    """
    from .autocast import autocast
    from .precision_policy import _check_device, _default_device, precision_policy

    if not isinstance(model, torch.nn.Module):
        raise _C.ArgumentTypeError(
            f"suggest_policy: `model` must be a torch.nn.Module, got {type(model).__name__}.")
    if dtype not in _LOW:
        raise _C.ArgumentError(
            f"suggest_policy: `dtype` must be torch.float16 or torch.bfloat16, got {dtype!r}.")
    if isinstance(batches, torch.Tensor):  # list() would split it into its rows
        raise _C.ArgumentTypeError(
            "suggest_policy: `batches` must be a list of batches, got a tensor; give [x].")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise _C.ArgumentError(
            f"suggest_policy: `max_rounds` must be a whole number >= 1, got {max_rounds!r}.")
    modules_to_keep([], [], [], dtype, loss_scale, margin)  # the rule judges its arguments
    batches = list(batches)
    if not batches:
        raise _C.ArgumentError("suggest_policy: `batches` is empty; give at least one batch.")
    if loss_fn is not None and not all(isinstance(b, (tuple, list)) and len(b) == 2
                                       for b in batches):
        raise _C.ArgumentError(
            "suggest_policy: with `loss_fn`, each batch must be a pair (inputs, target).")
    if device_type is None:
        device_type = _default_device(model)
    _check_device(device_type, "suggest_policy")
    leaves = list(_leaf_names(model))
    names = [name for name, _ in model.named_modules()]
    params = list(model.parameters())
    saved = [p.grad for p in params]
    rules: Dict[str, torch.dtype] = {}
    reasons: Dict[str, List[str]] = {}
    rounds = 0
    try:
        while rounds < max_rounds:
            rounds += 1
            policy = precision_policy(model, dict(rules), device_type) if rules else None
            try:
                locator = overflow_locator(model)
                with locator:
                    for batch in batches:
                        inputs, target = batch if loss_fn is not None else (batch, None)
                        args = inputs if isinstance(inputs, tuple) else (inputs,)
                        for p in params:
                            p.grad = None
                        if loss_fn is None:
                            with torch.no_grad(), autocast(device_type, dtype=dtype):
                                model(*args)
                            continue
                        with autocast(device_type, dtype=dtype):
                            out = model(*args)
                            loss = loss_fn(out, target)
                        (loss.float() * loss_scale).backward()
                found = modules_to_keep(locator.summary(), locator.first_nonfinite(), leaves,
                                        dtype, loss_scale, margin)
            finally:
                if policy is not None:
                    policy.remove()
            new = [n for n in names if n in found and n not in rules]
            for name in new:
                rules[name] = torch.float32
                reasons[name] = found[name]
            if not new:
                break
    finally:
        for p, g in zip(params, saved):
            p.grad = g
    ordered = [n for n in names if n in rules]
    return PolicySuggestion({n: rules[n] for n in ordered}, {n: reasons[n] for n in ordered},
                            rounds)


def modules_to_keep(summary: Iterable[Mapping[str, Any]],
                    first_nonfinite: Iterable[Mapping[str, Any]], leaves: Iterable[str],
                    dtype: Any, loss_scale: float, margin: float) -> Dict[str, List[str]]:
    """The rule of :func:`suggest_policy`: from one measuring round's locator results, the
    modules to keep in float32 and why (name -> sentences; the model itself is ``""``). Each
    module (per pass, over the round's steps) is kept when

    - its forward output was the first non-finite one of a step;
    - it is a leaf (one of ``leaves``) and its parameters' gradients held an inf or NaN, or its
      output's gradient was the first non-finite one of a backward pass;
    - it is a leaf and its output (or output's gradient) in ``dtype``, or its parameters'
      gradients, reached beyond ``finfo(dtype).max / 2**margin``.

    ``summary`` and ``first_nonfinite`` are an :class:`overflow_locator`'s (or R's
    ``overflow_locator()``'s rows, which R's ``suggest_policy()`` hands here).

    Example:
        >>> from ampkit.overflow_locator import modules_to_keep
        >>> rows = [{"step": 0, "module": "0", "pass": "forward", "dtype": "float16",
        ...          "inf": 0, "nan": 0, "amax": 40000.0}]
        >>> modules_to_keep(rows, [{"step": 0, "forward": None, "backward": None}], ["0"],
        ...                 "float16", 65536.0, 1.0)
        {'0': ["output reached 4e+04, within 1 bit of float16's largest number"]}
    """
    if isinstance(dtype, str):
        dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(dtype, dtype)
    if dtype not in _LOW:
        raise _C.ArgumentError(
            f"suggest_policy: `dtype` must be torch.float16 or torch.bfloat16, got {dtype!r}.")
    _check_number(margin, "margin", lambda v: v >= 0, ">= 0")
    _check_number(loss_scale, "loss_scale", lambda v: v > 0, "> 0")
    low = str(dtype)[6:]
    limit = torch.finfo(dtype).max / 2.0 ** margin
    leaves = set(leaves)
    # per (module, pass): inf and NaN over the steps, the largest amax, whether it was the
    # first non-finite one of a step
    seen: Dict[tuple, Dict[str, Any]] = {}
    firsts = {(int(f["step"]), phase): f[phase] for f in first_nonfinite
              for phase in ("forward", "backward")}
    for row in summary:
        key = "" if row["module"] == "(model)" else row["module"]
        entry = seen.setdefault((key, row["pass"]), {
            "inf": 0, "nan": 0, "amax": 0.0, "first": False, "dtype": row["dtype"]})
        entry["inf"] += int(row["inf"])
        entry["nan"] += int(row["nan"])
        if math.isfinite(row["amax"]):
            entry["amax"] = max(entry["amax"], row["amax"])
        entry["first"] |= firsts.get((int(row["step"]), row["pass"])) == row["module"]
    found: Dict[str, List[str]] = {}
    for (key, phase), e in seen.items():
        if not (key in leaves or e["first"] and phase == "forward"):
            continue  # a container repeats its last child's numbers
        what = {"forward": "output",
                "backward": f"output's gradient (loss scale {loss_scale:g})",
                "parameters": f"parameters' gradients (loss scale {loss_scale:g})"}[phase]
        if e["first"] or phase == "parameters" and (e["inf"] or e["nan"]):
            why = f"{what} held {e['inf']} inf and {e['nan']} NaN in {e['dtype']}"
        elif (e["dtype"] == low or phase == "parameters") and e["amax"] > limit:
            bits = "bit" if margin == 1 else "bits"
            why = (f"{what} reached {e['amax']:.4g}, within {margin:g} {bits} of "
                   f"{low}'s largest number")
        else:
            continue
        found.setdefault(key, []).append(why)
    return found
