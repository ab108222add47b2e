"""`python -m ampkit bench [...]`: run the benchmark suite (see ampkit.bench.cli)."""

import sys


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] != "bench":
        print("usage: python -m ampkit bench [--device cpu|cuda] [--size cpu|cuda|tiny] "
              "[--only NAME ...]",
              file=sys.stderr)
        return 2
    from .bench.cli import main as bench_main
    return bench_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
