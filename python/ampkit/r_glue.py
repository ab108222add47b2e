"""The R package's interface to ampkit's core: the autocast regions and the grad scalers, which
the R package ``ampkit`` reaches only through this module (the audit and precision tools it
calls as the public functions of ``ampkit``: ``autocast_audit``, ``precision_policy``,
``overflow_locator``, ``suggest_policy``). No private name of ampkit is read from R.

A rename elsewhere in ampkit then breaks this module's own tests (tests/python/test_r_glue.py),
not only the R suite. It holds no behaviour: each function sequences public calls or the core's,
and is shaped for R's side of reticulate, where each crossing costs tens of microseconds (a
region is entered in one call).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import _C
from .autocast import get_autocast_dtype, is_autocast_enabled
from .grad_scaler import _OPTIONS, GradScaler
from .sharded_grad_scaler import ShardedGradScaler

__all__ = ["DisabledRegion", "open_region", "enter_region", "exit_region", "region_is_open",
           "is_autocast_enabled", "get_autocast_dtype", "scaler_options", "new_scaler",
           "scaler_from_deepspeed", "scaler_from_megatron", "scale_tensor"]


class DisabledRegion:
    """A resolved request that carries a warning (the region will be disabled), returned by
    :func:`open_region` unentered, so that R can warn first: a warning turned into an error
    then leaves no region open. ``enter_region(region.request)`` enters it."""

    __slots__ = ("request", "warning")

    def __init__(self, request: Any) -> None:
        self.request = request
        self.warning = request.warning


def open_region(device_type: str, dtype: Any, enabled: bool, cache_enabled: Optional[bool]):
    """Resolves a request as torch.autocast does and enters it: the region's token, or a
    :class:`DisabledRegion` when the request carries a warning.

    Example:
        >>> from ampkit import r_glue
        >>> token = r_glue.open_region("cpu", None, True, None)
        >>> r_glue.is_autocast_enabled("cpu"), r_glue.region_is_open(token)
        (True, True)
        >>> r_glue.exit_region(token)
    """
    request = _C.resolve_autocast(device_type, dtype, enabled, cache_enabled)
    if request.warning:
        return DisabledRegion(request)
    return _C.enter_autocast(request)


enter_region = _C.enter_autocast
exit_region = _C.exit_autocast


def region_is_open(token: Any) -> bool:
    """Whether the region of ``token`` is still entered."""
    return token.active


def scaler_options() -> List[Tuple[str, Any]]:
    """The scaler's options and their defaults, in signature order (the core's table).

    Example:
        >>> from ampkit import r_glue
        >>> r_glue.scaler_options()[:2]
        [('init_scale', 65536.0), ('growth_factor', 2.0)]
    """
    return list(_OPTIONS.items())


def new_scaler(device: str, options: Dict[str, Any], process_group: Any = None) -> GradScaler:
    """A GradScaler with ``options`` by name; with a process group, a ShardedGradScaler."""
    if process_group is None:
        return GradScaler(device, **options)
    return ShardedGradScaler(device, process_group=process_group, **options)


def scaler_from_deepspeed(config: Any, device: str) -> GradScaler:
    """:meth:`GradScaler.from_deepspeed`."""
    return GradScaler.from_deepspeed(config, device)


def scaler_from_megatron(device: str, **arguments: Any) -> GradScaler:
    """:meth:`GradScaler.from_megatron`."""
    return GradScaler.from_megatron(device=device, **arguments)


def scale_tensor(scaler: GradScaler) -> Any:
    """The scale tensor itself (R torch's ``scaler$.scale``), or None before the first scale."""
    return scaler._scale
