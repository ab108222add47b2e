"""The R side of the benchmark: the installed R package's runner (``inst/bench/run.R``).

Whether R can run here is decided only in :func:`r_unavailable`; the benchmark CLI and the tests
both ask it. The runner is found in the *installed* R package, so a pip-installed ampkit with the
R package installed runs the R cells from any directory, not only from a checkout.

The R runner is an Rscript process of its own (:class:`RSession`) that answers commands, so that
its steps take turns with the Python runner's (:class:`RCell`, driven by
``training.run_python_cells``): both languages are timed at the same moments of the machine, not
minutes apart, and each R repeat is paired with the Python repeat made of the steps beside it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import torch

from . import measure

_FIND_RUNNER = (
    "if (!requireNamespace('ampkit', quietly = TRUE)) quit(status = 3); "
    "cat(system.file('bench', 'run.R', package = 'ampkit'))"
)
_ANSWER = "AMPKIT "

# The float32 product of the "R against Python" table: (M x K) @ (K x N), R torch's 512x2048
# layer.
MATMUL = (512, 2048, 2048)


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


class RSession:
    """One Rscript process running the R runner, with as many torch threads as this process.

    ``torch_first``: R imports torch before ampkit's first call (the import order of
    ``library(ampkit); torch <- reticulate::import("torch")``).

    Example:
        >>> with RSession("cpu") as r:                       # doctest: +SKIP
        ...     r.request("matmul", 64, 64, 64, 3)["seconds"]
    """

    def __init__(self, device: str, torch_first: bool = False) -> None:
        script, reason = _probe()
        if script is None:
            raise RuntimeError(f"the R runner cannot run: {reason}")
        env = dict(os.environ, RETICULATE_PYTHON=sys.executable)
        cmd = ["Rscript", script, device, str(torch.get_num_threads())]
        self.proc = subprocess.Popen(cmd + (["torch-first"] if torch_first else []), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self._answer()  # ready: its torch has been imported and given the thread count

    def _answer(self) -> Any:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(_ANSWER):
                return json.loads(line[len(_ANSWER):])
        code = self.proc.wait()
        raise RuntimeError(f"the R runner stopped (exit {code}); its messages are above")

    def request(self, *words: Any) -> Any:
        """Sends one command (see run.R) and returns its answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\t".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def cell(self, suite: Dict[str, Any], size_name: str, mode: str) -> "RCell":
        """The R cell of `suite` in `mode`, built and warmed up."""
        self.request("cell", suite["path"], size_name, mode)
        return RCell(self)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("quit")
            except (RuntimeError, OSError):
                pass
            self.proc.wait(timeout=60)

    def __enter__(self) -> "RSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RCell:
    """A training cell driven from R: one timed step at a time (the Python runner interleaves
    them with its own), then the loss it ended with."""

    def __init__(self, session: RSession) -> None:
        self.session = session

    def timed_step(self) -> "tuple[float, int]":
        """One step of the R loop: its seconds, and the R process's peak memory during it."""
        answer = self.session.request("step")
        return float(answer["seconds"]), int(answer["peak_bytes"])

    def final_loss(self) -> float:
        return float(self.session.request("loss")["loss"])


def _spread(pairs: List[float]) -> Dict[str, float]:
    """The median of `pairs` and their spread: the quartiles (the middle half of them)."""
    if len(pairs) < 2:
        return {"ratio": pairs[0], "low": pairs[0], "high": pairs[0]}
    low, median, high = statistics.quantiles(pairs, n=4, method="inclusive")
    return {"ratio": median, "low": low, "high": high}


