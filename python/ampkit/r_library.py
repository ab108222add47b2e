"""Where the R package ampkit is installed: an R library of the Python environment that ampkit's
Python package is installed in, beside it, never R's global site library.

The R package is built against this environment's torch and records its Python
(``tools/install_rpkg.sh``), so it belongs to the environment as the Python package does: a
checkout's ``.venv`` holds both, and deleting the checkout leaves nothing behind that points
into it. R finds a library outside its own through ``R_LIBS``; the R processes ampkit starts
(the benchmark's R runner, :func:`ampkit.r_eval`'s embedded R) are given it by
:func:`r_environ`, and an R user gives it to R once::

    R_LIBS=$(.venv/bin/python -m ampkit r-library) R
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Dict, Mapping, Optional

__all__ = ["r_library", "r_environ"]


def r_library() -> pathlib.Path:
    """The R library that ``make setup`` installs the R package ampkit into: ``lib/ampkit-R``
    under this Python's environment (``sys.prefix``; the checkout's ``.venv/lib/ampkit-R``).

    Example:
        >>> from ampkit.r_library import r_library
        >>> r_library().relative_to(sys.prefix).as_posix()
        'lib/ampkit-R'
    """
    return pathlib.Path(sys.prefix) / "lib" / "ampkit-R"


def r_environ(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """A copy of ``environ`` (default ``os.environ``) in which an R process finds the R package
    ampkit: :func:`r_library` first in ``R_LIBS``, where that library exists, ahead of the
    libraries already named there.

    Example:
        >>> from ampkit.r_library import r_environ, r_library
        >>> env = r_environ({"R_LIBS": "/opt/r-libs"})
        >>> env["R_LIBS"] == (f"{r_library()}:/opt/r-libs" if r_library().is_dir()
        ...                   else "/opt/r-libs")
        True
    """
    env = dict(os.environ if environ is None else environ)
    library = r_library()
    if library.is_dir():
        others = [p for p in env.get("R_LIBS", "").split(os.pathsep) if p and p != str(library)]
        env["R_LIBS"] = os.pathsep.join([str(library), *others])
    return env
