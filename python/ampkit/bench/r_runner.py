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
import gc
import json
import shutil
import statistics
import subprocess
import sys
import time
import timeit
from typing import Any, Dict, List, Optional

import torch

from ..r_library import r_environ
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
    probe = subprocess.run(["Rscript", "-e", _FIND_RUNNER], capture_output=True, text=True,
                           env=r_environ())
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

    Example:
        >>> with RSession("cpu") as r:                       # doctest: +SKIP
        ...     r.request("matmul", 64, 64, 64, 3)["seconds"]
    """

    def __init__(self, device: str) -> None:
        script, reason = _probe()
        if script is None:
            raise RuntimeError(f"the R runner cannot run: {reason}")
        cmd = ["Rscript", script, device, str(torch.get_num_threads())]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1, env=r_environ())
        self._answer()  # ready: the package is loaded and its torch given the thread count

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

    def cell(self, suite: Dict[str, Any], size_name: str, mode: str) -> "Optional[RCell]":
        """The R cell of `suite` in `mode`, built and warmed up; None for a suite with
        ``"r": false`` (a model the R runner does not build)."""
        if not suite.get("r", True):
            return None
        answer = self.request("cell", suite["path"], size_name, mode)
        if "skipped" in answer:
            raise RuntimeError(f"suite {suite['name']!r}: {answer['skipped']} "
                               '(give the suite "r": false)')
        return RCell(self)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("quit")
            except (RuntimeError, OSError):
                pass
            self.proc.wait(timeout=60)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> "RSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RCell:
    """A training cell driven from R: one timed step at a time (the Python runner interleaves
    them with its own), then the loss it ended with."""

    def __init__(self, session: RSession) -> None:
        self.session = session
        # Over the timed steps: steps, seconds, and the package's garbage collections for tensor
        # memory (young ones, the full ones among them, their seconds).
        self.collections: Dict[str, Any] = {"steps": 0, "seconds": 0.0, "young": 0, "full": 0,
                                            "collect_seconds": 0.0}

    def timed_steps(self, count: int = 1) -> "tuple[float, int]":
        """`count` steps of the R loop, back to back: their seconds, and the R process's peak
        memory during them."""
        answer = self.session.request("step", count)
        seconds = float(answer["seconds"])
        c = self.collections
        c["steps"] += count
        c["seconds"] += seconds
        if "collect_seconds" in answer:  # an R package older than these counts has none
            c["young"] += int(answer["collections"])
            c["full"] += int(answer["full"])
            c["collect_seconds"] += float(answer["collect_seconds"])
        else:
            c["collect_seconds"] = None
        return seconds, int(answer["peak_bytes"])

    def untimed_steps(self, count: int = 1) -> None:
        """`count` steps of the R loop whose time and collections no row counts."""
        self.session.request("step", count)

    def collection_fields(self) -> Dict[str, Optional[float]]:
        """For the cell's row: the share of the R loop's time spent in the package's garbage
        collections, and collections (all, full) per step (None where the R package does not
        count them)."""
        c = self.collections
        steps = max(c["steps"], 1)
        if c["collect_seconds"] is None:
            return dict.fromkeys(("collect_share", "collections_per_step", "full_per_step"))
        return {"collect_share": c["collect_seconds"] / c["seconds"] if c["seconds"] else 0.0,
                "collections_per_step": c["young"] / steps, "full_per_step": c["full"] / steps}

    def final_loss(self) -> float:
        return float(self.session.request("loss")["loss"])


def _spread(pairs: List[float]) -> Dict[str, float]:
    """The median of `pairs` and their spread: the quartiles (the middle half of them)."""
    if len(pairs) < 2:
        return {"ratio": pairs[0], "low": pairs[0], "high": pairs[0]}
    low, median, high = statistics.quantiles(pairs, n=4, method="inclusive")
    return {"ratio": median, "low": low, "high": high}


# The goals for R against Python: a whole training step from R within 1.25x of Python's
# (throughput R/py >= 0.8); R torch's article loop at its sizes >= 0.95; the R process's peak
# memory within 1.2x of the Python process's on the same workload.
STEP_GOAL = 1 / 1.25
ARTICLE_GOAL = 0.95
GPU_GOAL = 0.95  # every R loop on CUDA (the seeds' MLP among them), as the article loop
MEMORY_GOAL = 1.2


def compare_rows(training: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """R against ampkit-py, cell by cell, from the repeats that ran side by side: the R loop's
    throughput over Python's in each pair of repeats (the i-th of each), their median and
    spread (quartiles), with the goal; and the R process's peak memory over the Python
    process's. `unsure` marks a cell whose spread is wider than its median's distance from 1:
    R and Python are not told apart there."""
    index = {(r["workload"], r["mode"], r["impl"]): r for r in training}
    rows = []
    for r in training:
        py = index.get((r["workload"], r["mode"], "ampkit-py"))
        if r["impl"] != "ampkit-r" or py is None:
            continue
        cell = _spread([p / q for p, q in zip(py["times_s"], r["times_s"])])
        goal = (GPU_GOAL if r["device"] == "cuda"
                else ARTICLE_GOAL if r["workload"] == "rtorch_article" else STEP_GOAL)
        rows.append({"what": f"{r['workload']} {r['mode']}", **cell, "goal": goal,
                     "memory": r["peak_bytes"] / py["peak_bytes"] if py["peak_bytes"] else None,
                     "unsure": cell["high"] - cell["low"] > abs(cell["ratio"] - 1),
                     "collect_share": r.get("collect_share"),
                     "full_per_step": r.get("full_per_step")})
    return rows


def matmul_rows(device: str, repeats: int = 7, number: int = 5) -> List[Dict[str, Any]]:
    """A float32 product (MATMUL) timed in Python and in R, each repeat `number` products in
    Python then `number` in R: milliseconds per product (median over all) and R's time over
    Python's (the median and quartiles over repeats of their medians' ratio). The R package
    loads libtorch so that its products run libtorch's own BLAS, not R's: this row shows it."""
    m, k, n = MATMUL
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(device)
    b = torch.randn(k, n, generator=g).to(device)
    torch.mm(a, b)
    py_ms: List[List[float]] = []
    r_ms: List[List[float]] = []
    with RSession(device) as r:
        r.request("matmul", m, k, n, 1)  # warm-up
        for _ in range(repeats):
            measure.settle()
            py_ms.append([measure.timed(lambda: torch.mm(a, b), device) * 1e3
                          for _ in range(number)])
            measure.settle()
            r_ms.append([s * 1e3 for s in r.request("matmul", m, k, n, number)["seconds"]])
    pairs = [statistics.median(q) / statistics.median(p) for p, q in zip(py_ms, r_ms)]
    return [{"what": f"float32 mm {m}x{k} @ {k}x{n}",
             "python_ms": statistics.median(x for p in py_ms for x in p),
             "r_ms": statistics.median(x for q in r_ms for x in q), **_spread(pairs)}]


# The per-op rows: each R expression of run.R's OPS (the same names) against its Python twin,
# timed the same way (inline in a loop, `number` calls). Goals: the issue's, in microseconds.
OPS = {
    "torch_add(x, y), 2x2": ("torch.add(x2, y2)", 3.0),
    "x + y, 2x2": ("x2 + y2", 5.0),
    "torch_matmul, 64x64": ("torch.matmul(a64, b64)", None),
    "x$sum(dim = 1), 64x64": ("a64.sum(dim=0)", None),
    "x[1, ], 64x64": ("a64[0, :]", None),
    "x[1:2, ], 64x64": ("a64[0:2, :]", None),
    "x$view(-1, 64), 64x64": ("a64.view(-1, 64)", None),
    "torch_zeros(32, 10)": ("torch.zeros(32, 10, device=device)", None),
    "nn_linear(10, 32) forward, batch 32": ("linear(input)", None),
    "nnf_cross_entropy, batch 32, 10 classes": (
        "torch.nn.functional.cross_entropy(logits, classes)", None),
    "$parameters of a 3-layer nn_sequential": ("list(mlp.parameters())", None),
    "with_autocast enter+exit": ("with ampkit.autocast(device):\n    pass", 3.0),
    "scaler scale/step/update": ("scaler.scale(loss); scaler.step(opt); scaler.update()", None),
    "optim_adam step, nn_linear(10, 32)": ("adam.step()", None),
    "optim_sgd step, momentum, nn_linear(10, 32)": ("sgd.step()", None),
    "optim_rmsprop step, nn_linear(10, 32)": ("rmsprop.step()", None),
}


def _op_fixtures(device: str) -> Dict[str, Any]:
    """The Python twins of run.R's fixtures()."""
    import ampkit

    torch.manual_seed(0)
    linear = torch.nn.Linear(10, 32).to(device)
    for p in linear.parameters():
        p.grad = torch.ones_like(p)
    return {"torch": torch, "ampkit": ampkit, "device": device,
            "x2": torch.randn(2, 2, device=device), "y2": torch.randn(2, 2, device=device),
            "a64": torch.randn(64, 64, device=device), "b64": torch.randn(64, 64, device=device),
            "linear": linear, "input": torch.randn(32, 10, device=device),
            "logits": torch.randn(32, 10, device=device),
            "classes": torch.randint(0, 10, (32,), device=device),
            "mlp": torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1)).to(device),
            "scaler": ampkit.GradScaler(device),
            "opt": torch.optim.SGD(linear.parameters(), lr=0.0),
            "adam": torch.optim.Adam(linear.parameters(), lr=0.0),
            "sgd": torch.optim.SGD(linear.parameters(), lr=0.0, momentum=0.9),
            "rmsprop": torch.optim.RMSprop(linear.parameters(), lr=0.0),
            "loss": torch.ones(1, device=device)}


