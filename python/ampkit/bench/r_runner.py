"""The R side of the benchmark: the installed R package's runner (``inst/bench/run.R``).

Whether R can run here is decided only in :func:`r_unavailable`; the benchmark CLI and the tests
both ask it. The runner is found in the *installed* R package, so a pip-installed ampkit with the
R package installed runs the R cells from any directory, not only from a checkout.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

_FIND_RUNNER = (
    "if (!requireNamespace('ampkit', quietly = TRUE)) quit(status = 3); "
    "cat(system.file('bench', 'run.R', package = 'ampkit'))"
)


@functools.lru_cache(maxsize=1)
def _probe() -> "tuple[Optional[str], Optional[str]]":
    """(path of run.R, None) when R can run the benchmark, else (None, the reason)."""
    if shutil.which("Rscript") is None:
        return None, "Rscript not found (install R: make setup)"
    probe = subprocess.run(["Rscript", "-e", _FIND_RUNNER], capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.strip():
        return None, "the R package ampkit is not installed (make setup)"
    return probe.stdout.strip(), None


def r_unavailable() -> Optional[str]:
    """None when the R runner can run here, else why not (for a skip reason or a table note).

    Example:
        >>> from ampkit.bench.r_runner import r_unavailable
        >>> reason = r_unavailable()   # None where R and the R package ampkit are installed
    """
    return _probe()[1]


def run_r_cells(suite: Dict[str, Any], size_name: str, device: str) -> List[Dict[str, Any]]:
    """The training cells of ``suite`` driven from R, in an Rscript process of its own."""
    script, reason = _probe()
    if script is None:
        raise RuntimeError(f"the R runner cannot run: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        env = dict(os.environ, RETICULATE_PYTHON=sys.executable)
        proc = subprocess.run(["Rscript", script, suite["path"], size_name, device, out],
                              env=env, stderr=None, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"R runner failed for {suite['name']} (exit {proc.returncode})")
        with open(out) as f:
            return json.load(f)
