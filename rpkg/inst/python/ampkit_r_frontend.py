"""Helpers of ampkit's R torch front end (rpkg/R/frontend-*.R) that are cheaper in Python.

R vectors cross as raw bytes (reticulate 1.28 cannot convert NumPy 2's arrays), in R's
column-major order; shapes are R's (first dimension first).
"""

import torch

# R's storage type -> the dtype of its bytes and R torch's default tensor dtype.
_R_KINDS = {
    "double": (torch.float64, torch.float32),
    "integer": (torch.int32, torch.int64),
    "logical": (torch.int32, torch.bool),
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
    t = t.to(dtype=default if dtype is None else dtype, device=device, copy=True)
    t = t.contiguous()
    if requires_grad:
        t.requires_grad_(True)
    return t


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
    elif t.is_floating_point():
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
