"""Generates the R package's op surface from libtorch's operator schemas, as R torch generates its
namespace: one R function per ATen operator name (its overloads grouped), for `torch_<name>()`
and for the tensor method `x$<name>()`.

    python tools/rgen/generate.py            # writes rpkg/R/gen-ops.R, gen-op-table.R and
                                             # rpkg/src/ops_entries.h
    python tools/rgen/generate.py --check    # exit status 1 if the committed files are stale

The schemas come from native_functions.yaml as the installed torch ships it (torchgen's packaged
copy): names, arguments, defaults, overloads and whether an op is a function, a method or both.
The generated code calls libtorch's dispatcher by schema name at run time (rpkg/src/ops.cpp), so
the same R code works with any torch whose dispatcher has the schemas it uses (2.11 to 2.13); a
schema a given libtorch lacks is an error naming it when called.

R torch's rules, each decided here once per argument (rules.py):
- names: `torch_<op>` for functions, `x$<op>()` for methods, `torch_<op>_out(out, ...)` for the
  out= variants (their output tensors first, as R torch writes them);
- argument order: the union of the overloads' arguments, each at its largest position, ties
  alphabetical (R torch's order); a leading "_" is dropped from names;
- defaults: the first overload's that has one; numbers, flags and strings as R literals, the rest
  (None, [], enum values) as NULL, which the C++ layer reads as "the schema's default";
- 1-based arguments: by name (rules.ONE_BASED), for dims and indices, with R torch's exceptions;
  numeric defaults of dim arguments shifted to 1-based;
- dispatch arguments (those that choose between overloads): arguments that lack a default in
  some overload, whose type differs between overloads, or that some overload lacks (given, such
  an argument is never dropped: it rules out the overloads without it; not given, it is passed
  as missing and the chosen overload's own default applies).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS_R = os.path.join(ROOT, "rpkg", "R", "gen-ops.R")
TABLE_R = os.path.join(ROOT, "rpkg", "R", "gen-op-table.R")
ENTRIES_H = os.path.join(ROOT, "rpkg", "src", "ops_entries.h")
DOC_R = os.path.join(ROOT, "rpkg", "R", "gen-ops-doc.R")
EXPORTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rtorch_exports.txt")


def rtorch_exports() -> set:
    """R torch's exported torch_* names that are ATen operators (rtorch_exports.txt)."""
    with open(EXPORTS) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


@dataclass
class Arg:
    name: str          # the R name
    schema_name: str   # the schema's
    type: str          # the declared type, as native_functions.yaml writes it
    default: Optional[str]
    out: bool = False  # an output buffer (out= variants), which the op writes into


@dataclass
class Overload:
    name: str          # "add.Tensor"
    args: List[Arg]


@dataclass
class Group:
    name: str                                  # "add", "add_", "__and__"
    method: bool
    overloads: List[Overload] = field(default_factory=list)

    def r_name(self) -> str:
        prefix = "." if self.name in rules.WRAPPED and not self.method else ""
        return prefix + ("" if self.method else "torch_") + self.name


def _native_functions() -> list:
    import torchgen

    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native",
                        "native_functions.yaml")
    with open(path) as f:
        return yaml.safe_load(f)


def load_groups() -> List[Group]:
    from torchgen.model import FunctionSchema, SchemaKind

    groups: Dict[tuple, Group] = {}
    for entry in _native_functions():
        schema = FunctionSchema.parse(entry["func"])
        kind = schema.kind()
        if kind == SchemaKind.scratch:
            continue
        name = str(schema.name.name)
        if rules.skipped(name, str(schema.name.overload_name), entry):
            continue
        variants = [v.strip() for v in entry.get("variants", "function").split(",")]
        flat = list(schema.arguments.flat_all)
        if kind == SchemaKind.out:
            # R torch's `torch_<op>_out(out, ...)`: a function, its output tensors first.
            name, variants = name + "_out", ["function"]
            outs = list(schema.arguments.out)
            flat = outs + [a for a in flat if a not in outs]
        outs_of = list(schema.arguments.out)
        args = [Arg(a.name.lstrip("_"), a.name, str(a.type),
                    None if a.default is None else str(a.default), a in outs_of)
                for a in flat]
        overload = Overload(str(schema.name), args)
        for method in (False, True):
            if ("method" if method else "function") not in variants:
                continue
            if method and (not args or args[0].schema_name != "self"):
                continue
            group = groups.setdefault((name, method), Group(name, method))
            group.overloads.append(overload)
    return sorted(groups.values(), key=lambda g: (g.method, g.name))


