"""Glue for ampkit's R package: entering an autocast region in one call from R.

Each call from R into Python costs tens of microseconds in reticulate, far more than the core's
work, so the R package crosses once per region boundary: ``open_region`` here, then
``ampkit._C.exit_autocast``. No behaviour lives here; it only sequences two core calls.
"""

from ampkit import _C

_resolve = _C.resolve_autocast
_enter = _C.enter_autocast


def open_region(device_type, dtype, enabled, cache_enabled):
    """Resolve a request as torch.autocast does and enter it; returns the region's token.

    A request that carries a warning (the region is disabled) is returned unentered, so that R
    can emit the warning before entering it: a warning turned into an error leaves no region open.
    """
    request = _resolve(device_type, dtype, enabled, cache_enabled)
    if request.warning:
        return request
    return _enter(request)
