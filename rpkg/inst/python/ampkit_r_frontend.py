"""Helpers of ampkit's R torch front end (rpkg/R/frontend-*.R) that are cheaper in Python.

R vectors cross as raw bytes (reticulate 1.28 cannot convert NumPy 2's arrays), in R's
column-major order; shapes are R's (first dimension first).
"""

import torch

# R's storage type -> the dtype of its bytes and R torch's default tensor dtype (None: torch's
# default floating dtype).
_R_KINDS = {
    "double": (torch.float64, None),
    "integer": (torch.int32, torch.int64),
    "logical": (torch.int32, torch.bool),
    "raw": (torch.uint8, torch.uint8),
}


def from_r(raw, kind, shape, dtype=None, device=None, requires_grad=False):
    """A tensor of `shape` from an R vector's bytes (column-major), with R torch's dtypes."""
    stored, default = _R_KINDS[kind]
    shape = [int(s) for s in shape]
    if len(raw) == 0:
        t = torch.empty(shape, dtype=stored)
    else:
        t = torch.frombuffer(raw, dtype=stored)
        # column-major: the reversed shape in row-major order, its axes reversed back.
        t = t.reshape(shape[::-1])
        if len(shape) > 1:
            t = t.permute(*reversed(range(len(shape))))
    if kind == "logical":
        t = t != 0
    if dtype is None:
        dtype = torch.get_default_dtype() if default is None else default
    t = t.to(dtype=dtype, device=device, copy=True)
    t = t.contiguous()
    if requires_grad:
        t.requires_grad_(True)
    return t


_INT_MAX = 2**31 - 1