def r_arguments(group: Group) -> List[str]:
    """The union of the overloads' arguments, each at its largest position, ties alphabetical
    (rules.moved_last() after all others)."""
    position: Dict[str, int] = {}
    for overload in group.overloads:
        for i, arg in enumerate(overload.args):
            position[arg.name] = max(position.get(arg.name, -1), i)
    last = rules.moved_last(group.name)
    return sorted(position, key=lambda n: (n in last, position[n], n))


def absent_somewhere(group: Group, name: str) -> bool:
    """Whether some overload lacks argument `name`: given, it chooses the overloads that have it
    (never silently dropped); not given, the R function passes it as missing, and the chosen
    overload's schema gives its default."""
    return any(name not in [a.name for a in o.args] for o in group.overloads)


def types_of(group: Group, name: str) -> set:
    return {a.type for o in group.overloads for a in o.args if a.name == name}


def one_based(group: Group, name: str) -> bool:
    # An output buffer is written, not read: shifted, the op would write into a shifted copy
    # (sort_out()'s `indices`), and the caller's buffer would keep its old values.
    if any(a.out for o in group.overloads for a in o.args if a.name == name):
        return False
    return rules.is_one_based(group.name, name, types_of(group, name))


def r_default(group: Group, name: str) -> Optional[str]:
    for overload in group.overloads:
        for arg in overload.args:
            if arg.name == name and arg.default is not None:
                return rules.r_default(arg, one_based(group, name))
    return None


def dispatch_arguments(group: Group, names: List[str]) -> List[str]:
    out = []
    for name in names:
        present = [a for o in group.overloads for a in o.args if a.name == name]
        lacks_default = any(a.default is None for a in present)
        types_differ = len({a.type for a in present}) > 1
        if len(group.overloads) > 1 and (lacks_default or types_differ or
                                         absent_somewhere(group, name)):
            out.append(name)
    return out


def _r_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _r_strings(items: List[str]) -> str:
    if not items:
        return "character()"
    return "c(" + ", ".join(_r_string(s) for s in items) + ")"


def render(groups: List[Group]) -> tuple:
    exports = rtorch_exports()
    functions = ["# Generated by tools/rgen/generate.py from libtorch's schemas: do not edit.",
                 "# Each function calls the op table's entry of the same index (gen-op-table.R)",
                 "# through rpkg/src/ops.cpp; R torch's rules are decided by tools/rgen/rules.py.",
                 ""]
    methods = ["# The tensor methods (x$name()), by name: an environment, whose lookup by name is",
               "# a hash (`$` on a list of this length scans it: 2-7 us a lookup).",
               "tensor_methods <- list2env(parent = emptyenv(), list("]
    table = ["# Generated by tools/rgen/generate.py from libtorch's operator schemas: do not edit.",
             "# One entry per op name: list(name, overloads (schema names), R arguments, their",
             "# 1-based ones, the arguments that choose between overloads). ops.cpp reads it once.",
             "op_table <- list("]
    method_lines = []
    entries = []
    documented: Dict[str, str] = {}
    for index, group in enumerate(groups, start=1):
        names = r_arguments(group)
        dispatch = dispatch_arguments(group, names)
        formals, call_args = [], []
        for name in names:
            default = r_default(group, name)
            formals.append(name if default is None else f"{name} = {default}")
            if absent_somewhere(group, name):
                call_args.append(f"if (missing({name})) quote(expr = ) else {name}")
            else:
                call_args.append(name)
        arity = len(names)
        if arity > rules.MAX_ARITY:
            raise SystemExit(f"{group.name}: {arity} arguments, more than ops.cpp's "
                             f"{rules.MAX_ARITY}")
        body = f".Call(C_op{arity}, {index}L" + "".join(", " + a for a in call_args) + ")"
        fn = f"function({', '.join(formals)}) {body}"
        if group.method:
            method_lines.append(f"  {_r_string(group.name)} = {fn}")
        else:
            page = rules.HAND_PAGES.get(group.name)
            if page is not None:  # the page names it in its @aliases and @usage
                functions += [f"# Help: {page}.", "#' @export"]
            elif group.r_name() in exports:
                functions += ["#' @rdname torch_ops", "#' @export"]
                for name in names:
                    documented.setdefault(name, group.name)
            functions.append(f"{group.r_name()} <- {fn}")
            functions.append("")
        ones = [n for n in names if one_based(group, n)]
        entries.append(
            f"  list({_r_string(group.name)}, {_r_strings([o.name for o in group.overloads])}, "
            f"{_r_strings(names)}, {_r_strings(ones)}, {_r_strings(dispatch)})")
    methods.append(",\n".join(method_lines))
    methods.append("))")
    table.append(",\n".join(entries))
    table.append(")")
    return ("\n".join(functions + methods) + "\n", "\n".join(table) + "\n",
            render_doc(documented))