def op_rows(device: str, repeats: int = 7, number: int = 2000) -> List[Dict[str, Any]]:
    """Each call of OPS from Python and from R, in turn, `repeats` times `number` calls:
    microseconds per call (median over repeats) and R's time over Python's (median and
    quartiles over the paired repeats), with the issue's goal for R where it set one."""
    env = _op_fixtures(device)
    timers = {name: timeit.Timer(stmt, globals=env) for name, (stmt, _) in OPS.items()}
    python_us: Dict[str, List[float]] = {name: [] for name in OPS}
    r_us: Dict[str, List[float]] = {name: [] for name in OPS}
    with RSession(device) as r:
        r.request("ops", 100)  # warm-up
        for timer in timers.values():
            timer.timeit(100)
        for _ in range(repeats):
            measure.settle()
            for name, timer in timers.items():
                gc.collect()  # each row from a collected heap, as R's rows (run.R)
                measure.synchronize(device)
                python_us[name].append(timer.timeit(number) / number * 1e6)
            measure.settle()
            answer = r.request("ops", number)
            for name in OPS:
                r_us[name].append(answer[name] * 1e6)
    rows = []
    for name, (_, goal) in OPS.items():
        pairs = [q / p for p, q in zip(python_us[name], r_us[name])]
        rows.append({"what": name, "python_ms": statistics.median(python_us[name]) / 1e3,
                     "r_ms": statistics.median(r_us[name]) / 1e3, **_spread(pairs),
                     "per_op": True, "goal_us": goal})
    return rows


