"""ampkit: automatic mixed precision with one C++ core for Python and R.

``ampkit.autocast`` and ``ampkit.GradScaler`` are drop-ins for ``torch.autocast`` and
``torch.amp.GradScaler``: the same API, the same thread-local state, bit-identical results.
"""

from importlib.metadata import PackageNotFoundError, version

import torch  # noqa: F401  (loads libtorch before the extension that links against it)

from ._C import ArgumentError, ArgumentTypeError, ScaleCollapseError, StateError
from .autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler
from .sharded_grad_scaler import ShardedGradScaler

try:
    __version__ = version("ampkit")  # pyproject.toml is the one source of the version
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "unknown"

__all__ = [
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "GradScaler",
    "ShardedGradScaler",
    "ArgumentError",
    "ArgumentTypeError",
    "StateError",
    "ScaleCollapseError",
]
