"""`python -m ampkit bench [...]`: run the benchmark suite (see ampkit.bench.cli);
`python -m ampkit r-library [--r-libs]`: print the R library the R package ampkit is installed in,
or R_LIBS naming it first (see ampkit.r_library)."""

import sys

COMMANDS = {"bench": "the benchmark suite: ampkit against torch.amp, from Python and R "
                    "(python -m ampkit bench --help)",
            "r-library": "print the R library the R package ampkit is installed in; with "
                         "--r-libs, R_LIBS naming it first: export R_LIBS=$(... --r-libs)"}
USAGE = "usage: python -m ampkit COMMAND [ARGS ...]\n\ncommands:\n" + "".join(
    f"  {name:<11}{text}\n" for name, text in COMMANDS.items())


def r_library_main(args) -> int:
    from .r_library import r_environ, r_library
    if args not in ([], ["--r-libs"]):
        print("python -m ampkit r-library: the one option is --r-libs", file=sys.stderr)
        return 2
    print(r_environ().get("R_LIBS", "") if args else r_library())
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    if not argv or argv[0] not in COMMANDS:
        problem = "no command given" if not argv else f"unknown command {argv[0]!r}"
        print(f"{USAGE}\npython -m ampkit: {problem}", file=sys.stderr)
        return 2
    if argv[0] == "r-library":
        return r_library_main(argv[1:])
    from .bench.cli import main as bench_main
    return bench_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
