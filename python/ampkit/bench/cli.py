"""`python -m ampkit bench`: the shared benchmark suite, from Python and R, against torch.amp."""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import time
from typing import Any, Dict, List, Optional

import torch

from . import measure, overhead, precision, report
from .r_runner import (
    RSession,
    compare_rows,
    matmul_rows,
    op_rows,
    r_table,
    r_unavailable,
    startup_rows,
)
from .training import IMPLEMENTATIONS, run_python_cells

GOALS = {"autocast": 0.4, "scaler": 0.35, "feature": 1.05}
SUITES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def all_suites(directory: str) -> List[Dict[str, Any]]:
    """Every suite of `directory` (its JSON files), in name order."""
    suites = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            suite = json.load(f)
        suite["path"] = os.path.abspath(path)
        suites.append(suite)
    return suites


def _suite_list(directory: str) -> str:
    lines = []
    for suite in all_suites(directory):
        devices = suite.get("devices")
        where = f" ({', '.join(devices)} only)" if devices else ""
        where += "" if suite.get("default", True) else " (by name only)"
        lines.append(f"  {suite['name']}{where}")
    return "suites (--only NAME ...):\n" + "\n".join(lines)


def load_suites(directory: str, names: Optional[List[str]],
                device: str = "cpu") -> List[Dict[str, Any]]:
    """The suites of `directory`: those named, else every suite for `device` (a suite with a
    "devices" list, such as the seeds' GPU workloads, runs on those devices only, or by name)."""
    every = all_suites(directory)
    unknown = sorted(set(names or ()) - {suite["name"] for suite in every})
    if unknown:
        raise SystemExit(f"unknown suite(s) {', '.join(unknown)}; the suites are: "
                         f"{', '.join(suite['name'] for suite in every)}")
    # A suite with "default": false (minutes long) runs by name only.
    suites = [suite for suite in every
              if ((suite["name"] in names) if names
                  else (device in suite.get("devices", [device]) and suite.get("default", True)))]
    if not suites:
        raise SystemExit(f"no benchmark suites found in {directory!r} (names: {names})")
    # Overhead first: its microsecond timings suffer from the OpenMP threads a training workload
    # leaves spinning on the 2 cores for a while after its last parallel op.
    return sorted(suites, key=lambda s: (s["kind"] != "overhead", s["name"]))


def check_sizes(suites: List[Dict[str, Any]], size_name: str) -> None:
    """Refuse, before anything runs, a size set that a chosen suite lacks (a misspelt --size, or
    a GPU-only suite named on the CPU), naming the sets it has."""
    for suite in suites:
        if size_name not in suite["sizes"]:
            devices = suite.get("devices")
            hint = f"; it runs on {', '.join(devices)} (--device)" if devices else ""
            raise SystemExit(f"--size {size_name}: suite {suite['name']} has the size sets "
                             f"{', '.join(suite['sizes'])}{hint}")


def run_overhead(suite: Dict[str, Any], size: Dict[str, Any],
                 device: str = "cpu") -> List[Dict[str, Any]]:
    _progress("  autocast enter+exit ...")
    a = overhead.autocast_enter_exit(size["autocast_number"], size["repeats"], device)
    rows = [{"what": "autocast enter+exit", "goal": GOALS["autocast"], **a}]
    for n, steps in zip(size["scaler_params"], size["scaler_steps"]):
        _progress(f"  scaler per step, {n} params ...")
        s = overhead.scaler_overhead(n, steps, size["repeats"], device)
        rows.append({"what": f"scaler per step, {n} params", "goal": GOALS["scaler"], **s})
    return rows


