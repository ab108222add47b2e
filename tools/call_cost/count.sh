#!/usr/bin/env bash
# Instructions per call of small tensor calls from R and from Python (calls.R, calls.py: the same
# calls), counted by valgrind's callgrind: a count that does not move with the machine's load or
# clock, where the benchmark's microseconds on a shared 2-core machine move by 30% from one run to
# the next. Each call runs `number` times between two calls of a marker function at which
# callgrind dumps its count; the count of a loop over the number is the call's. The loop's own
# cost (R's for over a compiled body, Python's for over a lambda) is in both.
# Usage: tools/call_cost/count.sh [number]   (default 2000; needs valgrind; ~6 minutes)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
py="${PYTHON:-$root/.venv/bin/python}"
number="${1:-2000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export R_LIBS="${R_LIBS:-$("$py" -m ampkit r-library)}" RETICULATE_PYTHON="$py"
R -d "valgrind --tool=callgrind --dump-before=C_on_r_thread --callgrind-out-file=$work/r.out" \
  --no-echo --no-restore -f "$here/calls.R" --args "$number" "$work/names" >/dev/null 2>&1
valgrind --tool=callgrind --dump-before=getppid --callgrind-out-file="$work/py.out" \
  "$py" "$here/calls.py" "$number" "$work/names.py" >/dev/null 2>&1
"$py" - "$work" "$number" <<'PY'
import glob, os, re, sys
work, number = sys.argv[1], int(sys.argv[2])

def loops(prefix):
    """Instructions of each loop: the dumps alternate between a loop and what comes before the
    next (the first dump is the start-up)."""
    files = glob.glob(os.path.join(work, prefix + ".*"))
    files.sort(key=lambda f: int(re.search(r"\.(\d+)$", f).group(1)))
    totals = []
    for f in files:
        for line in open(f):
            if line.startswith(("summary:", "totals:")):
                totals.append(int(line.split()[1]))
                break
    return [t / number for t in totals[1::2]]

names = open(os.path.join(work, "names")).read().split("\n")
r, py = loops("r.out"), loops("py.out")
print(f"{'call':42s} {'R':>9s} {'Python':>9s} {'R/Py':>6s}   (instructions per call)")
for name, a, b in zip(names, r, py):
    print(f"{name:42s} {a:9.0f} {b:9.0f} {a / b:6.2f}")
PY