def to_r(t):
    """(bytes in column-major order, R storage kind, shape) of a tensor, as R torch converts:
    floating -> double, integer -> integer (int64 -> int32), bool -> logical."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_complex():
        raise TypeError("complex tensors cannot be converted to R arrays")
    if t.dtype == torch.bool:
        kind, stored = "logical", torch.int32
    elif t.dtype == torch.uint8:
        kind, stored = "raw", torch.uint8
    elif t.is_floating_point():
        kind, stored = "double", torch.float64
    elif t.numel() and (int(t.max()) > _INT_MAX or int(t.min()) < -_INT_MAX):
        # beyond R's integers (whose smallest value is NA): doubles, exact up to 2^53.
        kind, stored = "double", torch.float64
    else:
        kind, stored = "integer", torch.int32
    shape = list(t.shape)
    t = t.to(stored)
    if t.dim() > 1:
        t = t.permute(*reversed(range(t.dim())))
    t = t.contiguous()
    return bytearray(t.numpy().tobytes()), kind, shape


def dtype_name(dtype):
    return str(dtype)[len("torch."):]


# ---- indexing with R torch's rules (rpkg/R/indexing.R) ----------------------------------------
#
# An index is a list of items, one per argument of R's `[`:
#   ["all"]                     an empty argument (x[1, ])
#   ["int", i]                  one number: 1-based, negative from the end; drops its dim
#   ["slice", start, end, step] start:end (both included, 1-based, negative from the end)
#   ["newaxis"]                 NULL / newaxis: a new dim of size 1
#   ["fill"]                    `..`: as many "all" as needed
#   ["vec", [i, ...]]           several numbers: 1-based positions, kept in R's order
#   ["lmask", [b, ...]]         an R logical vector over one dim (recycled if of length 1)
#   ["tensor", t]               a long tensor (1-based positions) or a bool tensor (a mask)
# Several "vec"-like items select as R does (every combination: x[c(1, 2), c(2, 3)] is 2x2),
# not pointwise as PyTorch's advanced indexing does.


def _dim_count(item):
    kind = item[0]
    if kind in ("newaxis", "fill"):
        return 0
    if kind == "tensor" and item[1].dtype == torch.bool:
        return max(item[1].dim(), 1)
    return 1


def _position(i, size, dim):
    """A 1-based R position (negative from the end) as a 0-based one, checked."""
    if i == 0:
        raise IndexError("Indexing starts at 1 but found a 0.")
    j = i - 1 if i > 0 else size + i
    if j < 0 or j >= size:
        raise IndexError(
            f"index {i} is out of bounds for dimension {dim + 1} with size {size}")
    return j


def _positions(t, size, dim):
    """A 1-based index tensor as 0-based, checked."""
    t = t.to(torch.int64)
    if t.numel() == 0:
        return t
    if bool((t == 0).any()):
        raise IndexError("Indexing starts at 1 but found a 0.")
    t = torch.where(t > 0, t - 1, t + size)
    if bool(((t < 0) | (t >= size)).any()):
        bad = int(t[(t < 0) | (t >= size)][0])
        raise IndexError(
            f"index {bad + 1} is out of bounds for dimension {dim + 1} with size {size}")
    return t


def _slice(item, size):
    _, start, end, step = item
    step = 1 if step is None else int(step)
    if step <= 0:
        raise IndexError("A slice's step must be positive.")
    start = int(start)
    if start == 0:
        raise IndexError("Indexing starts at 1 but found a 0.")
    start = start - 1 if start > 0 else max(size + start, 0)
    end = int(end)
    if end == 0:
        raise IndexError("Indexing starts at 1 but found a 0.")
    stop = min(end, size) if end > 0 else size + end + 1
    return slice(start, stop, step)


def _expand(t, items):
    """Items with `..` replaced by "all"s; checks the number of dims."""
    used = sum(_dim_count(it) for it in items)
    fills = [k for k, it in enumerate(items) if it[0] == "fill"]
    if len(fills) > 1:
        raise IndexError("`..` may be used only once in an index.")
    if used > t.dim():
        raise IndexError(
            f"too many indices for a tensor of {t.dim()} dimensions: {used} given")
    if fills:
        k = fills[0]
        items = items[:k] + [["all"]] * (t.dim() - used) + items[k + 1:]
    return items


def _vector_like(item):
    kind = item[0]
    if kind in ("vec", "lmask"):
        return True
    if kind == "tensor":
        return item[1].dim() == 1
    return False


def _plan(t, items, drop):
    """(basic index tuple or None, outer index data) for the items."""
    items = _expand(t, list(items))
    if not any(_vector_like(it) for it in items):
        index, dim = [], 0
        for it in items:
            kind = it[0]
            if kind == "newaxis":
                index.append(None)
                continue
            if kind == "tensor":
                x = it[1]
                if x.dtype == torch.bool:
                    index.append(x)
                    dim += x.dim()
                    continue
                if x.dim() == 0:
                    j = _position(int(x), t.shape[dim], dim)
                    index.append(j if drop else slice(j, j + 1))
                else:
                    index.append(_positions(x, t.shape[dim], dim))
                dim += 1
                continue
            size = t.shape[dim]
            if kind == "all":
                index.append(slice(None))
            elif kind == "int":
                j = _position(int(it[1]), size, dim)
                index.append(j if drop else slice(j, j + 1))
            elif kind == "slice":
                index.append(_slice(it, size))
            dim += 1
        return tuple(index), None
    # R's rule: every combination. Each dim-consuming item becomes a 1-d position tensor,
    # shaped to broadcast over the others (all items are advanced, hence adjacent).
    positions, drops, newaxes, dim = [], [], [], 0
    for it in items:
        kind = it[0]
        if kind == "newaxis":
            newaxes.append(len(positions) - len(drops) + len(newaxes))
            continue
        size = t.shape[dim]
        device = t.device
        if kind == "all":
            p = torch.arange(size, device=device)
        elif kind == "int":
            p = torch.tensor([_position(int(it[1]), size, dim)], device=device)
            if drop:
                drops.append(len(positions))
        elif kind == "slice":
            p = torch.arange(size, device=device)[_slice(it, size)]
        elif kind == "vec":
            p = _positions(torch.tensor(list(it[1]), dtype=torch.int64), size, dim).to(device)
        elif kind == "lmask":
            mask = list(it[1])
            if len(mask) == 1:
                mask = mask * size
            if len(mask) != size:
                raise IndexError(
                    f"a logical index over dimension {dim + 1} must have length {size} "
                    f"(or 1), got {len(mask)}")
            p = torch.tensor(mask, dtype=torch.bool).nonzero().flatten().to(device)
        else:  # a 1-d tensor
            x = it[1]
            if x.dtype == torch.bool:
                if x.numel() != size:
                    raise IndexError(
                        f"a boolean index over dimension {dim + 1} must have length {size}, "
                        f"got {x.numel()}")
                p = x.nonzero().flatten().to(device)
            else:
                p = _positions(x, size, dim).to(device)
        positions.append(p)
        dim += 1
    k = len(positions)
    index = tuple(p.reshape([1] * j + [-1] + [1] * (k - j - 1)) for j, p in enumerate(positions))
    return index, (drops, newaxes)


def _finish(result, outer):
    drops, newaxes = outer
    for j in reversed(drops):
        result = result.squeeze(j)
    for j in newaxes:
        result = result.unsqueeze(j)
    return result


def getitem(t, items, drop=True):
    index, outer = _plan(t, items, drop)
    result = t[index]
    if outer is not None:
        result = _finish(result, outer)
    return result


def setitem(t, items, value):
    index, outer = _plan(t, items, True)
    if isinstance(value, torch.Tensor):
        value = value.to(dtype=t.dtype, device=t.device)
    if outer is not None and isinstance(value, torch.Tensor):
        drops, _ = outer
        target = list(t[index].shape)
        # the value is shaped like the dropped selection: put the dropped dims back.
        if value.dim() == len(target) - len(drops) and value.dim() > 0:
            for j in drops:
                value = value.unsqueeze(j)
    t[index] = value
    return t


def set_grad_enabled(enabled):
    """Sets autograd's mode; returns the mode before (one crossing from R)."""
    before = torch.is_grad_enabled()
    torch.set_grad_enabled(enabled)
    return before


def shape(t):
    return list(t.shape)


def strides(t):
    return list(t.stride())


# ---- autograd functions written in R (rpkg/R/frontend-autograd.R) -----------------------------


class _RHooks:
    """The R forward and backward of one application (R closures that share its context)."""

    def __init__(self, forward, backward):
        self.forward = forward
        self.backward = backward


class RFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hooks, *args):
        ctx.r_hooks = hooks
        out = hooks.forward(ctx)
        return tuple(out) if isinstance(out, list) else out

    @staticmethod
    def backward(ctx, *grads):
        out = ctx.r_hooks.backward(ctx, list(grads))
        return (None, *out)


def apply_r_function(forward, backward, tensors):
    """Applies an autograd function whose forward and backward are R closures; `tensors` are
    its inputs (all of them, so that backward returns one gradient per input)."""
    return RFunction.apply(_RHooks(forward, backward), *tensors)
