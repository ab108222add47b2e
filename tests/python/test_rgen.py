"""The R package's generated op surface (tools/rgen): the committed files are what the generator
makes from the installed torch's schemas, and every torch_* function R torch exports for an ATen
operator is exported by the R package (generated, or written by hand over the generated one)."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RGEN = ROOT / "tools" / "rgen"


def test_the_generated_files_are_current():
    proc = subprocess.run([sys.executable, str(RGEN / "generate.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _rtorch_exports():
    lines = (RGEN / "rtorch_exports.txt").read_text().splitlines()
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def _package_exports():
    namespace = (ROOT / "rpkg" / "NAMESPACE").read_text()
    return set(re.findall(r"^export\(([^)]+)\)$", namespace, flags=re.M))


def test_every_aten_function_r_torch_exports_is_exported():
    wanted = _rtorch_exports()
    assert len(wanted) > 300  # R torch 0.17's list, not an empty file
    missing = sorted(wanted - _package_exports())
    assert not missing, f"{len(missing)} of R torch's {len(wanted)} missing: {missing}"


def test_r_torchs_one_based_rule_by_argument_and_type():
    sys.path.insert(0, str(RGEN))
    try:
        import rules
    finally:
        sys.path.pop(0)
    assert rules.is_one_based("sum", "dim", {"int[1]?"})          # dims
    assert rules.is_one_based("transpose", "dim0", {"int"})
    assert rules.is_one_based("index_select", "index", {"Tensor"})  # index tensors
    assert not rules.is_one_based("tile", "dims", {"int[]"})        # repeat counts
    assert not rules.is_one_based("narrow", "length", {"int"})
    # and the generated table carries each op's 1-based arguments to ops.cpp
    table = (ROOT / "rpkg" / "R" / "gen-op-table.R").read_text()
    rows = [ln for ln in table.splitlines() if ln.startswith('  list("index_select",')]
    assert rows and all('c("dim", "index")' in row for row in rows)