# Start-up: a whole process that loads the library and runs a first tensor op.
STARTUP = {
    "python": [sys.executable, "-c",
               "import torch, ampkit; x = torch.randn(2, 2); x + x"],
    "r": ["Rscript", "-e",
          "suppressPackageStartupMessages(library(ampkit)); x <- torch_randn(2, 2); "
          "invisible(x + x)"],
}


def startup_rows(repeats: int = 5) -> List[Dict[str, Any]]:
    """Wall time of a whole process that loads the library and adds two tensors, Python's
    (`import torch, ampkit`) and R's (`library(ampkit)`), in turn `repeats` times."""
    times: Dict[str, List[float]] = {"python": [], "r": []}
    for _ in range(repeats):
        for lang, cmd in STARTUP.items():
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=r_environ())
            times[lang].append((time.perf_counter() - start) * 1e3)
    pairs = [q / p for p, q in zip(times["python"], times["r"])]
    return [{"what": "load the library, one tensor op", "python_ms":
             statistics.median(times["python"]), "r_ms": statistics.median(times["r"]),
             **_spread(pairs), "startup": True}]


def _time_block(title: str, rows: List[Dict[str, Any]], width: int, unit: str, per_ms: float,
                digits: int, goal: Optional[float] = None) -> List[str]:
    """A table of times in Python and in R and R's time over Python's (median and quartiles):
    each row's milliseconds times `per_ms`, in `unit`. The goal: with `goal`, R/py <= goal;
    else a row's own `goal_us`, R's microseconds <= it."""
    header = (f"{title:<{width}} {'py ' + unit:>7} {'R ' + unit:>7} {'R/py':>6} "
              f"{'quartiles':>13}  goal")
    lines = ["", header, "-" * len(header)]
    for r in rows:
        line = (f"{r['what']:<{width}} {r['python_ms'] * per_ms:>7.2f} "
                f"{r['r_ms'] * per_ms:>7.2f} {r['ratio']:>6.{digits}f} "
                f"{r['low']:>6.{digits}f}-{r['high']:<6.{digits}f}")
        if goal is not None:
            line += f"  R/py <= {goal:.2f}: " + ("yes" if r["ratio"] <= goal else "NO")
        elif r.get("goal_us") is not None:
            met = r["r_ms"] * 1e3 <= r["goal_us"]
            line += f"  R <= {r['goal_us']:g} us: " + ("yes" if met else "NO")
        lines.append(line.rstrip())
    return lines


