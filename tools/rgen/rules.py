"""R torch's rules for the generated op surface (tools/rgen/generate.py): the one place each is
decided. The contract is R torch's behaviour (mlverse/torch: its generator and generated code)."""

from __future__ import annotations

import re
from typing import Optional

# The largest number of R arguments ops.cpp's entry points take (C_op0 .. C_op<MAX_ARITY>).
MAX_ARITY = 32

# Ops R torch does not generate, and overloads whose argument types R has no value for.
SKIPPED_NAMES = {
    "set_quantizer_", "special_polygamma", "_nnpack_available",
    "_backward", "_use_cudnn_rnn_flatten_weight", "is_vulkan_available",
    "_test_ambiguous_defaults", "_test_string_default", "_cufft_get_plan_cache_size",
    "_cufft_get_plan_cache_max_size", "_cufft_set_plan_cache_max_size",
    "_cufft_clear_plan_cache", "sym_size", "sym_numel", "sym_stride", "sym_storage_offset",
    "_make_dep_token",
}
UNSUPPORTED_TYPES = ("Storage", "Stream", "DeviceIndex")

# Ops whose R function is written by hand (R torch's wrappers: creation functions with `...`
# sizes and R options, 1-based returned indices, renamed or reordered arguments). Their generated
# function is `.torch_<name>`, which the hand-written `torch_<name>` calls.
WRAPPED = {
    "logical_not", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "max", "min", "bartlett_window", "blackman_window",
    "hamming_window", "hann_window", "kaiser_window", "result_type", "sparse_coo_tensor", "stft",
    "tensordot", "tril_indices", "triu_indices",
    "topk", "scalar_tensor", "narrow", "quantize_per_tensor", "upsample_nearest1d",
    "upsample_nearest2d", "upsample_nearest3d", "upsample_trilinear3d", "atleast_1d",
    "atleast_2d", "atleast_3d", "dequantize", "vander", "movedim", "argsort", "norm", "argmax",
    "argmin", "one_hot", "split", "nonzero", "fft_fft", "fft_ifft", "fft_rfft", "fft_irfft",
    "fft_fftfreq", "multinomial", "sort",
    "where", "repeat_interleave", "ones", "ones_like", "rand", "rand_like", "randint",
    "randint_like", "randn", "randn_like", "randperm", "zeros", "zeros_like", "arange", "range",
    "linspace", "logspace", "eye", "empty", "empty_like", "empty_strided", "full", "full_like",
    "normal", "polygamma",
}


# Generated functions exported with a help page written by hand, which names each in its
# `@aliases` and `@usage` (the page's name): R torch's `torch_bincount()`, and ampkit's
# class-target losses, documented with their 1-based classes.
HAND_PAGES = {
    "bincount": "torch_index_ops", "multi_margin_loss": "torch_class_ops",
    "multilabel_margin_loss": "torch_class_ops",
}


def skipped(name: str, overload: str, entry: dict) -> bool:
    if name in SKIPPED_NAMES:
        return True
    func = entry["func"]
    if any(re.search(r"\b" + t + r"\b", func) for t in UNSUPPORTED_TYPES):
        return True
    # R torch's two dropped signatures: arange/range without `step`, stft without `center`.
    if name in ("arange", "range") and overload in ("", "start") and "step" not in func:
        return True
    if name == "stft" and "center" not in func:
        return True
    return False


# R torch counts dimensions and indices from 1. By argument name (R torch's generator), for
# these types: integers (a dim), integer vectors (dims), index tensors (each entry >= 1 loses 1).
_ONE_BASED_INT = {"dim", "dim0", "dim1", "dim2", "start_dim", "end_dim", "index"}
_ONE_BASED_INTS = {"dim", "dims", "dims_self", "dims_other"}
_ONE_BASED_TENSOR = {"index", "indices", "dims"}
# Where the name means something else: tile's dims are repeat counts.
_NOT_ONE_BASED = {("tile", "dims")}
# R torch's class numbers (its with-indices.R), by op: the classification losses' class targets
# and the class their `ignore_index` names, bincount's values. Negative ones stay (the -1 that
# ends multilabel_margin_loss's rows, ignore_index's default -100); a floating target is
# cross_entropy's class probabilities, which the C++ layer passes as they are.
_CLASS_TARGETS = {"target", "ignore_index"}
_ONE_BASED_BY_OP = {
    "nll_loss": _CLASS_TARGETS, "nll_loss2d": _CLASS_TARGETS, "nll_loss_nd": _CLASS_TARGETS,
    "cross_entropy_loss": _CLASS_TARGETS, "multi_margin_loss": {"target"},
    "multilabel_margin_loss": {"target"}, "bincount": {"self"},
}


def is_one_based(op: str, name: str, types: Optional[set] = None) -> bool:
    """Whether R torch reads argument `name` of op `op` 1-based, for the declared `types` it has
    (None: any of them)."""
    if (op, name) in _NOT_ONE_BASED:
        return False
    if name in _ONE_BASED_BY_OP.get(op, ()):
        return True
    for t in types if types is not None else {None}:
        base = None if t is None else t.rstrip("?")
        if base is None:
            if name in _ONE_BASED_INT | _ONE_BASED_INTS | _ONE_BASED_TENSOR:
                return True
        elif base in ("int", "SymInt") and name in _ONE_BASED_INT:
            return True
        elif re.fullmatch(r"(int|SymInt)\[\d*\]", base) and name in _ONE_BASED_INTS:
            return True
        elif base in ("Tensor", "Tensor?[]", "Tensor[]") and name in _ONE_BASED_TENSOR:
            return True
    return False