def run_features(size: Dict[str, Any], device: str = "cpu") -> List[Dict[str, Any]]:
    rows = []
    for n, steps in zip(size["scaler_params"], size["scaler_steps"]):
        _progress(f"  scale policy and track_overflow per step, {n} params ...")
        rows += [{**r, "goal": GOALS["feature"]}
                 for r in overhead.feature_overhead(n, steps, size["repeats"], device)]
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ampkit bench", description=__doc__,
                                     epilog=_suite_list(SUITES_DIR),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--size", default=None, help="size set in the suites: cpu, cuda or tiny "
                        "(default: the device's)")
    parser.add_argument("--suites", default=SUITES_DIR,
                        help="suites folder (default: the suites shipped in ampkit.bench)")
    parser.add_argument("--only", nargs="+", help="suite names to run (default: all)")
    parser.add_argument("--no-r", action="store_true", help="skip the R runner")
    parser.add_argument("--no-audit", action="store_true",
                        help="skip the audit of one extra, untimed ampkit-py step per workload "
                             "and mode (the casts/step columns)")
    parser.add_argument("--out", default=os.path.join("bench", "results"), help="output folder")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here")
    size_name = args.size or args.device
    suites = load_suites(args.suites, args.only, args.device)
    check_sizes(suites, size_name)
    r_missing = "--no-r given" if args.no_r else r_unavailable()
    torch.set_num_threads(max(1, os.cpu_count() or 1))  # the R runner takes the same number
    measure.steady_allocator()  # and the same allocator policy

    started = time.time()
    machine = {"platform": platform.platform(),
               "processor": platform.processor() or platform.machine(),
               "cpus": os.cpu_count(), "torch": torch.__version__, "device": args.device,
               "python": platform.python_version(), "cuda": torch.version.cuda,
               "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None}
    json_path = os.path.join(args.out, "results.json")
    training: List[Dict[str, Any]] = []
    overheads: List[Dict[str, Any]] = []
    features: List[Dict[str, Any]] = []
    precision_rows: List[Dict[str, Any]] = []
    # The R runner: one Rscript process, started after the overhead timings (which it would
    # disturb), whose steps take turns with the Python runner's.
    r_session: Optional[RSession] = None

    def write_results(matmul: List[Dict[str, Any]], r_failure: Optional[str],
                      complete: bool) -> List[Dict[str, Any]]:
        """results.json with the rows so far (the R/Python rows among them); written after
        every cell too, `complete` false until the end, so that a run cut short (a time limit,
        a crash inside a cell) keeps what it measured."""
        report.add_ratios(training)
        r_rows = compare_rows(training)
        report.write_json(json_path, {"machine": machine, "size": size_name,
                                      "training": training, "overhead": overheads,
                                      "features": features, "precision": precision_rows,
                                      "r_against_python": {"training": r_rows,
                                                           "matmul": matmul,
                                                           "failure": r_failure},
                                      "seconds": time.time() - started, "complete": complete})
        return r_rows

    for suite in suites:
        size = suite["sizes"][size_name]
        _progress(f"[{time.time() - started:6.1f}s] {suite['name']}: {suite['description']}")
        if suite["kind"] == "overhead":
            overheads += run_overhead(suite, size, args.device)
            features += run_features(size, args.device)
            write_results([], None, complete=False)
            continue
        if suite["kind"] == "precision":
            precision_rows += precision.run(suite, size, args.device)
            write_results([], None, complete=False)
            continue
        if r_missing is None and r_session is None:
            r_session = RSession(args.device)
        for mode in suite["modes"]:
            r_cell = r_session.cell(suite, size_name, mode) if r_session else None
            _progress(f"  {mode}: {', '.join(IMPLEMENTATIONS)}{', ampkit-r' if r_cell else ''} "
                      f"(in turn, {size.get('turn', 1)} step(s) a turn, {size['repeats']} "
                      "repeats)")
            training += run_python_cells(suite, size, args.device, mode, list(IMPLEMENTATIONS),
                                         audit=not args.no_audit, r_cell=r_cell)
            write_results([], None, complete=False)
    matmul: List[Dict[str, Any]] = []
    # The R runner's own rows after the training cells. Where the runner stops there, the rows
    # measured so far are still printed and written (a failing R row once cost a GPU machine's
    # whole training table), and the run ends with status 1.
    r_failure: Optional[str] = None
    if r_session is not None:
        r_session.close()
        try:
            _progress(f"[{time.time() - started:6.1f}s] float32 matmul, Python and R ...")
            matmul += matmul_rows(args.device)
            _progress(f"[{time.time() - started:6.1f}s] one call of each kind, Python and R ...")
            matmul += op_rows(args.device, **({"repeats": 1, "number": 20}
                                              if size_name == "tiny" else {}))
            _progress(f"[{time.time() - started:6.1f}s] process start-up, Python and R ...")
            # (a CUDA machine's Python start-up takes seconds: fewer repeats there)
            matmul += startup_rows(repeats=1 if size_name == "tiny" else
                                   3 if args.device == "cuda" else 5)
        except RuntimeError as error:
            r_failure = str(error)
            _progress(f"[{time.time() - started:6.1f}s] the R runner failed: {error}")
    r_rows = write_results(matmul, r_failure, complete=True)
    print(f"\nampkit benchmark - {machine['platform']}, {machine['cpus']} CPUs, "
          f"torch {machine['torch']}"
          + (f", {machine['gpu']}" if machine["gpu"] else "") + f", sizes '{size_name}'")
    if training:
        print("\n" + report.training_table(training))
        print("x fp32: throughput over the same implementation in fp32;  /torch.amp, /ampkit-py: "
              "throughput ratios (>1 is faster)")
        if not args.no_audit:
            print("casts/step, cast KiB/step: the casts autocast inserted (forward and their "
                  "backward) in one audited ampkit-py step, and the bytes they wrote")
    if r_missing:
        print(f"\nR runner skipped: {r_missing}")
    elif training:
        print("\n" + r_table(r_rows, matmul))
    if overheads:
        print("\n" + report.overhead_table(overheads))
    if features:
        print("\n" + report.feature_table(features))
    if precision_rows:
        print("\n" + precision.table(precision_rows))
    png_path = os.path.join(args.out, "results.png")
    charted = report.write_chart(png_path, training, overheads)
    chart = f" and {png_path}" if charted else " (no chart: matplotlib missing)"
    print(f"\nwrote {json_path}{chart}"
          + f" in {time.time() - started:.0f} s")
    if r_failure is not None:
        print(f"the R runner failed after the training cells: {r_failure}", file=sys.stderr)
        return 1
    return 0
