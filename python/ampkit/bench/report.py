"""The benchmark's outputs: a table on the terminal, results.json and a PNG chart."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List


def _index(rows: List[Dict[str, Any]]) -> Dict[tuple, Dict[str, Any]]:
    return {(r["workload"], r["mode"], r["impl"]): r for r in rows}


def add_ratios(rows: List[Dict[str, Any]]) -> None:
    """speedup_vs_fp32: throughput over the same implementation's fp32 run.
    ratio_vs_torch: throughput over torch.amp's (Python) in the same workload and mode.
    ratio_vs_ampkit_py (R rows): throughput over ampkit driven from Python."""
    index = _index(rows)
    for r in rows:
        fp32 = index.get((r["workload"], "fp32", r["impl"]))
        torch_row = index.get((r["workload"], r["mode"], "torch.amp"))
        py_row = index.get((r["workload"], r["mode"], "ampkit-py"))
        r["speedup_vs_fp32"] = r["steps_per_s"] / fp32["steps_per_s"] if fp32 else None
        r["ratio_vs_torch"] = r["steps_per_s"] / torch_row["steps_per_s"] if torch_row else None
        if r["impl"] == "ampkit-r" and py_row:
            r["ratio_vs_ampkit_py"] = r["steps_per_s"] / py_row["steps_per_s"]


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _kib(n: Any) -> Any:
    return None if n is None else n / 1024


def training_table(rows: List[Dict[str, Any]]) -> str:
    """One line per (workload, mode, implementation). casts/step and cast KiB/step: autocast's
    casts in one audited step (ampkit.autocast_audit) and the bytes they wrote, ampkit-py rows
    only ("-" elsewhere, or when the run was given --no-audit)."""
    header = (f"{'workload':<12} {'mode':<16} {'implementation':<10} {'time s':>8} {'steps/s':>8} "
              f"{'x fp32':>7} {'/torch.amp':>10} {'/ampkit-py':>10} {'peak MB':>8} {'loss':>10}"
              f" {'casts/step':>10} {'cast KiB/step':>13}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['workload']:<12} {r['mode']:<16} {r['impl']:<10} {r['time_s']:>8.3f} "
            f"{r['steps_per_s']:>8.1f} {_fmt(r.get('speedup_vs_fp32'), '7.2f'):>7} "
            f"{_fmt(r.get('ratio_vs_torch'), '10.3f'):>10} "
            f"{_fmt(r.get('ratio_vs_ampkit_py'), '10.3f'):>10} "
            f"{r['peak_bytes'] / 2**20:>8.0f} {r['final_loss']:>10.4g} "
            f"{_fmt(r.get('casts_per_step'), '10d'):>10} "
            f"{_fmt(_kib(r.get('cast_bytes_per_step')), '13.1f'):>13}")
    return "\n".join(lines)


def _ratio_table(title: str, ours: str, reference: str, rows: List[Dict[str, Any]],
                 ours_key: str, reference_key: str) -> str:
    """Rows of `what`, two times in microseconds, their ratio and its goal."""
    width = max([len(title)] + [len(r["what"]) for r in rows])
    header = f"{title:<{width}} {ours:>12} {reference:>12} {'ratio':>7} {'goal':>6}  ok"
    lines = [header, "-" * len(header)]
    for r in rows:
        ok = "yes" if r["ratio"] <= r["goal"] else "NO"
        lines.append(f"{r['what']:<{width}} {r[ours_key] * 1e6:>12.2f} "
                     f"{r[reference_key] * 1e6:>12.2f} {r['ratio']:>7.3f} {r['goal']:>6.2f}  {ok}")
    return "\n".join(lines)


def overhead_table(rows: List[Dict[str, Any]]) -> str:
    """ampkit's cost against torch.amp's (lower is better)."""
    return _ratio_table("overhead", "ampkit us", "torch.amp us", rows, "ampkit_s", "torch_s")


def feature_table(rows: List[Dict[str, Any]]) -> str:
    """Beyond torch.amp: each feature's per-step time on clean steps against plain ampkit."""
    return _ratio_table("beyond torch.amp (clean steps)", "with it us", "ampkit us", rows,
                        "feature_s", "ampkit_s")


def write_json(path: str, payload: Dict[str, Any]) -> None:
    """Whole or not at all (written beside `path`, then renamed over it): a run stopped while
    writing leaves the previous file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    partial = path + ".partial"
    with open(partial, "w") as f:
        json.dump(payload, f, indent=2)
    os.replace(partial, path)


def write_chart(path: str, training: List[Dict[str, Any]], overhead: List[Dict[str, Any]]) -> bool:
    """Throughput relative to torch.amp by workload, mode and implementation; overhead ratios
    against their goals."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    impls = sorted({r["impl"] for r in training}, key=["torch.amp", "ampkit-py", "ampkit-r"].index)
    groups = sorted({(r["workload"], r["mode"]) for r in training},
                    key=lambda g: (g[0], ["fp32", "autocast", "autocast+scaler"].index(g[1])))
    index = _index(training)
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0]
    width = 0.8 / max(len(impls), 1)
    for k, impl in enumerate(impls):
        values = [index[(w, m, impl)]["ratio_vs_torch"] if (w, m, impl) in index else 0
                  for w, m in groups]
        ax.bar([i + k * width for i in range(len(groups))], values, width, label=impl)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks([i + width * (len(impls) - 1) / 2 for i in range(len(groups))])
    ax.set_xticklabels([f"{w}\n{m}" for w, m in groups], fontsize=8)
    ax.set_ylabel("steps/s relative to torch.amp (same workload and mode)")
    ax.set_title("Training throughput against torch.amp (higher is better)")
    if impls:  # a run of the overhead suite alone has no training bars to label
        ax.legend()
    ax = axes[1]
    if overhead:
        ax.barh([r["what"] for r in overhead], [r["ratio"] for r in overhead], color="tab:green")
        for i, r in enumerate(overhead):
            ax.plot([r["goal"], r["goal"]], [i - 0.4, i + 0.4], color="red")
        ax.set_xlabel("ampkit / torch.amp time\n(lower is better; red line: goal)")
        ax.set_title("Overhead")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
