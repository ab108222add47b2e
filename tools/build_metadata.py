"""scikit-build-core metadata provider: the wheel depends on the torch it is built against.

The extension links libtorch's C++ ABI, so another torch fails at import; declaring
`torch==<the version built against>` lets pip say so before that, as torchvision's wheels do.
"""

from __future__ import annotations

from typing import Any, Mapping


def dynamic_metadata(field: str, settings: Mapping[str, Any], project: Mapping[str, Any]):
    if field != "dependencies":
        raise RuntimeError(f"build_metadata provides only `dependencies`, not {field!r}")
    try:
        import torch
    except ImportError as error:  # pragma: no cover - the build itself needs torch
        raise RuntimeError(
            "ampkit builds against an installed torch: install torch (e.g. torch==2.13.0) "
            "and build with --no-build-isolation") from error
    release = torch.__version__.split("+")[0]  # 2.13.0+cpu -> torch==2.13.0 (any local build)
    return [f"torch=={release}"]
