"""``ampkit.precision_policy``: a precision per module, without editing the model.

torch.amp's only way to keep one layer in float32 is to edit its ``forward`` so that it opens
``autocast(enabled=False)`` and casts its inputs. A precision policy does exactly that edit from
the outside: each module a rule matches gets, on the instance, a ``forward`` that runs the
module's own ``forward`` inside an ``ampkit.autocast`` region (and, for float32, with its
floating-point inputs cast to float32). The class, the parameters, the state_dict and every
other module are untouched, and ``remove()`` puts the instance back as it was.

Why a wrapped ``forward`` rather than a forward pre-hook and a forward hook: a region opened in
a pre-hook and closed in a post-hook stays open when ``forward`` raises between them (unless
the post-hook is registered ``always_call=True``, and then other hooks may still raise in
between), and Dynamo cannot trace a context manager entered in one function and left in
another. A ``with`` inside the wrapper is closed on every way out, and Dynamo traces it under
``torch.compile(fullgraph=True)`` (``ampkit.autocast`` is ``torch.autocast`` there), so the
compiled graph is the one the hand-edited model gives. Module hooks (the user's, DDP's,
FSDP2's) run outside the region, as they would around a hand-edited ``forward``.
"""

from __future__ import annotations

import fnmatch
import inspect
import re
import threading
import warnings
import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from . import _C
from .autocast import autocast

