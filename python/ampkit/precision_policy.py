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

import dataclasses
import fnmatch
import inspect
import re
import threading
import warnings
import weakref
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import torch

from . import _C
from .autocast import autocast

__all__ = ["precision_policy", "PrecisionPolicy", "resolve_rules", "ModuleType"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_LOW = (torch.float16, torch.bfloat16)
_is_compiling = _C.is_compiling

# Modules a live policy has wrapped (module -> its policy), so a second policy on the same
# model is refused instead of stacking regions nobody asked for.
_ACTIVE: "weakref.WeakKeyDictionary[torch.nn.Module, PrecisionPolicy]" = \
    weakref.WeakKeyDictionary()
_ACTIVE_LOCK = threading.Lock()

# The policies' regions currently entered on this thread live in the core
# (core/include/ampkit/policy_region.h), so that R's policies, which push there too, are seen
# by ampkit.autocast_audit without a call into Python per module call.
_push_region = _C.push_policy_region
_pop_region = _C.pop_policy_region
current_policy_dtype = _C.current_policy_dtype


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype)[6:]


def _module_name(name: str) -> str:
    """A module's name in messages: named_modules() names the model itself '', which a message
    would show as a slip."""
    return name or "(the model)"


@dataclasses.dataclass(frozen=True)
class ModuleType:
    """A module type in a rule of :func:`resolve_rules`, by its name: a rule keyed by it
    matches every module whose type names (its class and its base classes) include ``name``.
    Python's rules give a class (``torch.nn.Linear`` is ``ModuleType(
    "torch.nn.modules.linear.Linear")``); R's give a generator (``nn_linear`` is
    ``ModuleType("nn_linear")``)."""

    name: str

    def __str__(self) -> str:
        return self.name


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _rule_text(key: Any) -> str:
    if isinstance(key, ModuleType):
        return key.name
    if isinstance(key, type):
        return _type_name(key)
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
    """A predicate over (qualified name, type names) for one rule's key."""
    if isinstance(key, ModuleType):
        return lambda name, types: key.name in types
    if isinstance(key, str):
        if key.startswith("re:"):
            try:
                pattern = re.compile(key[3:])
            except re.error as error:
                raise _C.ArgumentError(
                    f"precision_policy: rule {key!r} is not a valid regular expression "
                    f"({error}).") from None
            return lambda name, types: pattern.fullmatch(name) is not None
        if any(c in key for c in "*?["):
            return lambda name, types: fnmatch.fnmatchcase(name, key)
        return lambda name, types: name == key
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


