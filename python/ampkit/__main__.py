"""`python -m ampkit bench [...]`: run the benchmark suite (see ampkit.bench.cli)."""

import sys

COMMANDS = {"bench": "the benchmark suite: ampkit against torch.amp, from Python and R "
                    "(python -m ampkit bench --help)"}
USAGE = "usage: python -m ampkit COMMAND [ARGS ...]\n\ncommands:\n" + "".join(
    f"  {name:<8}{text}\n" for name, text in COMMANDS.items())


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if not argv or argv[0] not in COMMANDS:
        problem = "no command given" if not argv else f"unknown command {argv[0]!r}"
        print(f"{USAGE}\npython -m ampkit: {problem}", file=sys.stderr)
        return 2
    from .bench.cli import main as bench_main
    return bench_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
