"""ampkit: automatic mixed precision with one C++ core for Python and R.

``ampkit.autocast`` and ``ampkit.GradScaler`` are drop-ins for ``torch.autocast`` and
``torch.amp.GradScaler``: the same API, the same thread-local state, bit-identical results.
"""

import torch  # noqa: F401  (loads libtorch before the extension that links against it)

from ._C import ArgumentError, ArgumentTypeError, StateError
from .autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__version__ = "0.1.0"

__all__ = [
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "GradScaler",
    "ArgumentError",
    "ArgumentTypeError",
    "StateError",
]