def _autocast_refusal(device: str, dtype: Optional[torch.dtype] = None) -> Optional[str]:
    """Why ampkit.autocast(device, dtype) would warn and run disabled here, silently not doing
    what a policy asks (None where it runs). A device string autocast does not know raises its
    own error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region = autocast(device, dtype=dtype)
    if region.enabled and not caught:
        return None
    return "; ".join(str(w.message) for w in caught) or "autocast is disabled there"


def _check_device(device: str, where: str) -> None:
    """Refuse a device type autocast cannot run on here (CUDA without CUDA): every rule would
    silently do nothing there."""
    why = _autocast_refusal(device)
    if why is not None:
        raise _C.ArgumentError(
            f"{where}: `device_type` {device!r} is one autocast cannot use here ({why}).")


def _check_autocast(key: Any, device: str, dtype: torch.dtype) -> None:
    """Refuse a dtype autocast cannot use on the device."""
    why = _autocast_refusal(device, dtype)
    if why is not None:
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
        _push_region(self.dtype)
        try:
            return self._run(args, kwargs)
        finally:
            _pop_region()

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
                 targets: List[Tuple[str, torch.nn.Module, torch.dtype, str]]) -> None:
        self.device_type = device_type
        self.modules: Dict[str, str] = {name: _dtype_name(d) for name, _, d, _ in targets}
        self._rules = {name: rule for name, _, _, rule in targets}  # the rule's text
        # module -> (the instance's own 'forward' before, if it had one; our wrapper)
        self._installed: List[Tuple[weakref.ref, Any, Any]] = []
        self._model = weakref.ref(model)
        with _ACTIVE_LOCK:
            for name, module, _, _ in targets:
                other = _ACTIVE.get(module)
                if other is not None:
                    raise _C.StateError(
                        f"precision_policy: module {_module_name(name)!r} already has a "
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
        inner = ", ".join(f"{_module_name(name)}: {dtype}"
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
    keyed = [(ModuleType(_type_name(key)) if isinstance(key, type)
              and issubclass(key, torch.nn.Module) else key, value)
             for key, value in rules.items()]
    resolved = resolve_rules([name for name, _ in named],
                             [[_type_name(c) for c in type(m).__mro__] for _, m in named],
                             keyed, device_type)
    targets = [(named[i][0], named[i][1], _DTYPES[dtype], rule) for i, dtype, rule in resolved]
    return PrecisionPolicy(model, device_type, targets)


def resolve_rules(names: Sequence[str], types: Sequence[Sequence[str]],
                  rules: Iterable[Tuple[Any, Any]],
                  device_type: str) -> List[Tuple[int, str, str]]:
    """Which modules a precision policy's rules give which dtype, and every error of the rules:
    the one statement of them, over plain values. :func:`precision_policy` calls it, and so
    does R's ``precision_policy()`` for a model of R modules (its names and class names).

    Each rule is checked in order: its dtype, its key, whether autocast can use the dtype on
    ``device_type``, whether it matches a module, whether it gives a module another rule's
    dtype (the first rule to claim a module names it).

    Args:
        names: each module's qualified name, in the model's order, each module once (``""``
            is the model itself).
        types: for each module, the names of its type and its base types.
        rules: ``(key, dtype)`` pairs, as :func:`precision_policy` takes them, a module type
            given as a :class:`ModuleType`.
        device_type: the device type of the policy's regions.

    Returns:
        ``(index in names, dtype name, the rule's text)`` for each matched module, in the
        model's order.

    Example:
        >>> from ampkit.precision_policy import ModuleType, resolve_rules
        >>> resolve_rules(["", "0", "1"], [["Net"], ["Linear"], ["ReLU"]],
        ...               [(ModuleType("Linear"), "float32"), ("re:1", "bfloat16")], "cpu")
        [(1, 'float32', 'Linear'), (2, 'bfloat16', "'re:1'")]
    """
    _check_device(device_type, "precision_policy")
    chosen: Dict[int, Tuple[torch.dtype, Any]] = {}
    for key, value in rules:
        dtype = _as_dtype(key, value)
        match = _matcher(key)
        if dtype != torch.float32:
            _check_autocast(key, device_type, dtype)
        hits = [i for i, name in enumerate(names) if match(name, types[i])]
        if not hits:
            shown = ", ".join(repr(_module_name(n)) for n in names[:12])
            more = f", ... ({len(names)} in all)" if len(names) > 12 else ""
            raise _C.ArgumentError(
                f"precision_policy: rule {_rule_text(key)} matches no module of the model; its "
                f"modules (model.named_modules()) are {shown}{more}.")
        for i in hits:
            earlier = chosen.get(i)
            if earlier is not None and earlier[0] != dtype:
                raise _C.ArgumentError(
                    f"precision_policy: rules {_rule_text(earlier[1])} "
                    f"({_dtype_name(earlier[0])}) and {_rule_text(key)} ({_dtype_name(dtype)}) "
                    f"both claim module {_module_name(names[i])!r}; make them agree or "
                    "narrow one of them.")
            if earlier is None:
                chosen[i] = (dtype, key)
    return [(i, _dtype_name(dtype), _rule_text(key)) for i, (dtype, key) in sorted(chosen.items())]
