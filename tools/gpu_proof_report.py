"""The two Python steps of tools/gpu_proof.sh.

    python tools/gpu_proof_report.py syncs OUT.json     host syncs per training step on CUDA
    python tools/gpu_proof_report.py report DIR SECONDS gpu_proof.json and README.md in DIR

`syncs` counts the synchronizing CUDA calls of steady training steps with
torch.cuda.set_sync_debug_mode("warn") (each one warns), for ampkit and torch.amp, with SGD and
with fused Adam. `report` gathers the machine (GPU, driver, torch, CUDA, Python), each stage of the
proof (stages.tsv), the test counts (pytest.xml), the benchmark (results.json) and the syncs, and
checks the issue's acceptance numbers on them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional

STEPS = 8


def count_syncs(make_scaler, autocast, fused: bool) -> float:
    """Synchronizing CUDA calls per step over STEPS steady steps (after 3 warm-up steps)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256)).cuda()
    opt = (torch.optim.Adam(model.parameters(), fused=True) if fused
           else torch.optim.SGD(model.parameters(), lr=0.01))
    scaler = make_scaler("cuda")
    x = torch.randn(64, 256, device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with autocast("cuda", dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    from ampkit.bench.measure import syncs_per_call

    for _ in range(3):
        step()
    return syncs_per_call(step, STEPS)


def syncs(path: str) -> None:
    import ampkit
    import torch

    rows = []
    for impl, scaler, autocast in (("ampkit", ampkit.GradScaler, ampkit.autocast),
                                   ("torch.amp", torch.amp.GradScaler, torch.autocast)):
        for fused in (False, True):
            rows.append({"impl": impl, "optimizer": "fused Adam" if fused else "SGD",
                         "syncs_per_step": count_syncs(scaler, autocast, fused)})
            print(rows[-1])
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)


def _machine() -> Dict[str, Any]:
    import torch

    driver = None
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "driver": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
            "platform": platform.platform(), "cpus": os.cpu_count()}