def render_doc(documented: Dict[str, str]) -> str:
    """The torch_ops help page: every exported generated function, and each argument name."""
    lines = ["# Generated by tools/rgen/generate.py: the help page of the generated operators.",
             ""]
    lines += ["#' " + line if line else "#'" for line in rules.OPS_DOC.strip().splitlines()]
    for name in sorted(documented):
        lines.append(f"#' @param {name} {rules.param_doc(name, documented[name])}")
    lines += ["#' @name torch_ops", "NULL", ""]
    return "\n".join(lines)


def render_entries() -> str:
    """ops.cpp's entry points C_op0 .. C_op<MAX_ARITY> (one per number of R arguments), and their
    declarations and registration for init.cpp (which defines AMPKIT_OP_REGISTRY first)."""
    lines = ["// Generated by tools/rgen/generate.py: do not edit. ops.cpp's entry per arity; with",
             "// AMPKIT_OP_REGISTRY defined (init.cpp), their declarations and registration rows.",
             "// clang-format off",
             "#ifndef AMPKIT_OP_REGISTRY"]
    for n in range(rules.MAX_ARITY + 1):
        params = "".join(f", SEXP a{i}" for i in range(1, n + 1))
        values = ", ".join(f"a{i}" for i in range(1, n + 1)) or "R_NilValue"
        lines += [f'extern "C" SEXP C_op{n}(SEXP index{params}) {{',
                  "  AMPKIT_R_BEGIN",
                  f"  SEXP args[] = {{{values}}};",
                  f"  return call_op(index, args, {n});",
                  "  AMPKIT_R_END",
                  "}"]
    lines.append("#elif AMPKIT_OP_REGISTRY == 1")
    for n in range(rules.MAX_ARITY + 1):
        params = "".join(", SEXP" for _ in range(n))
        lines.append(f'extern "C" SEXP C_op{n}(SEXP{params});')
    lines.append("#else")
    for n in range(rules.MAX_ARITY + 1):
        lines.append(f'{{"C_op{n}", (DL_FUNC)&C_op{n}, {n + 1}}},')
    lines.append("#endif")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit status 1 if the committed files differ from what is generated")
    args = parser.parse_args(argv)
    ops, table, doc = render(load_groups())
    files = ((OPS_R, ops), (TABLE_R, table), (ENTRIES_H, render_entries()), (DOC_R, doc))
    if args.check:
        stale = [p for p, text in files
                 if not os.path.exists(p) or open(p).read() != text]
        for p in stale:
            print(f"{os.path.relpath(p, ROOT)} is stale: run python tools/rgen/generate.py")
        return 1 if stale else 0
    for path, text in files:
        with open(path, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
