"""Reads runner.R's logs and prints each file's blocks passing, and every block not passing with
its first message.  Usage: summarize.py LOG_DIR"""
import os
import sys

FAILED = ("expectation_failure", "expectation_error", "error")


def blocks(path):
    """(name, status, first message) per test_that() block, in order; two blocks of one name (R
    torch's files have such) count as two."""
    order, results = [], {}
    depth, current = 0, None
    for line in open(path, encoding="utf-8", errors="replace").read().splitlines():
        part = line.split("\t")
        if part[0] == "START":
            depth += 1
            if depth == 1:
                current = (part[1], len(order))
                order.append(current)
                results[current] = []
        elif part[0] == "END":
            depth = max(0, depth - 1)
        elif part[0] == "RESULT":
            key = current if depth else (part[1], None)
            if key not in results:
                order.append(key)
                results[key] = []
            results[key].append((part[2], part[3] if len(part) > 3 else ""))
    for key in order:
        name = key[0]
        if name == "<outside>" and not any(k in FAILED for k, _ in results[key]):
            continue
        bad = [r for r in results[key] if r[0] in FAILED]
        skip = [r for r in results[key] if r[0] == "expectation_skip"]
        status = "fail" if bad else "skip" if skip else "pass"
        yield name, status, (bad or skip or [("", "")])[0][1]


def main(log_dir):
    total = passed = 0
    problems = []
    print("| file | blocks | pass |\n| --- | ---: | ---: |")
    for log in sorted(f for f in os.listdir(log_dir) if f.endswith(".log")):
        rows = list(blocks(os.path.join(log_dir, log)))
        n, p = len(rows), sum(s == "pass" for _, s, _ in rows)
        total, passed = total + n, passed + p
        print(f"| {log[:-4]}.R | {n} | {p} |")
        problems += [f"- {log[:-4]}.R, \"{t}\" ({s}): {m[:200]}" for t, s, m in rows if s != "pass"]
    print(f"| all | {total} | {passed} ({100 * passed / max(total, 1):.1f}%) |\n")
    print("\n".join(problems))


if __name__ == "__main__":
    main(sys.argv[1])