def _stages(directory: str) -> List[Dict[str, str]]:
    path = os.path.join(directory, "stages.tsv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = [line.rstrip("\n").split("\t") for line in f][1:]
    return [{"stage": s[0], "status": s[1], "seconds": s[2], "note": s[3] if len(s) > 3 else ""}
            for s in lines if s and s[0]]


def _pytest_counts(directory: str) -> Optional[Dict[str, int]]:
    path = os.path.join(directory, "pytest.xml")
    if not os.path.exists(path):
        return None
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return counts


def _load(directory: str, name: str) -> Any:
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _row(training: List[Dict[str, Any]], workload: str, mode: str, impl: str):
    return next((r for r in training if (r["workload"], r["mode"], r["impl"])
                 == (workload, mode, impl)), None)


def checks(bench: Optional[Dict[str, Any]], sync_rows: Optional[List[Dict[str, Any]]]):
    """The issue's acceptance numbers: (what, measured, goal, met) rows."""
    out = []
    training = (bench or {}).get("training", [])
    scaled = _row(training, "seed_mlp", "autocast+scaler", "ampkit-py")
    plain = _row(training, "seed_mlp", "autocast", "ampkit-py")
    if scaled and plain:
        ratio = scaled["time_s"] / plain["time_s"]
        out.append(("seed MLP: autocast+scaler time / autocast alone (ampkit)", f"{ratio:.3f}",
                    "<= 1.03", ratio <= 1.03))
    for workload in ("seed_mlp", "seed_bert", "recipe_mlp", "transformer", "many_params"):
        row = _row(training, workload, "autocast+scaler", "ampkit-py")
        if row and row.get("ratio_vs_torch"):
            time_ratio = 1.0 / row["ratio_vs_torch"]
            out.append((f"{workload}: ampkit whole step time / torch.amp's", f"{time_ratio:.3f}",
                        "<= 1.00", time_ratio <= 1.00))
    if scaled and scaled.get("speedup_vs_fp32"):
        out.append(("seed MLP: autocast+scaler speed-up over fp32 (ampkit)",
                    f"{scaled['speedup_vs_fp32']:.2f}x", ">= 2.44x",
                    scaled["speedup_vs_fp32"] >= 2.44))
    bert = _row(training, "seed_bert", "autocast+scaler", "ampkit-py")
    if bert and bert.get("speedup_vs_fp32"):
        out.append(("seed BERT: autocast+scaler speed-up over fp32 (ampkit)",
                    f"{bert['speedup_vs_fp32']:.2f}x", ">= 2.38x (the seed's, on a T4)",
                    bert["speedup_vs_fp32"] >= 2.38))
    # R at native speed: the R loop of each workload against Python's, the same steps, on the GPU.
    for workload in ("seed_mlp", "rtorch_article"):
        for mode in ("fp32", "autocast", "autocast+scaler"):
            row = _row(training, workload, mode, "ampkit-r")
            if row and row.get("ratio_vs_ampkit_py"):
                out.append((f"{workload} {mode}: R steps/s / Python's",
                            f"{row['ratio_vs_ampkit_py']:.3f}", ">= 0.95",
                            row["ratio_vs_ampkit_py"] >= 0.95))
    for r in sync_rows or []:
        if r["impl"] == "ampkit":
            goal = 0 if r["optimizer"] == "fused Adam" else 1
            out.append((f"host syncs per step, ampkit, {r['optimizer']}",
                        f"{r['syncs_per_step']:g}", f"{goal}", r["syncs_per_step"] == goal))
    return out


def report(directory: str, seconds: str) -> None:
    bench = first = _load(directory, "results.json")
    # The larger workloads run as a second benchmark, into more/: their rows join the first's.
    more = _load(os.path.join(directory, "more"), "results.json")
    if more and more.get("training"):
        bench = dict(bench or {})
        bench["training"] = (bench.get("training") or []) + more["training"]
    sync_rows = _load(directory, "syncs.json")
    stages = _stages(directory)
    tests = _pytest_counts(directory)
    machine = _machine()
    acceptance = checks(bench, sync_rows)
    payload = {"machine": machine, "seconds": int(seconds), "stages": stages,
               "pytest_cuda": tests, "syncs": sync_rows,
               "acceptance": [{"what": w, "measured": m, "goal": g, "met": ok}
                              for w, m, g, ok in acceptance]}
    with open(os.path.join(directory, "gpu_proof.json"), "w") as f:
        json.dump(payload, f, indent=1)

    lines = [f"# gpu-proof: {machine['gpu']}", "",
             "| machine | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in machine.items()]
    lines += [f"| whole proof | {seconds} s |", "", "## Stages", "",
              "| stage | status | seconds | note |", "| --- | --- | --- | --- |"]
    lines += [f"| {s['stage']} | {s['status']} | {s['seconds']} | {s['note']} |" for s in stages]
    if tests:
        lines += ["", f"pytest -m cuda: {tests['passed']} passed, {tests['failures']} failed, "
                  f"{tests['errors']} errors, {tests['skipped']} skipped"]
    lines += ["", "## Acceptance", "", "| what | measured | goal | met |",
              "| --- | --- | --- | --- |"]
    lines += [f"| {w} | {m} | {g} | {'yes' if ok else 'NO'} |" for w, m, g, ok in acceptance]
    if sync_rows:
        lines += ["", "## Host syncs per step (torch.cuda.set_sync_debug_mode)", "",
                  "| implementation | optimizer | syncs/step |", "| --- | --- | --- |"]
        lines += [f"| {r['impl']} | {r['optimizer']} | {r['syncs_per_step']:g} |"
                  for r in sync_rows]
    cut_short = [name for name, run in (("first", first), ("larger workloads", more))
                 if run and run.get("complete") is False]
    if cut_short:
        lines += ["", f"The benchmark ({', '.join(cut_short)}) was cut short: its rows are those "
                  "measured before."]
    if bench and bench.get("training"):
        lines += ["", "## Benchmark (--device cuda)", "",
                  "| workload | mode | implementation | time s | steps/s | x fp32 | /torch.amp | "
                  "R/Python | peak MiB |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in bench["training"]:
            def fmt(v, spec):
                return "" if v is None else format(v, spec)
            lines.append(
                f"| {r['workload']} | {r['mode']} | {r['impl']} | {r['time_s']:.3f} | "
                f"{r['steps_per_s']:.1f} | {fmt(r.get('speedup_vs_fp32'), '.2f')} | "
                f"{fmt(r.get('ratio_vs_torch'), '.3f')} | "
                f"{fmt(r.get('ratio_vs_ampkit_py'), '.3f')} | {r['peak_bytes'] / 2**20:.0f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(directory, "README.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "syncs":
        syncs(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