def moved_last(op: str) -> set:
    """Arguments placed after all others, so that R torch's positional calls keep their meaning:
    PyTorch's `correction` of std and var, whose overloads R torch does not generate (its
    `torch_std(self, dim, unbiased, keepdim)`)."""
    base = op[:-len("_out")] if op.endswith("_out") else op
    return {"correction"} if base in ("std", "var", "std_mean", "var_mean") else set()


_REDUCTION = {"None": 0, "Mean": 1, "Sum": 2}


def r_default(arg, one_based: bool) -> str:
    """An argument's schema default as R code; NULL where the C++ layer takes the schema's own
    (None, [], enum values such as contiguous_format)."""
    text, base = arg.default, arg.type.rstrip("?")
    if text == "None":
        return "NULL"
    if text in ("True", "False"):
        return text.upper()
    if base == "int" and text in _REDUCTION:
        return f"{_REDUCTION[text]}L"
    numbers = _numbers(text)
    if numbers is not None and base != "str":
        if one_based:
            numbers = [n + 1 if isinstance(n, int) and n >= 0 else n for n in numbers]
        rendered = [_r_number(n, base) for n in numbers]
        if text.startswith("["):
            return "c(" + ", ".join(rendered) + ")" if rendered else "NULL"
        return rendered[0]
    if base == "str" and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        inner = text[1:-1]
        if "\\" in inner or '"' in inner:
            return "NULL"
        return '"' + inner + '"'
    return "NULL"


def _numbers(text: str):
    body = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if body.strip() == "":
        return [] if text.startswith("[") else None
    out = []
    for part in body.split(","):
        part = part.strip()
        if part in ("inf", "-inf"):
            out.append(float(part))
            continue
        try:
            out.append(int(part))
        except ValueError:
            try:
                out.append(float(part))
            except ValueError:
                return None
    return out


def _r_number(n, base: str) -> str:
    if isinstance(n, float):
        if n == float("inf"):
            return "Inf"
        if n == float("-inf"):
            return "-Inf"
        return repr(n)
    if base == "float":
        return str(n)
    return f"{n}L"  # an int (a Scalar stays integral: libtorch refuses a float alpha for ints)


# ---- documentation ----------------------------------------------------------------------------

OPS_DOC = """
Tensor operators (generated from libtorch's schemas)

R torch's `torch_*` functions that are libtorch operators, generated from
libtorch's operator schemas as R torch generates its own: one function per
operator name, choosing among the operator's overloads by the R values given
(a tensor or a number for `other`, for instance). Each runs libtorch's
kernel, on the tensors' device, with no copy. The same operators are tensor
methods: `torch_add(x, y)` is `x$add(y)`.

R torch's rules apply to every argument: dimensions (`dim`, `dims`,
`start_dim`, ...) and index tensors (`index`, `indices`) count from 1 (`-1`
is the last); R doubles become float32 tensors and R integers int64; `dtype`
takes a [torch_dtype] (or its name), `device` a [torch_device] (or a string).
An argument left `NULL` takes libtorch's default. The functions that return
positions (`torch_max()`, `torch_sort()`, `torch_argmax()`, ...) are written by
hand and return them 1-based: see [torch_index_ops].

@return A tensor, a list of tensors, or a number, as the operator returns.
@seealso PyTorch's documentation of the operator of the same name.
@examples
x <- torch_tensor(matrix(c(1, -2, 3, -4), 2))
torch_abs(x)
torch_add(x, 1)
torch_sum(x, dim = 1)
torch_matmul(x, x)
torch_cat(list(x, x), dim = 2)
torch_clamp(x, min = 0)
"""

_PARAM_DOCS = {
    "self": "A tensor.",
    "input": "A tensor.",
    "other": "A tensor, or a number.",
    "alpha": "A multiplier (a number).",
    "dim": "A dimension, 1-based (`-1` is the last); some operators take several.",
    "dims": "Dimensions, 1-based.",
    "keepdim": "Whether reduced dimensions are kept, with size 1.",
    "dtype": "A [torch_dtype] (or its name), or `NULL`.",
    "device": "A [torch_device] (or a string), or `NULL`.",
    "layout": "A layout, or `NULL`.",
    "pin_memory": "Whether to use pinned memory, or `NULL`.",
    "memory_format": "A memory format, or `NULL`.",
    "generator": "A [torch_generator()], or `NULL`.",
    "index": "An index tensor (int64, 1-based), or a 1-based position.",
    "indices": "Index tensors (int64, 1-based).",
    "tensors": "A list of tensors.",
    "weight": "A weight tensor.",
    "bias": "A bias tensor, or `NULL`.",
    "size": "A size: a vector of whole numbers.",
    "out": "An output tensor.",
    "p": "A number (a norm's order, a probability).",
    "value": "A number.",
    "start_dim": "The first dimension, 1-based.",
    "end_dim": "The last dimension, 1-based (`-1` is the last).",
    "dim0": "A dimension, 1-based.",
    "dim1": "A dimension, 1-based.",
    "dim2": "A dimension, 1-based.",
}


def param_doc(name: str, op: str) -> str:
    return _PARAM_DOCS.get(name, f"An argument of libtorch's operator (`{op}` and others of its "
                                 f"name in this page): see its schema.")