__all__ = ["precision_policy", "PrecisionPolicy"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_LOW = (torch.float16, torch.bfloat16)
_is_compiling = _C.is_compiling

# Modules a live policy has wrapped (module -> its policy), so a second policy on the same
# model is refused instead of stacking regions nobody asked for.
_ACTIVE: "weakref.WeakKeyDictionary[torch.nn.Module, PrecisionPolicy]" = \
    weakref.WeakKeyDictionary()
_ACTIVE_LOCK = threading.Lock()

# Per thread, the policies' regions currently entered (innermost last): read by
# ampkit.autocast_audit to show the ops a policy kept in float32 as such.
_local = threading.local()


def current_policy_dtype() -> Optional[str]:
    """The dtype name ("float32", "bfloat16", "float16") of the innermost policy region this
    thread is in, or None outside every policy region (for the audit)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype)[6:]


def _rule_text(key: Any) -> str:
    if isinstance(key, type):
        return f"{key.__module__}.{key.__qualname__}"
    return repr(key)


def _as_dtype(key: Any, value: Any) -> torch.dtype:
    if isinstance(value, str) and value in _DTYPES:
        return _DTYPES[value]
    if isinstance(value, torch.dtype) and value in _DTYPES.values():
        return value
    raise _C.ArgumentError(
        f"precision_policy: rule {_rule_text(key)} maps to {value!r}; a rule's dtype must be "
        "torch.float32 (autocast off, inputs cast to float32), torch.bfloat16 or torch.float16 "
        "(or their names: 'float32', 'bfloat16', 'float16').")


def _matcher(key: Any):
    """A predicate over (qualified name, module) for one rule's key."""
    if isinstance(key, type) and issubclass(key, torch.nn.Module):
        return lambda name, module: isinstance(module, key)
    if isinstance(key, str):
        if key.startswith("re:"):
            try:
                pattern = re.compile(key[3:])
            except re.error as error:
                raise _C.ArgumentError(
                    f"precision_policy: rule {key!r} is not a valid regular expression "
                    f"({error}).") from None
            return lambda name, module: pattern.fullmatch(name) is not None
        if any(c in key for c in "*?["):
            return lambda name, module: fnmatch.fnmatchcase(name, key)
        return lambda name, module: name == key
    raise _C.ArgumentTypeError(
        f"precision_policy: a rule's key must be a module type (a subclass of "
        f"torch.nn.Module), a qualified module name ('encoder.0'), a glob pattern "
        f"('encoder.*.proj') or a regular expression ('re:encoder\\.\\d+'), got "
        f"{type(key).__name__} {key!r}.")


def _default_device(model: torch.nn.Module) -> str:
    for tensor in model.parameters():
        return tensor.device.type
    for tensor in model.buffers():
        return tensor.device.type
    return "cpu"


def _check_autocast(key: Any, device: str, dtype: torch.dtype) -> None:
    """Refuse a dtype autocast cannot use on the device (ampkit.autocast would warn and run
    disabled, silently not doing what the rule asks)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region = autocast(device, dtype=dtype)
    if not region.enabled or caught:
        why = "; ".join(str(w.message) for w in caught) or "autocast is disabled there"
        raise _C.ArgumentError(
            f"precision_policy: rule {_rule_text(key)} asks for {_dtype_name(dtype)} on "
            f"device type {device!r}, which autocast cannot use here ({why}).")


def _to_float32(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype in _LOW else value
    if isinstance(value, tuple):
        return tuple(_to_float32(v) for v in value)
    if isinstance(value, list):
        return [_to_float32(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_float32(v) for k, v in value.items()}
    return value


class _PolicyForward:
    """The forward a policy sets on a module: the module's own forward inside an
    ampkit.autocast region. An object, not a closure, so that a deep copy of the model gets a
    forward bound to the copy (a closure would keep calling the original module) and the model
    still pickles (torch.save); ``__signature__`` is the module's own forward's."""

    def __init__(self, module: torch.nn.Module, previous: Any, device: str,
                 dtype: torch.dtype) -> None:
        self.module = module
        self.previous = previous  # the instance's own 'forward' before the policy, or None
        self.device = device
        self.dtype = dtype
        self.dtype_name = _dtype_name(dtype)
        try:
            self.__signature__ = inspect.signature(self._original())
        except (TypeError, ValueError):  # a forward without a signature: (*args, **kwargs)
            pass

    def _original(self) -> Any:
        if self.previous is not None:
            return self.previous
        return type(self.module).forward.__get__(self.module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _is_compiling():
            return self._run(args, kwargs)
        stack = _local.__dict__.setdefault("stack", [])
        stack.append(self.dtype_name)
        try:
            return self._run(args, kwargs)
        finally:
            stack.pop()

    def _run(self, args: Any, kwargs: Any) -> Any:
        original = self._original()
        if self.dtype == torch.float32:
            with autocast(self.device, enabled=False):  # the hand edit: cast inside the region
                return original(*_to_float32(args), **_to_float32(kwargs))
        with autocast(self.device, dtype=self.dtype):
            return original(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ampkit.precision_policy forward ({self.dtype_name}) of {self._original()!r}>"


class PrecisionPolicy:
    """The handle of an applied :func:`precision_policy`: ``remove()`` takes it off the model
    (also as a context manager: leaving the ``with`` removes it).

    Attributes:
        modules: a dict, qualified module name -> dtype name, of the modules the policy wraps,
            in the model's order.
        device_type: the device type of the policy's regions.

    Example:
        >>> import torch, ampkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        >>> with ampkit.precision_policy(model, {"0": torch.float32}) as policy:
        ...     policy.modules
        {'0': 'float32'}
    """

    def __init__(self, model: torch.nn.Module, device_type: str,
                 targets: List[Tuple[str, torch.nn.Module, torch.dtype, Any]]) -> None:
        self.device_type = device_type
        self.modules: Dict[str, str] = {name: _dtype_name(d) for name, _, d, _ in targets}
        self._rules = {name: _rule_text(key) for name, _, _, key in targets}
        # module -> (the instance's own 'forward' before, if it had one; our wrapper)
        self._installed: List[Tuple[weakref.ref, Any, Any]] = []
        self._model = weakref.ref(model)
        with _ACTIVE_LOCK:
            for name, module, _, _ in targets:
                other = _ACTIVE.get(module)
                if other is not None:
                    raise _C.StateError(
                        f"precision_policy: module {name or '(the model)'!r} already has a "
                        f"precision policy ({other!r}); remove it first (handle.remove()), "
                        "or put both sets of rules in one policy.")
            try:
                for _, module, dtype, _ in targets:
                    previous = module.__dict__.get("forward", _MISSING)
                    wrapper = _PolicyForward(module, None if previous is _MISSING else previous,
                                             device_type, dtype)
                    module.forward = wrapper
                    self._installed.append((weakref.ref(module), previous, wrapper))
                    _ACTIVE[module] = self
            except BaseException:
                self._uninstall()
                raise

    def _uninstall(self) -> None:
        for ref, previous, wrapper in reversed(self._installed):
            module = ref()
            if module is None:
                continue
            if module.__dict__.get("forward") is wrapper:
                if previous is _MISSING:
                    del module.__dict__["forward"]
                else:
                    module.__dict__["forward"] = previous
            if _ACTIVE.get(module) is self:
                del _ACTIVE[module]
        self._installed = []

    @property
    def active(self) -> bool:
        """Whether the policy is still applied."""
        return bool(self._installed)

    def remove(self) -> None:
        """Take the policy off the model: every wrapped module's ``forward`` is its own again.
        Removing twice is harmless."""
        with _ACTIVE_LOCK:
            self._uninstall()

    def __enter__(self) -> "PrecisionPolicy":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.remove()
        return False

    def __repr__(self) -> str:
        state = "" if self.active else " (removed)"
        inner = ", ".join(f"{name or '(the model)'}: {dtype}"
                          for name, dtype in self.modules.items())
        return f"<ampkit.precision_policy{state} on {self.device_type!r}: {inner}>"


_MISSING = object()


def precision_policy(model: torch.nn.Module, rules: Mapping[Any, Any],
                     device_type: Optional[str] = None) -> PrecisionPolicy:
    """Run chosen modules of ``model`` in a precision of their own, without editing the model.

    ``rules`` maps modules to dtypes. A key is

    - a module type (``torch.nn.LayerNorm``): every module that is an instance of it;
    - a qualified name as ``model.named_modules()`` gives it (``"encoder.0.proj"``; ``""`` is
      the model itself): that module;
    - a glob pattern over qualified names, matched with ``fnmatch.fnmatchcase`` (``*`` matches
      any characters, dots included; ``?`` one; ``[...]`` a set; ``"*"`` matches the model's
      own name ``""`` too): a key containing ``*``, ``?`` or ``[`` is a pattern;
    - ``"re:"`` followed by a regular expression, which must match the whole qualified name
      (``re.fullmatch``).

    A value is the dtype of that module's subtree:

    - ``torch.float32``: autocast is off while the module runs (an ``ampkit.autocast(device,
      enabled=False)`` region), and its float16/bfloat16 tensor inputs (positional and keyword,
      inside tuples, lists and dicts too) are cast to float32 first; float64 and other tensors
      are passed as they are. Its outputs are what its ``forward`` computes from there: float32
      for the usual layers.
    - ``torch.bfloat16`` / ``torch.float16``: the module runs in an ``ampkit.autocast(device,
      dtype=...)`` region, whether or not the caller is in one. Inputs are not cast (autocast
      casts per op); its outputs have the dtypes autocast gives (float16 out of a ``Linear``
      under float16), as with any autocast region.

    Outputs are never cast back: a module kept in float32 hands float32 to the next module,
    which, inside the caller's autocast region, casts it again as autocast does for any float32
    tensor. This is exactly the hand edit ``with autocast(enabled=False): return
    self.inner(x.float())``, and results are bit-identical to it, eagerly and compiled.

    Regions nest: a module inside a module kept in float32 may have a rule of its own (the
    innermost rule wins), and policy regions nest inside ``ampkit.autocast`` / ``torch.autocast``
    regions like any hand-written region. Module hooks run outside the module's region.

    The model is left as it is: the policy sets an instance attribute ``forward`` on each
    matched module (a ``with`` around the module's own forward; DDP, FSDP2 and
    ``torch.compile(fullgraph=True)`` see an ordinary forward), and ``remove()`` deletes it.
    ``ampkit.autocast_audit`` shows the ops run inside a policy's region with that region's
    dtype in its ``policy`` field (float32 matrix products kept by a policy are not counted
    as missed autocast work).

    Args:
        model: a ``torch.nn.Module`` (the names are those of ``model.named_modules()``: a DDP
            wrapper's names start with ``module.``).
        rules: a mapping from keys to dtypes (``torch.float32``, ``torch.bfloat16``,
            ``torch.float16``, or their names as strings).
        device_type: the device type of the regions; ``None``: that of the model's first
            parameter (or buffer; ``"cpu"`` for a model with neither).

    Returns:
        a :class:`PrecisionPolicy` handle: ``.remove()``, ``.modules`` (name -> dtype name).

    Errors (raised before anything is installed: the model is left untouched): a rule that
    matches no module, a dtype that is not one of the three or that autocast cannot use on the
    device (``ArgumentError``); two rules giving one module different dtypes
    (``ArgumentError``, naming both rules and the module); a model one of whose matched
    modules already has a policy (``StateError``); a key of another type
    (``ArgumentTypeError``).

    Example:
        >>> import torch, ampkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(),
        ...                             torch.nn.Linear(4, 2))
        >>> policy = ampkit.precision_policy(model, {"0": torch.float32})
        >>> policy.modules
        {'0': 'float32'}
        >>> with ampkit.autocast("cpu", dtype=torch.bfloat16):
        ...     h = model[0](torch.randn(3, 4))     # kept in float32
        ...     y = model(torch.randn(3, 4))        # the last layer in bfloat16
        >>> h.dtype, y.dtype
        (torch.float32, torch.bfloat16)
        >>> policy.remove()
        >>> with ampkit.precision_policy(model, {torch.nn.Linear: "bfloat16"}):
        ...     model(torch.randn(3, 4)).dtype   # autocast for those modules, no region needed
        torch.bfloat16
    """
    if not isinstance(model, torch.nn.Module):
        raise _C.ArgumentTypeError(
            f"precision_policy: `model` must be a torch.nn.Module, got {type(model).__name__}.")
    if not isinstance(rules, Mapping):
        raise _C.ArgumentTypeError(
            f"precision_policy: `rules` must be a mapping (a dict of module type, name or "
            f"pattern -> dtype), got {type(rules).__name__}.")
    if not rules:
        raise _C.ArgumentError("precision_policy: `rules` is empty; give at least one rule.")
    if device_type is None:
        device_type = _default_device(model)
    elif not isinstance(device_type, str):
        raise _C.ArgumentTypeError(
            f"precision_policy: `device_type` must be a str such as 'cpu' or 'cuda', or None, "
            f"got {type(device_type).__name__}.")
    named = list(model.named_modules(remove_duplicate=True))
    chosen: Dict[int, Tuple[str, torch.nn.Module, torch.dtype, Any]] = {}
    for key, value in rules.items():
        dtype = _as_dtype(key, value)
        match = _matcher(key)
        if dtype != torch.float32:
            _check_autocast(key, device_type, dtype)
        hits = [(name, module) for name, module in named if match(name, module)]
        if not hits:
            shown = ", ".join(repr(n) for n, _ in named[:12])
            more = f", ... ({len(named)} in all)" if len(named) > 12 else ""
            raise _C.ArgumentError(
                f"precision_policy: rule {_rule_text(key)} matches no module of the model; its "
                f"modules (model.named_modules()) are {shown}{more}.")
        for name, module in hits:
            earlier = chosen.get(id(module))
            if earlier is not None and earlier[2] != dtype:
                raise _C.ArgumentError(
                    f"precision_policy: rules {_rule_text(earlier[3])} "
                    f"({_dtype_name(earlier[2])}) and {_rule_text(key)} ({_dtype_name(dtype)}) "
                    f"both claim module {name or '(the model)'!r}; make them agree or narrow "
                    "one of them.")
            if earlier is None:
                chosen[id(module)] = (name, module, dtype, key)
    order = {id(m): i for i, (_, m) in enumerate(named)}
    targets = sorted(chosen.values(), key=lambda t: order[id(t[1])])
    return PrecisionPolicy(model, device_type, targets)