def r_table(compared: List[Dict[str, Any]], matmul: List[Dict[str, Any]]) -> str:
    """The R runner against Python: training throughput ratios with their spread over paired
    repeats and peak memory, the float32 product's time ratio (goal <= 1.10), and one call of
    each per-op row."""
    width = max([len("R against Python"), len("one call (per call)")]
                + [len(r["what"]) for r in compared + matmul])
    lines = []
    if compared:
        header = (f"{'R against Python':<{width}} {'R/py':>6} {'quartiles':>13}  "
                  f"{'goal':<13} {'mem R/py':>8} {'in gc':>6} {'full/step':>9}  note")
        lines += [header, "-" * len(header)]
        for r in compared:
            met = "yes" if r["ratio"] >= r["goal"] else "NO"
            memory = (f"{r['memory']:>6.2f} {'ok' if r['memory'] <= MEMORY_GOAL else 'NO'}"
                      if r["memory"] is not None else f"{'-':>9}")
            share = r.get("collect_share")
            gc = (f"{100 * share:>5.1f}% {r['full_per_step']:>9.3f}" if share is not None
                  else f"{'-':>6} {'-':>9}")
            note = "not told apart (spread wider than the difference)" if r["unsure"] else ""
            lines.append(f"{r['what']:<{width}} {r['ratio']:>6.3f} "
                         f"{r['low']:>6.3f}-{r['high']:<6.3f}  >= {r['goal']:.2f}: {met:<4} "
                         f"{memory} {gc}  {note}".rstrip())
        lines.append("R/py: steps/s of the R loop over the Python loop (>1: R faster), median "
                     "over repeats run side by side; goal: the whole step from R within 1.25x "
                     "of Python's (R torch's article loop, and every loop on CUDA: >= 0.95)")
        lines.append(f"mem R/py: the R process's peak memory over the Python process's (which "
                     f"also holds torch.amp's copy of the workload); ok: <= {MEMORY_GOAL}")
        lines.append("in gc: the share of the R loop's time spent in the garbage collections the "
                     "package runs for tensor memory; full/step: full collections per step")
    products = [r for r in matmul if not r.get("per_op") and not r.get("startup")]
    if products:
        lines += _time_block("float32 matmul", products, width, "ms", 1.0, 3, goal=1.10)
    ops = [r for r in matmul if r.get("per_op")]
    if ops:
        lines += _time_block("one call (per call)", ops, width, "us", 1e3, 2)
    startup = [r for r in matmul if r.get("startup")]
    if startup:
        lines += _time_block("process start-up", startup, width, "ms", 1.0, 2)
    return "\n".join(lines)
