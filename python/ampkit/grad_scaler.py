"""``ampkit.GradScaler``: a drop-in for ``torch.amp.GradScaler`` over the C++ state machine."""

from __future__ import annotations

import inspect
import numbers
import warnings
import weakref
from collections import abc
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.amp.grad_scaler import OptState

from . import _C
from . import _scaler_presets as _presets

__all__ = ["GradScaler"]

# The options, their order and their defaults: the core's table (core/include/ampkit/
# scaler_settings.h). The signature below spells them out for readers and tools; its defaults
# are read from here, and a test holds the two to the same names.
_OPTIONS: Dict[str, Any] = dict(_C.SCALER_OPTIONS)


def _number(name: str, value: Any) -> float:
    """``value`` as a float, or an ArgumentTypeError naming ``name``; the core judges the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _C.ArgumentTypeError(f"`{name}` must be a number, got {type(value).__name__}.")
    return float(value)


def _plain(value: Any) -> Any:
    """A value as the core's table takes it: None, bool, int, float or str (a numpy number as
    the Python number it holds), else its type's name. The core judges its kind and rule."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        # An int64 holds it, or it is a float (which the core then refuses as too large): beyond
        # int64, the binding's conversion would otherwise fall back to reading it as a flag.
        return int(value) if -2**63 <= value < 2**63 else float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return _C.OtherKind(type(value).__name__)