def compare_rows(training: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """R against ampkit-py, cell by cell, from the repeats that ran side by side: the R loop's
    throughput over Python's in each pair of repeats (the i-th of each), their median and
    spread (quartiles). `unsure` marks a cell whose spread is wider than its median's distance
    from 1: R and Python are not told apart there."""
    index = {(r["workload"], r["mode"], r["impl"]): r for r in training}
    rows = []
    for r in training:
        py = index.get((r["workload"], r["mode"], "ampkit-py"))
        if r["impl"] != "ampkit-r" or py is None:
            continue
        cell = _spread([p / q for p, q in zip(py["times_s"], r["times_s"])])
        rows.append({"what": f"{r['workload']} {r['mode']}", **cell,
                     "unsure": cell["high"] - cell["low"] > abs(cell["ratio"] - 1)})
    return rows


def matmul_rows(device: str, repeats: int = 7, number: int = 5) -> List[Dict[str, Any]]:
    """A float32 product (MATMUL) timed in Python and in R, in R with either import order
    (ampkit's call first; torch first), each repeat `number` products in Python then `number`
    in R: milliseconds per product (median over all) and R's time over Python's (the median
    and quartiles over repeats of their medians' ratio)."""
    m, k, n = MATMUL
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    torch.mm(a, b)
    rows = []
    for torch_first in (False, True):
        py_ms: List[List[float]] = []
        r_ms: List[List[float]] = []
        with RSession(device, torch_first=torch_first) as r:
            r.request("matmul", m, k, n, 1)  # warm-up
            for _ in range(repeats):
                times = []
                measure.settle()
                for _ in range(number):
                    start = time.perf_counter()
                    torch.mm(a, b)
                    times.append((time.perf_counter() - start) * 1e3)
                py_ms.append(times)
                measure.settle()
                r_ms.append([s * 1e3 for s in r.request("matmul", m, k, n, number)["seconds"]])
        pairs = [statistics.median(q) / statistics.median(p) for p, q in zip(py_ms, r_ms)]
        rows.append({"what": f"float32 mm {m}x{k} @ {k}x{n}, R "
                             + ("torch imported first" if torch_first else "ampkit first"),
                     "python_ms": statistics.median(x for p in py_ms for x in p),
                     "r_ms": statistics.median(x for q in r_ms for x in q),
                     **_spread(pairs)})
    return rows


def op_rows(device: str, repeats: int = 7, number: int = 2000) -> List[Dict[str, Any]]:
    """One small tensor op (x + x, 8x8 float32) from Python, from R's front end (R torch's
    `x + x` on torch_tensor objects) and from R through reticulate alone (`torch$add(x, x)`):
    microseconds per op (median over repeats of `number` ops each), and R's time over
    Python's. What an R user pays per op is the crossing, not ampkit's work."""
    x = torch.randn(8, 8, device=device)
    python_us: List[float] = []
    r_us: Dict[str, List[float]] = {"front_end": [], "reticulate": []}
    with RSession(device) as r:
        r.request("op", 100)  # warm-up
        for _ in range(repeats):
            measure.settle()
            start = time.perf_counter()
            for _ in range(number):
                x + x
            python_us.append((time.perf_counter() - start) / number * 1e6)
            measure.settle()
            answer = r.request("op", number)
            for key in r_us:
                r_us[key].append(answer[key] * 1e6)
    rows = []
    for key, what in (("front_end", "x + x, R front end (torch_tensor)"),
                      ("reticulate", "x + x, R via reticulate (torch$add)")):
        pairs = [q / p for p, q in zip(python_us, r_us[key])]
        rows.append({"what": what, "python_ms": statistics.median(python_us) / 1e3,
                     "r_ms": statistics.median(r_us[key]) / 1e3, **_spread(pairs),
                     "per_op": True})
    return rows


def _time_block(title: str, rows: List[Dict[str, Any]], width: int, unit: str, per_ms: float,
                digits: int, goal: Optional[float] = None) -> List[str]:
    """A table of times in Python and in R and R's time over Python's (median and quartiles):
    each row's milliseconds times `per_ms`, in `unit`; with `goal`, whether R/py <= goal."""
    header = (f"{title:<{width}} {'py ' + unit:>7} {'R ' + unit:>7} {'R/py':>6} "
              f"{'quartiles':>13}" + (f"  ok (R/py time <= {goal:.2f})" if goal else ""))
    lines = ["", header, "-" * len(header)]
    for r in rows:
        line = (f"{r['what']:<{width}} {r['python_ms'] * per_ms:>7.2f} "
                f"{r['r_ms'] * per_ms:>7.2f} {r['ratio']:>6.{digits}f} "
                f"{r['low']:>6.{digits}f}-{r['high']:<6.{digits}f}")
        if goal:
            line += "  " + ("yes" if r["ratio"] <= goal else "NO")
        lines.append(line.rstrip())
    return lines


def r_table(compared: List[Dict[str, Any]], matmul: List[Dict[str, Any]]) -> str:
    """The R runner against Python: training throughput ratios with their spread over paired
    repeats, and the float32 product's time ratio (goal <= 1.10)."""
    width = max([len("R against Python"), len("one tensor op (per op)")]
                + [len(r["what"]) for r in compared + matmul])
    lines = []
    if compared:
        header = f"{'R against Python':<{width}} {'R/py':>6} {'quartiles':>13}  note"
        lines += [header, "-" * len(header)]
        for r in compared:
            note = "not told apart (spread wider than the difference)" if r["unsure"] else ""
            lines.append(f"{r['what']:<{width}} {r['ratio']:>6.3f} "
                         f"{r['low']:>6.3f}-{r['high']:<6.3f}  {note}".rstrip())
        lines.append("R/py: steps/s of the R loop over the Python loop (>1: R faster), median "
                     "over repeats run side by side")
    products = [r for r in matmul if not r.get("per_op")]
    if products:
        lines += _time_block("float32 matmul", products, width, "ms", 1.0, 3, goal=1.10)
    ops = [r for r in matmul if r.get("per_op")]
    if ops:
        lines += _time_block("one tensor op (per op)", ops, width, "us", 1e3, 1)
    return "\n".join(lines)
