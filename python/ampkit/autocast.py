"""``ampkit.autocast``: torch.autocast's API over the C++ autocast guard."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import torch

from . import _C
from ._on_import import when_imported

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype"]

F = TypeVar("F", bound=Callable[..., Any])

_enter, _exit, _unwind = _C.enter_autocast, _C.exit_autocast, _C.unwind_autocast
_is_compiling = _C.is_compiling


# A device_type that is not a str: an ampkit.ArgumentTypeError (a TypeError) and the ValueError
# torch.autocast raises for it, with torch's message first. Raised by the core's binding, which
# converts autocast's arguments (python/src/bindings.cpp).
DeviceTypeTypeError = _C.DeviceTypeTypeError


class autocast(_C.AutocastRegion):
    """Run a region with autocasting, exactly as :class:`torch.autocast` does.

    Same signature and semantics as ``torch.autocast`` 2.13, and the same thread-local state, so
    ``torch.is_autocast_enabled("cpu")`` is ``True`` inside ``ampkit.autocast("cpu")`` and regions
    nest with ``torch.autocast`` in either order. Entering and leaving run in the C++ core. Usable
    as a context manager or as a decorator.

    Args:
        device_type: ``"cpu"``, ``"cuda"``, ... (``"cuda:0"`` means its type, as in torch).
        dtype: the lower-precision dtype; ``None`` means the device's current autocast dtype
            (bfloat16 on the CPU, float16 on CUDA unless changed).
        enabled: ``False`` makes a region with autocast off (for nesting).
        cache_enabled: keep the weight-cast cache in the region; ``None`` means the current flag.

    CUDA asked for without a CUDA device, or a dtype the device cannot autocast to, warns and gives
    a disabled region, as torch.autocast does. Errors are torch's types with ampkit's classes: an
    invalid device string raises ``ampkit.DeviceStringError`` (an ``ArgumentError`` and the
    ``RuntimeError`` torch raises), a ``device_type`` that is not a str a ``TypeError`` that is
    also torch's ``ValueError``, another argument of the wrong type a ``TypeError``.

    Under ``torch.compile`` (``fullgraph=True`` included), ``ampkit.autocast`` built inside the
    compiled function, as a ``with`` or as a decorator, is ``torch.autocast`` to Dynamo: the same
    graph, dtypes and outputs, no extra recompiles.


    Example:
        >>> import torch, ampkit
        >>> a = torch.randn(4, 4)
        >>> with ampkit.autocast("cpu", dtype=torch.bfloat16):
        ...     (a @ a).dtype
        torch.bfloat16
        >>> @ampkit.autocast("cpu")
        ... def forward(x):
        ...     return x @ x
        >>> forward(a).dtype
        torch.bfloat16
    """

    # Construction, __enter__ and __exit__ are the core's (see python/src/bindings.cpp): a region
    # is resolved once, as torch.autocast.__init__ resolves it, then entered re-entrantly (a
    # stack of tokens), so a nested `with` of one instance restores each level. Properties, as
    # torch.autocast's attributes: device, fast_dtype, enabled, cache_enabled.
    #
    # __new__ and __init__ are C functions (_C.new_region, _C.region_init): ampkit.autocast(...)
    # is built in __new__ with no Python frame, and __init__ finds it built. A subclass with an
    # __init__ of its own (torch.cpu.amp.autocast's pattern) gets an empty instance from __new__,
    # and its super().__init__(device_type, ...) builds the region. While torch.compile traces,
    # __new__ returns torch.autocast(...), which Dynamo understands (it cannot trace a pybind11
    # class's construction). The signature is torch.autocast's:
    # (device_type, dtype=None, enabled=True, cache_enabled=None).
    __slots__ = ()
    __new__ = staticmethod(_C.new_region)
    __init__ = _C.region_init

    def __call__(self, func: F) -> F:
        if not callable(func):
            # torch's message (its tests check it), with ampkit's class (a TypeError).
            raise _C.ArgumentTypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you "
                "mean to use autocast as a context manager? For example:\n"
                "    with ampkit.autocast(device_type=...):\n        output = model(input)")
        request = self.request

        device, dtype, enabled, cache = self.device, self.fast_dtype, self.enabled, \
            self.cache_enabled

        @functools.wraps(func)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            if _is_compiling():  # Dynamo traces torch.autocast, not the core's tokens
                with torch.amp.autocast(device, dtype=dtype, enabled=enabled,
                                        cache_enabled=cache):
                    return func(*args, **kwargs)
            # A token per call, not the instance's stack: the decorated function may run on
            # several threads at once, or recursively.
            token = _enter(request)
            try:
                result = func(*args, **kwargs)
            except BaseException:
                _unwind(token)  # closes what func left open inside; the exception goes on
                raise
            _exit(token)
            return result

        return decorated  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"ampkit.autocast(device_type={self.device!r}, dtype={self.fast_dtype}, "
            f"enabled={self.enabled}, cache_enabled={self.cache_enabled})"
        )


# The class's tp_init slot is region_init's C function itself: type.__call__ then calls it with
# no lookup of __init__ and no method call (0.1 us of the 0.3 us a construction costs). The class
# keeps region_init as its __init__, which a subclass's super().__init__ finds.
_C.install_region_init(autocast)


def is_autocast_enabled(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` on this thread.

    The same answer as ``torch.is_autocast_enabled(device_type)``.

    Example:
        >>> import ampkit
        >>> with ampkit.autocast("cpu"):
        ...     ampkit.is_autocast_enabled("cpu")
        True
    """
    return _C.is_autocast_enabled(device_type)


def get_autocast_dtype(device_type: str) -> torch.dtype:
    """The dtype autocast uses for ``device_type`` on this thread.

    The same answer as ``torch.get_autocast_dtype(device_type)``.

    Example:
        >>> import torch, ampkit
        >>> with ampkit.autocast("cpu", dtype=torch.float16):
        ...     ampkit.get_autocast_dtype("cpu")
        torch.float16
    """
    return _C.get_autocast_dtype(device_type)


def _is_compiling_in_graph() -> bool:
    """What Dynamo runs in place of _C.is_compiling, which it cannot trace."""
    return torch.compiler.is_compiling()


def _new_region_in_graph(cls, device_type, dtype=None, enabled=True, cache_enabled=None):
    """What Dynamo runs in place of ampkit.autocast.__new__: torch.autocast, which it traces."""
    return torch.amp.autocast(device_type, dtype=dtype, enabled=enabled,
                              cache_enabled=cache_enabled)


def _substitute_in_graphs() -> None:
    substitute = torch.compiler.substitute_in_graph
    substitute(_C.is_compiling, skip_signature_check=True)(_is_compiling_in_graph)
    substitute(_C.new_region, skip_signature_check=True)(_new_region_in_graph)


# Once Dynamo is imported: substitute_in_graph imports it, which takes as long as `import torch`.
when_imported("torch._dynamo", _substitute_in_graphs)