class GradScaler:
    """Dynamic loss scaling, a drop-in for :class:`torch.amp.GradScaler`.

    The same constructor, methods, results (bit for bit), ``state_dict`` keys and misuse errors as
    ``torch.amp.GradScaler``. The state machine runs in ampkit's C++ core, which keeps each
    optimizer's parameter list and reads gradients in C++, so the Python work per step does not
    grow with the number of parameters. Per step the skip decision reads one value to the host;
    ``scale``, ``unscale_`` and ``update`` read none, and optimizers built with ``fused=True``
    (Adam, AdamW, SGD) skip on the device with no host read at all.

    The update rule (S is the scale, a float32 tensor on the device of the first loss) is stated
    once, in ``core/include/ampkit/scale_policy.h``; at the defaults it is torch.amp's: after a
    step with an inf/NaN gradient S *= backoff_factor, after ``growth_interval`` clean steps in a
    row S *= growth_factor. :meth:`from_deepspeed` and :meth:`from_megatron` build the scaler
    with DeepSpeed's and Megatron-LM's schedules, step for step.

    Args:
        device: device type of the scale (``"cuda"`` or ``"cpu"``). ``"cuda"`` without a CUDA
            device warns and gives a disabled scaler, as torch.amp does.
        init_scale: initial scale, finite and > 0.
        growth_factor: factor applied after ``growth_interval`` clean steps, > 1.
        backoff_factor: factor applied when a back-off is due, in (0, 1).
        growth_interval: clean steps between growths, a whole number >= 1.
        enabled: ``False`` makes every method a no-op and ``step`` a plain ``optimizer.step()``.
        min_scale: the scale's floor (``None``: none); ``init_scale`` must not be below it.
        max_scale: the scale's ceiling (``None``: none), >= ``min_scale``.
        hysteresis: overflows in a row before a back-off (whole number >= 1).
        consecutive_hysteresis: refill the hysteresis on every clean step, not only on growth.
        growth_delay: clean steps added before the first growth after an overflow or the start
            (DeepSpeed's schedule: 1).
        on_min_scale: what a back-off due at ``min_scale`` does (a collapse): ``"raise"``
            (:class:`ampkit.ScaleCollapseError`), ``"warn"`` (once per run) or ``"ignore"``.
        track_overflow: record which parameters overflowed on a skipped step
            (:meth:`overflow_report`).

    The keyword-only options change the rule only when set; at their defaults the scaler is
    torch.amp's, bit for bit.

    Thread contract: calls on one scaler are serialised by the GIL and each is atomic; drive one
    scaler's iteration (scale, step, update) from one thread at a time.

    Example:
        >>> import torch, ampkit
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> scaler = ampkit.GradScaler("cpu", init_scale=1024.0)
        >>> with ampkit.autocast("cpu"):
        ...     loss = model(torch.randn(8, 4)).float().pow(2).mean()
        >>> scaler.scale(loss).backward()
        >>> scaler.step(opt)
        >>> scaler.update()
        >>> scaler.get_scale()
        1024.0
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = _OPTIONS["init_scale"],
        growth_factor: float = _OPTIONS["growth_factor"],
        backoff_factor: float = _OPTIONS["backoff_factor"],
        growth_interval: int = _OPTIONS["growth_interval"],
        enabled: bool = _OPTIONS["enabled"],
        *,
        min_scale: Optional[float] = _OPTIONS["min_scale"],
        max_scale: Optional[float] = _OPTIONS["max_scale"],
        hysteresis: int = _OPTIONS["hysteresis"],
        consecutive_hysteresis: bool = _OPTIONS["consecutive_hysteresis"],
        growth_delay: int = _OPTIONS["growth_delay"],
        on_min_scale: str = _OPTIONS["on_min_scale"],
        track_overflow: bool = _OPTIONS["track_overflow"],
    ) -> None:
        given = locals()
        self._core = self._make_core(device, {name: given[name] for name in _OPTIONS})
        if self._core.warning:
            warnings.warn(self._core.warning, stacklevel=2)
        self._reset_param_lists()
        self._remember_given(growth_factor=growth_factor, backoff_factor=backoff_factor)

    @classmethod
    def from_deepspeed(cls, config: Dict[str, Any],
                       device: Optional[str] = None) -> "GradScaler":
        """A scaler with DeepSpeed's dynamic loss scaling (``DynamicLossScaler``), step for step.

        ``config`` is a DeepSpeed config or its ``"fp16"`` section, with DeepSpeed's keys and
        defaults: ``initial_scale_power`` (16), ``loss_scale_window`` (1000), ``hysteresis`` (2),
        ``consecutive_hysteresis`` (False), ``min_loss_scale`` (1); ``loss_scale`` must be 0
        (dynamic); ``"enabled": false`` gives a disabled scaler. The schedule is DeepSpeed's:
        the first growth comes one clean step later than torch.amp's (``growth_delay=1``), and
        a back-off due at ``min_loss_scale`` raises.
        ``device`` (``None``: ``"cuda"`` where torch sees a CUDA device, else ``"cpu"``) is the
        device type of the scale.

        Example:
            >>> import ampkit
            >>> s = ampkit.GradScaler.from_deepspeed({"fp16": {"initial_scale_power": 12}}, "cpu")
            >>> s.get_scale(), s.get_growth_interval()
            (4096.0, 1000)
        """
        options = _presets.deepspeed_options(config)
        with _presets.peer_names(_presets.DEEPSPEED_NAMES, where="In `config`: "):
            return cls(_presets.default_device(device), **options)

    @classmethod
    def from_megatron(cls, initial_scale: float = 2.0**32, min_scale: float = 1.0,
                      growth_factor: float = 2.0, backoff_factor: float = 0.5,
                      growth_interval: int = 1000, hysteresis: int = 2,
                      device: Optional[str] = None) -> "GradScaler":
        """A scaler with Megatron-LM's ``DynamicGradScaler`` schedule, step for step.

        Its arguments, names and defaults (Megatron's ``--initial-loss-scale``,
        ``--min-loss-scale``, ``--loss-scale-window``, ``--hysteresis``). The factors and scales
        are rounded to float32 as Megatron holds them; no back-off ever raises.
        ``device`` (``None``: ``"cuda"`` where torch sees a CUDA device, else ``"cpu"``) is the
        device type of the scale.

        Example:
            >>> import ampkit
            >>> ampkit.GradScaler.from_megatron(initial_scale=1024.0, device="cpu").get_scale()
            1024.0
        """
        options = _presets.megatron_options(
            initial_scale=initial_scale, min_scale=min_scale, growth_factor=growth_factor,
            backoff_factor=backoff_factor, growth_interval=growth_interval,
            hysteresis=hysteresis)
        with _presets.peer_names(_presets.MEGATRON_NAMES):
            return cls(_presets.default_device(device), **options)

    def _remember_given(self, **given: Any) -> None:
        """The factors as the user gave them: torch.amp's state_dict() and its attributes return
        them so (an int stays an int). The core holds their values. The interval is always an
        int, the core's whole number (R hands every number over as a double)."""
        self.__dict__.setdefault("_given", {}).update(given)

    def _reset_param_lists(self) -> None:
        self._param_lists: "weakref.WeakKeyDictionary[Any, Tuple[tuple, _C.ParamList, int]]" = (
            weakref.WeakKeyDictionary()
        )
        self._param_lists_strong: Dict[Any, Tuple[tuple, _C.ParamList, int]] = {}
        self._optimizers_met = 0  # each optimizer's number, in report names

    # torch.amp.GradScaler refuses float16 gradients in unscale_; its sharded variant accepts them.
    _ALLOW_FP16_GRADS = False

    @classmethod
    def _make_core(cls, device: Any, options: Dict[str, Any]) -> "_C.GradScaler":
        if not isinstance(device, str):
            raise _C.ArgumentTypeError(
                "`device` must be a device type such as 'cuda' or 'cpu', "
                f"got {type(device).__name__}.")
        plain = {name: _plain(value) for name, value in options.items()}
        return _C.GradScaler(device, plain, cls._ALLOW_FP16_GRADS)

    # ---- the optimizer's parameters, kept in the core ------------------------------------------

    def _params_of(self, optimizer: Any) -> "_C.ParamList":
        """The core's ParamList for ``optimizer``, refreshed when its param_groups change.

        A change is a group added or removed, a group's ``params`` list replaced, or its length
        changed; this check costs O(number of groups), not O(number of parameters). The cache is
        keyed weakly, so a dropped optimizer does not keep its parameters alive; an optimizer that
        cannot be weakly referenced is kept in a plain dict for the scaler's lifetime.
        """
        groups = getattr(optimizer, "param_groups", None)
        if not isinstance(groups, list):
            raise _C.ArgumentTypeError(
                "`optimizer` must be a torch.optim.Optimizer (an object with a param_groups list), "
                f"got {type(optimizer).__name__}.")
        try:
            cache: Any = self._param_lists
            cached = cache.get(optimizer)
        except TypeError:
            cache = self._param_lists_strong
            cached = cache.get(optimizer)
        if cached is not None:
            signature, params, number = cached
            if len(signature) == len(groups) and all(
                lst is group["params"] and n == len(lst)
                for (lst, n), group in zip(signature, groups)
            ):
                return params
        signature = tuple((group["params"], len(group["params"])) for group in groups)
        flat = [p for group in groups for p in group["params"]]
        bad = next((p for p in flat if not isinstance(p, torch.Tensor)), None)
        if bad is not None:
            raise _C.ArgumentTypeError(
                f"`optimizer` has a parameter that is not a tensor: {type(bad).__name__}.")
        if cached is not None:
            params.reset(flat, _param_names(groups, number))  # same id: its stage is kept
        else:
            number = self._optimizers_met
            self._optimizers_met += 1
            params = _C.ParamList(flat, _param_names(groups, number))
        cache[optimizer] = (signature, params, number)
        return params

    # ---- the iteration ---------------------------------------------------------------------------

    def scale(self, outputs: Any) -> Any:
        """Multiply ``outputs`` (a tensor, or nested lists/tuples of tensors) by the scale.

        The scale is created on the device of the first tensor seen. No host read.

        Example:
            >>> import torch, ampkit
            >>> scaler = ampkit.GradScaler("cpu", init_scale=8.0)
            >>> scaler.scale(torch.tensor(2.0))
            tensor(16.)
            >>> scaler.scale([torch.tensor(1.0), (torch.tensor(3.0),)])
            [tensor(8.), (tensor(24.),)]
        """
        if isinstance(outputs, torch.Tensor):
            return self._core.scale(outputs)
        if not self._core.is_enabled():
            return outputs
        _check_nested(outputs)  # a rejected structure must not create the scale half-way
        return self._scale_nested(outputs)

    def _scale_nested(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self._core.scale(value)
        if not _is_container(value):
            raise _outputs_error(value)
        scaled = map(self._scale_nested, value)
        return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and record inf/NaN.

        Call it before clipping gradients; ``step`` then does not unscale again. Raises
        ``RuntimeError`` when called twice, or after ``step``, before ``update``. No host read.

        Example:
            >>> import torch, ampkit
            >>> p = torch.nn.Parameter(torch.ones(2))
            >>> opt = torch.optim.SGD([p], lr=0.1)
            >>> scaler = ampkit.GradScaler("cpu", init_scale=4.0)
            >>> scaler.scale(p.sum()).backward()
            >>> scaler.unscale_(opt)
            >>> p.grad
            tensor([1., 1.])
        """
        if not self._core.is_enabled():
            return
        self._core.unscale_(self._params_of(optimizer))

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not done yet) and run ``optimizer.step(*args, **kwargs)`` unless a gradient
        is inf/NaN; returns the optimizer's return value, or ``None`` when the step was skipped.

        Reads one value to the host (the skip decision), except for optimizers with
        ``_step_supports_amp_scaling`` (``fused=True`` Adam/AdamW/SGD), which get ``grad_scale``
        and ``found_inf`` and skip on the device. A ``closure`` is not supported.

        Example:
            >>> import torch, ampkit
            >>> p = torch.nn.Parameter(torch.ones(2))
            >>> opt = torch.optim.SGD([p], lr=0.5)
            >>> scaler = ampkit.GradScaler("cpu")
            >>> scaler.scale(p.sum()).backward()
            >>> scaler.step(opt)
            >>> p.detach()
            tensor([0.5000, 0.5000])
        """
        core = self._core
        if not core.is_enabled():
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise _C.StateError("Closure use is not currently supported if GradScaler is enabled.")
        params = self._params_of(optimizer)
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            if _takes_grad_scaler(optimizer):
                return self._legacy_step(optimizer, params, args, kwargs)
            return self._fused_step(optimizer, params, args, kwargs)
        retval = optimizer.step(*args, **kwargs) if core.may_step(params) else None
        core.mark_stepped(params)
        return retval

    def _legacy_step(self, optimizer: Any, params: "_C.ParamList", args: tuple,
                     kwargs: dict) -> Any:
        """torch 2.13's contract for optimizers whose step() takes `grad_scaler`: the scaler hands
        itself over, with torch's FutureWarning, and the optimizer unscales, checks and skips
        through the scaler's methods (_check_inf_per_device, _get_scale_async, ...)."""
        self._core.check_can_step(params)
        warnings.warn(
            "GradScaler is going to stop passing itself as a keyword argument to the passed "
            "optimizer. In the near future GradScaler registers `grad_scale: Tensor` and "
            "`found_inf: Tensor` to the passed optimizer and let the optimizer use them directly.",
            FutureWarning, stacklevel=3)
        retval = optimizer.step(*args, **{**kwargs, "grad_scaler": self})
        self._core.mark_stepped(params)
        return retval

    def _fused_step(self, optimizer: Any, params: "_C.ParamList", args: tuple, kwargs: dict) -> Any:
        fused = self._core.fused_step_args(params, getattr(optimizer, "grad_scale", None))
        optimizer.grad_scale = fused.grad_scale
        optimizer.found_inf = fused.found_inf
        try:
            retval = optimizer.step(*args, **kwargs)
        finally:
            del optimizer.grad_scale
            del optimizer.found_inf
        self._core.mark_stepped(params)
        return retval

    def update(self, new_scale: Optional[Any] = None) -> None:
        """Grow or back off the scale from this iteration's inf checks, or set it to ``new_scale``
        (a float, or a 1-element tensor on the scaler's device type). No host read.

        Example:
            >>> import torch, ampkit
            >>> scaler = ampkit.GradScaler("cpu", init_scale=8.0)
            >>> _ = scaler.scale(torch.tensor(1.0))
            >>> scaler.update(2.0)
            >>> scaler.get_scale()
            2.0
        """
        core = self._core
        if not core.is_enabled():
            return
        if new_scale is None:
            warning = core.update()
            if warning:
                warnings.warn(warning, RuntimeWarning, stacklevel=2)
        elif isinstance(new_scale, torch.Tensor):
            core.update_to(new_scale)
        else:
            core.update_to(_number("new_scale", new_scale))

    # ---- what happened: step outcome, counters, overflow report ---------------------------------

    def step_was_skipped(self, optimizer: Optional[torch.optim.Optimizer] = None) -> bool:
        """Whether the most recent ``step(optimizer)`` was skipped (an inf/NaN gradient); without
        ``optimizer``, whether any optimizer's step in the most recent iteration was. Valid after
        ``update()`` too, until the next iteration steps; ``False`` when nothing was stepped.

        Free for ordinary optimizers (``step`` already read the decision); for ``fused=True``
        optimizers, whose decision stays on the device, the first call per step reads one value.

        Keep the LR schedule in step with the optimizer, without torch's "lr_scheduler.step()
        before optimizer.step()" warning on skipped steps::

            scaler.step(opt); scaler.update()
            if not scaler.step_was_skipped(opt):
                scheduler.step()

        Example:
            >>> import torch, ampkit
            >>> p = torch.nn.Parameter(torch.ones(2))
            >>> opt = torch.optim.SGD([p], lr=0.1)
            >>> scaler = ampkit.GradScaler("cpu")
            >>> scaler.scale(p.sum()).backward()
            >>> p.grad[0] = float("inf")
            >>> scaler.step(opt); scaler.update()
            >>> scaler.step_was_skipped(opt)
            True
        """
        params = None if optimizer is None else self._params_of(optimizer)
        return self._core.step_was_skipped(params)

    def stats(self) -> Dict[str, Any]:
        """The step counters and the scale: ``steps`` (iterations whose ``update()`` used inf
        checks), ``skipped_steps``, ``consecutive_skipped_steps`` (the current run) and ``scale``.
        The counters live on the scale's device; this reads them and the scale in one go.

        Example:
            >>> ampkit.GradScaler("cpu").stats()
            {'steps': 0, 'skipped_steps': 0, 'consecutive_skipped_steps': 0, 'scale': 65536.0}
        """
        return self._core.stats()

    def overflow_report(self) -> List[Dict[str, Any]]:
        """The parameters whose gradient held inf or NaN in the most recent iteration, as
        ``{"name", "inf", "nan"}`` (element counts), in parameter order; empty after a clean
        iteration. Needs ``track_overflow=True`` (else a StateError: an empty report would read
        as "nothing overflowed"). Names come from the optimizer's ``param_names`` (an optimizer
        built from ``model.named_parameters()``), else ``"group{g}.param{i}"``; a second
        optimizer's are prefixed ``"optimizer1."``, and so on.

        A skipped step costs one more pass over the gradients; clean steps cost nothing (a
        ``fused=True`` optimizer's step reads its skip decision once).

        Example:
            >>> import torch, ampkit
            >>> model = torch.nn.Linear(2, 1)
            >>> opt = torch.optim.SGD(model.named_parameters(), lr=0.1)
            >>> scaler = ampkit.GradScaler("cpu", track_overflow=True)
            >>> scaler.scale(model(torch.ones(1, 2)).sum()).backward()
            >>> model.bias.grad[0] = float("nan")
            >>> scaler.step(opt); scaler.update()
            >>> scaler.overflow_report()
            [{'name': 'bias', 'inf': 0, 'nan': 1}]
        """
        return self._core.overflow_report()

    # ---- torch.amp's underscore names, which public code reads ----------------------------------
    # Each is backed by the core's state (one source of truth): logging reads `_scale`, skipped-
    # step detection reads `_per_optimizer_states`, accelerate's FSDP2 resume calls
    # `_lazy_init_scale_growth_tracker`, apex-style optimizers (the `grad_scaler=` contract) call
    # `_check_inf_per_device`, `_found_inf_per_device` and `_get_scale_async`, torch's own tests
    # call `_unscale_grads_` and read and write `_init_growth_tracker`.

    @property
    def _scale(self) -> Optional[torch.Tensor]:
        """The scale tensor itself (float32, on the device of the first scaled loss), or ``None``
        before the first ``scale()``. Read-only: change the scale with ``update(new_scale)``."""
        return self._core.scale_tensor

    @property
    def _growth_tracker(self) -> Optional[torch.Tensor]:
        return self._core.growth_tracker_tensor

    @property
    def _enabled(self) -> bool:
        return self._core.is_enabled()

    @property
    def _device(self) -> str:
        return self._core.device

    @property
    def _init_scale(self) -> float:
        return self._core.init_scale

    @property
    def _init_growth_tracker(self) -> int:
        return self._core.init_growth_tracker

    @_init_growth_tracker.setter
    def _init_growth_tracker(self, value: int) -> None:
        self._core.init_growth_tracker = _number("_init_growth_tracker", value)

    @property
    def _growth_factor(self) -> float:
        return self._given["growth_factor"]

    @property
    def _backoff_factor(self) -> float:
        return self._given["backoff_factor"]

    @property
    def _growth_interval(self) -> int:
        return self._core.get_growth_interval()

    @property
    def _per_optimizer_states(self) -> "_PerOptimizerStates":
        return _PerOptimizerStates(self)

    def _lazy_init_scale_growth_tracker(self, dev: Any) -> None:
        self._core.init_on(torch.device(dev))

    def _get_scale_async(self) -> Optional[torch.Tensor]:
        return self._core.scale_tensor

    def _check_inf_per_device(self, optimizer: Any) -> Dict[torch.device, torch.Tensor]:
        return self._core.check_inf(self._params_of(optimizer))

    def _found_inf_per_device(self, optimizer: Any) -> Dict[torch.device, torch.Tensor]:
        return self._core.found_inf_per_device(self._params_of(optimizer))

    def _unscale_grads_(self, optimizer: Any, inv_scale: torch.Tensor, found_inf: torch.Tensor,
                        allow_fp16: bool) -> Dict[torch.device, torch.Tensor]:
        return _C.unscale_grads(self._params_of(optimizer), inv_scale, found_inf, allow_fp16)

    # ---- settings and state ----------------------------------------------------------------------

    def get_scale(self) -> float:
        """The current scale as a Python float (reads it to the host); 1.0 when disabled.

        Example:
            >>> ampkit.GradScaler("cpu").get_scale()
            65536.0
        """
        return self._core.get_scale()

    def get_growth_factor(self) -> float:
        """The growth factor."""
        return self._core.get_growth_factor()

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the growth factor (a finite number > 1).

        Example:
            >>> s = ampkit.GradScaler("cpu"); s.set_growth_factor(4.0); s.get_growth_factor()
            4.0
        """
        self._core.set_growth_factor(_number("new_factor", new_factor))
        self._remember_given(growth_factor=new_factor)

    def get_backoff_factor(self) -> float:
        """The backoff factor."""
        return self._core.get_backoff_factor()

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the backoff factor (in (0, 1)).

        Example:
            >>> s = ampkit.GradScaler("cpu"); s.set_backoff_factor(0.25); s.get_backoff_factor()
            0.25
        """
        self._core.set_backoff_factor(_number("new_factor", new_factor))
        self._remember_given(backoff_factor=new_factor)

    def get_growth_interval(self) -> int:
        """The growth interval."""
        return self._core.get_growth_interval()

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the growth interval (a whole number >= 1).

        Example:
            >>> s = ampkit.GradScaler("cpu"); s.set_growth_interval(10); s.get_growth_interval()
            10
        """
        self._core.set_growth_interval(_number("new_interval", new_interval))

    def is_enabled(self) -> bool:
        """Whether the scaler scales (False when built disabled, or for CUDA without CUDA)."""
        return self._core.is_enabled()

    def state_dict(self) -> Dict[str, Any]:
        """torch.amp's five keys (``scale``, ``growth_factor``, ``backoff_factor``,
        ``growth_interval``, ``_growth_tracker``), then ampkit's: the options that change the rule
        and what is reported, the hysteresis state and the counters, each key a row of the core's
        table (``ampkit._C.STATE_KEYS``); ``{}`` when disabled. Reads the device state to the host
        once. Loadable by ``torch.amp.GradScaler`` (which ignores ampkit's keys) and by ampkit in
        R.

        Example:
            >>> import ampkit
            >>> list(ampkit.GradScaler("cpu").state_dict())[:5]
            ['scale', 'growth_factor', 'backoff_factor', 'growth_interval', '_growth_tracker']
        """
        if not self._core.is_enabled():
            return {}
        return {**self._core.state_dict(), **self._given}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Load a state from ``state_dict()`` of ampkit or torch.amp. The whole state is checked
        first (keys, types, ranges): a bad state raises an error naming the key and changes
        nothing. A torch.amp state (no ampkit keys) keeps this scaler's policy and restarts its
        counters.

        Example:
            >>> import torch, ampkit
            >>> source = torch.amp.GradScaler("cpu", init_scale=512.0)
            >>> target = ampkit.GradScaler("cpu")
            >>> target.load_state_dict(source.state_dict())
            >>> target.get_scale()
            512.0
        """
        if not self._core.is_enabled():
            return
        values = _state_from_dict(state_dict)
        self._core.load_state_dict(values)
        self._remember_given(**{k: values[k] for k in self._given})

    def __getstate__(self) -> Dict[str, Any]:
        core = self._core
        if core.is_enabled() and core.has_optimizer_states():
            raise _C.StateError(
                "A GradScaler instance may only be pickled at the beginning of an iteration, "
                "or at the end after scaler.update()."
            )
        return {"device": core.device, "enabled": core.is_enabled(), "state": core.state_dict()}

    def __setstate__(self, pickled: Dict[str, Any]) -> None:
        state = pickled["state"]
        # Built with the default init_scale, then the state is loaded: a pickled scale may be 0 or
        # inf (reached by backoff or growth), which a constructor rightly refuses.
        self._core = self._make_core(pickled["device"], {
            "growth_factor": state["growth_factor"], "backoff_factor": state["backoff_factor"],
            "growth_interval": state["growth_interval"], "enabled": pickled["enabled"]})
        self._core.load_state_dict(state)
        self._reset_param_lists()
        self._remember_given(**{k: state[k] for k in ("growth_factor", "backoff_factor")})

    def __repr__(self) -> str:
        core = self._core
        return (
            f"ampkit.GradScaler(device={core.device!r}, enabled={core.is_enabled()}, "
            f"growth_factor={core.get_growth_factor()}, "
            f"backoff_factor={core.get_backoff_factor()}, "
            f"growth_interval={core.get_growth_interval()})"
        )


def _is_container(value: Any) -> bool:
    """What scale() recurses into: any iterable but a string."""
    return isinstance(value, abc.Iterable) and not isinstance(value, (str, bytes))


def _outputs_error(value: Any) -> Exception:
    return _C.ArgumentError(
        f"`outputs` must be a Tensor or an iterable of Tensors, got {type(value).__name__}.")


def _check_nested(value: Any) -> None:
    """Lists and tuples are walked before any tensor is scaled; other iterables stay lazy."""
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_nested(item)
    elif not isinstance(value, torch.Tensor) and not _is_container(value):
        raise _outputs_error(value)


_TAKES_GRAD_SCALER: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def _takes_grad_scaler(optimizer: Any) -> bool:
    """Whether optimizer.step() takes `grad_scaler` (torch.amp's legacy contract), asked once per
    step function: inspect.signature costs more than a whole step of the scaler."""
    step = getattr(optimizer.step, "__func__", optimizer.step)
    try:
        known = _TAKES_GRAD_SCALER.get(step)
    except TypeError:  # not weakly referenceable: ask every time
        return "grad_scaler" in inspect.signature(optimizer.step).parameters
    if known is None:
        known = "grad_scaler" in inspect.signature(optimizer.step).parameters
        _TAKES_GRAD_SCALER[step] = known
    return known


class _PerOptimizerStates(abc.Mapping):
    """torch.amp's `_per_optimizer_states`, read from the core: id(optimizer) -> {"stage":
    OptState, "found_inf_per_device": {device: tensor}}; an unknown id reads as a fresh state,
    as torch.amp's defaultdict does. A snapshot: writing into it changes nothing."""

    def __init__(self, scaler: GradScaler) -> None:
        self._core = scaler._core
        self._lists = [(o, p) for o, (_, p, _) in list(scaler._param_lists.items())
                       + list(scaler._param_lists_strong.items())]

    def _staged(self):
        for optimizer, params in self._lists:
            stage = self._core.stage(params)
            if stage is not None:
                yield optimizer, params, stage

    def __getitem__(self, key: int) -> Dict[str, Any]:
        for optimizer, params, stage in self._staged():
            if id(optimizer) == key:
                return {"stage": OptState[stage],
                        "found_inf_per_device": self._core.found_inf_per_device(params)}
        return {"stage": OptState.READY, "found_inf_per_device": {}}

    def __iter__(self):
        return (id(optimizer) for optimizer, _, _ in self._staged())

    def __len__(self) -> int:
        return sum(1 for _ in self._staged())


def _param_names(groups: List[Dict[str, Any]], optimizer: int) -> List[str]:
    """A name per parameter, for overflow reports: the core's rule (param_list.h) on the groups'
    ``param_names`` (torch fills them for an optimizer built from ``named_parameters()``)."""
    given = [[str(n) for n in group.get("param_names") or []] for group in groups]
    return _C.param_names(given, [len(group["params"]) for group in groups], optimizer)


def _state_from_dict(state_dict: Any) -> Dict[str, Any]:
    """A state dict's values as the core takes them (None, bool, int, float, str). The core owns
    the format: it checks the keys first (so an unknown key is reported as unknown, not as a bad
    value), then each value's kind and rule."""
    if not isinstance(state_dict, abc.Mapping):
        raise _C.ArgumentTypeError(
            f"`state_dict` must be a dict with keys {list(_C.STATE_KEYS)}, "
            f"got {type(state_dict).__name__}.")
    # A checkpoint may hold a number as a 1-element tensor (torch.amp's scale, saved as is).
    return {str(key): _plain(value.item() if isinstance(value, torch.Tensor) and value.numel() == 1
                             else value) for key, value in state_dict.items()}
