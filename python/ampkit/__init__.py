"""ampkit: automatic mixed precision with one C++ core for Python and R.

``ampkit.autocast`` and ``ampkit.GradScaler`` are drop-ins for ``torch.autocast`` and
``torch.amp.GradScaler``: the same API, the same thread-local state, bit-identical results.
"""

from importlib.metadata import PackageNotFoundError, version

import torch  # noqa: F401  (loads libtorch before the extension that links against it)

from ._build_info import TORCH_VERSION as _BUILT_AGAINST

if torch.__version__.split("+")[0] != _BUILT_AGAINST.split("+")[0]:  # +cpu, +cu128: same ABI
    # The extension links libtorch's C++ ABI: another torch would fail with undefined symbols.
    raise ImportError(
        f"ampkit was built against torch {_BUILT_AGAINST}, but torch {torch.__version__} is "
        "installed. Rebuild ampkit against this torch: `python -m pip install "
        "--no-build-isolation --force-reinstall --no-deps /path/to/ampkit` (or `make setup` in "
        f"the ampkit repository), or install torch=={_BUILT_AGAINST}.")

from ._C import (
    ArgumentError,
    ArgumentTypeError,
    DeviceStringError,
    MissingKeyError,
    ScaleCollapseError,
    StateError,
)
from .audit import autocast_audit
from .autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler
from .overflow_locator import PolicySuggestion, overflow_locator, suggest_policy
from .precision_policy import PrecisionPolicy, precision_policy
from .r_eval import r_eval
from .sharded_grad_scaler import ShardedGradScaler

try:
    __version__ = version("ampkit")  # pyproject.toml is the one source of the version
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "unknown"

__all__ = [
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "autocast_audit",
    "GradScaler",
    "ShardedGradScaler",
    "ArgumentError",
    "ArgumentTypeError",
    "DeviceStringError",
    "MissingKeyError",
    "StateError",
    "ScaleCollapseError",
    "r_eval",
    "precision_policy",
    "PrecisionPolicy",
    "overflow_locator",
    "suggest_policy",
    "PolicySuggestion",
]
