"""``ampkit.autocast_audit``: which op ran in which dtype, and what autocast's casts cost.

The audit observes dispatch from Python and changes nothing: every op runs exactly as it would
unaudited (the same kernels, the same dtypes, bit-identical results), and outside an audit
nothing of it is installed. While an audit is active, two of torch's thread-local modes are on:

- a ``TorchDispatchMode`` sees every ATen op as it reaches the kernels (below autograd and
  below autocast, so after autocast's casts): its dtypes, its output bytes, its host time, and
  whether it runs in a backward pass (``torch._C._current_autograd_node()``);
- a ``TorchFunctionMode`` sees each call from Python (``torch.mm``, ``F.linear``,
  ``Tensor.to``, ``Tensor.backward``, ...) before dispatch. It records two things the dispatch
  level cannot know: whether an autocast region is on for each device type (inside the
  dispatch mode ``torch.is_autocast_enabled`` always reads ``False``: the Python key runs with
  every key above it, autocast's included, excluded), and whether the call is the user's own
  conversion (``.to()``, ``.half()``, ``.float()``, ``.type()``, ``.type_as()``, or any call
  given an explicit ``dtype=``).

An ``aten._to_copy`` that changes the dtype is then:

- ``"user"`` inside one of the user's conversions;
- ``"autocast"`` inside any other call made while autocast is on for the tensor's device type:
  autocast inserted it (a ``cached_cast`` at the Autocast dispatch key);
- in a backward pass, the backward of the forward cast it belongs to (``ToCopyBackward0``): the
  forward cast's kind is written into that node's ``metadata`` when the forward cast runs in an
  audit, so autocast's casts of the backward (gradients back to the parameters' float32) are
  told apart from the backward of the user's casts;
- ``"other"`` otherwise (an op that casts internally outside autocast, or the backward of a
  cast made before the audit began).

Operations called from R (ampkit's R package calls libtorch directly) or other C++ reach the
dispatch mode with no Python call around them. For those the audit reads the autocast state as
it was when the operation was called (``_C.autocast_devices_at_dispatch_entry``) and the
precision policy region from the core (R's policies open theirs there too); what it cannot see
is a conversion of the caller's own: from R, a cast is ``"autocast"`` inside an autocast region
and ``"other"`` outside one (``"user"`` is for Python's conversions).

The one known effect of the function mode on what runs: PyTorch's inference-only fast paths of
``nn.MultiheadAttention`` and ``nn.TransformerEncoder(Layer)`` (eval mode, no grad) step aside
whenever any torch-function mode is active, so an audit of such a model in inference runs, and
shows, their regular path, whose results agree with the fast path's to rounding but not bit
for bit. Training, and every other module, run exactly as they do unaudited.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple, TypeVar

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import _C

__all__ = ["autocast_audit"]

F = TypeVar("F", bound=Callable[..., Any])

# Torch functions (their __name__ at the torch-function level) that are the user's own dtype
# conversions: the `_to_copy` they dispatch is the user's, not autocast's.
_CONVERSIONS = frozenset({
    "to", "type", "type_as", "half", "float", "double", "bfloat16", "int", "long", "short",
    "char", "byte", "bool", "cfloat", "cdouble", "cpu", "cuda", "xpu", "mps",
})
# The calls that run a backward pass (Tensor.backward, torch.autograd.backward / grad).
_BACKWARD_CALLS = frozenset({"backward", "grad"})
# Matrix-product work (ATen ops as they reach the kernels; composite ops such as linear and
# matmul decompose into these before the dispatch mode sees them).
_MATMUL_OPS = frozenset({
    "mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot",
    "vdot", "matmul", "linear", "_scaled_mm", "convolution", "_convolution",
    "convolution_overrideable", "mkldnn_convolution", "cudnn_convolution",
    "cudnn_convolution_transpose", "miopen_convolution", "_slow_conv2d_forward",
    "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "slow_conv_transpose2d", "slow_conv_transpose3d", "_nnpack_spatial_convolution",
    "mkldnn_linear", "_mkldnn_linear", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_efficient_attention_forward",
    "_flash_attention_forward",
})
_TO_COPY = torch.ops.aten._to_copy
# Where the kind of a forward cast is kept on its backward node (Node.metadata).
_MARK = "ampkit.autocast_audit.cast"

_current_node = torch._C._current_autograd_node
_any_autocast = torch._C._is_any_autocast_enabled
_clock = time.perf_counter
# The dtype of this thread's innermost precision policy region (the core's, shared with R).
_policy_dtype = _C.current_policy_dtype
_entry_devices = _C.autocast_devices_at_dispatch_entry

# (devices with autocast on, inside a user conversion, inside a backward call, the dtype of
# the innermost ampkit.precision_policy region or None)
_Context = Tuple[FrozenSet[str], bool, bool, Optional[str]]
_NO_CONTEXT: _Context = (frozenset(), False, False, None)
_devices: Optional[Tuple[str, ...]] = None


def _autocast_devices() -> Tuple[str, ...]:
    """The device types torch.is_autocast_enabled accepts here (asked once)."""
    global _devices
    if _devices is None:
        found = []
        for device in torch._C._autocast_supported_devices():
            try:
                torch.is_autocast_enabled(device)
            except Exception:  # a device type this build does not know
                continue
            found.append(device)
        _devices = tuple(found)
    return _devices


def _enabled_devices() -> FrozenSet[str]:
    if not _any_autocast():
        return _NO_CONTEXT[0]
    return frozenset(d for d in _autocast_devices() if torch.is_autocast_enabled(d))


def _native_context() -> _Context:
    """The context of an operation called with no Python call around it (from R, from C++):
    autocast's state when it was called, no conversion of the user's known, the policy region
    it runs in."""
    try:
        enabled = _entry_devices(_autocast_devices())
    except RuntimeError:  # torch kept no entry state for this dispatch: read as autocast off
        enabled = ()
    return (frozenset(enabled) if enabled else _NO_CONTEXT[0], False, False, _policy_dtype())


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype)[6:]  # "torch.bfloat16" -> "bfloat16"


class _FunctionMode(TorchFunctionMode):
    """Keeps, for the dispatch mode, the context of the Python-level call being run."""

    def __init__(self) -> None:
        super().__init__()
        # None while no Python call is being run (an operation then comes from R or C++)
        self.context: Optional[_Context] = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        previous = self.context
        name = getattr(func, "__name__", "")
        self.context = (_enabled_devices(),
                        name in _CONVERSIONS or kwargs.get("dtype") is not None,
                        name in _BACKWARD_CALLS,
                        _policy_dtype())
        try:
            return func(*args, **kwargs)
        finally:
            self.context = previous


class _DispatchMode(TorchDispatchMode):
    """Runs each op unchanged and hands what it saw to the audit."""

    def __init__(self, audit: "autocast_audit", functions: _FunctionMode) -> None:
        super().__init__()
        self._audit = audit
        self._functions = functions

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        audit = self._audit
        if audit._pending:
            audit._mark_pending()
        node = _current_node()
        context = self._functions.context
        if context is None:
            context = _native_context()
        start = _clock()
        out = func(*args, **kwargs)
        elapsed = _clock() - start
        audit._record(func, args, kwargs, out, node, context, elapsed)
        return out


def _input_dtypes(args: Any, kwargs: Dict[str, Any]) -> Tuple[Tuple[str, ...], str]:
    """The dtype of each tensor argument (a list of tensors as "[dtype, ...]"), and the device
    type of the first tensor ("" if none)."""
    names: List[str] = []
    device = ""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            names.append(_dtype_name(value.dtype))
            device = device or value.device.type
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
            seen: List[str] = []
            for t in value:
                if isinstance(t, torch.Tensor) and _dtype_name(t.dtype) not in seen:
                    seen.append(_dtype_name(t.dtype))
            names.append("[" + ", ".join(seen) + "]")
            device = device or value[0].device.type
    return tuple(names), device


def _outputs(out: Any) -> List[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover (the loop returns)


class autocast_audit:
    """Record which op ran in which dtype, and what autocast's casts cost.

    A context manager (and a decorator) that watches every ATen op the code inside runs, in
    the forward and the backward pass, inside autocast regions (``ampkit.autocast`` or
    ``torch.autocast``, nested in any order) and outside them. It observes and changes
    nothing: results are bit-identical to the same code unaudited (one exception, PyTorch's
    transformer inference fast paths: see the module's notes), no autocast state is touched,
    and outside an audit there is no cost at all. Its own cost while active is a
    Python call per op (tens of microseconds): audit a step, not a training run.

    ``summary()`` returns the findings as a dict; ``print(audit)`` prints them as a table,
    costliest first (``table()``). An audit accumulates over every entry (a decorated function
    called several times adds up); it may be entered on several threads, and nested with other
    audits (each records everything). Modes are per thread: another thread's ops are seen only
    while that thread is inside the audit too (autograd's backward threads are included).

    What counts:

    - ``casts`` / ``cast_bytes``: the dtype casts autocast inserted (``aten._to_copy`` inside
      an autocast region, not in the user's own ``.to()``/``.half()``/...), and in backward the
      casts that undo them (the gradient of a bfloat16 weight copy cast back to the float32
      parameter's dtype), with the bytes they wrote (numel x element size of each cast's
      output). The weight-cast cache is honoured: what is counted is what ran.
    - ``user_casts`` / ``user_cast_bytes``: the same for the user's own conversions.
    - ``fp32_matmuls_outside_autocast``: forward calls of matrix products and convolutions
      (``mm``, ``addmm``, ``bmm``, ``convolution``, attention kernels, ...) that produced
      float32 outside any autocast region for their device: work autocast could have done in
      lower precision. Backward calls are not counted (a backward follows its forward's dtype),
      nor are those an ``ampkit.precision_policy`` keeps in float32 on purpose: they are
      ``policy_fp32_matmuls``.
    - ``policy`` of a row: the dtype (``"float32"``, ``"bfloat16"``, ``"float16"``) of the
      innermost ``ampkit.precision_policy`` region the op's forward call ran in, else ``None``.
    - ``time_s`` of a row: host time spent in its calls. On the CPU that is the op's work; on
      CUDA, where kernels run asynchronously, it is the launch (synchronise to see more).

    Example:
        >>> import torch, ampkit
        >>> model = torch.nn.Linear(8, 4)
        >>> x = torch.randn(2, 8)
        >>> with ampkit.autocast_audit() as audit:
        ...     with ampkit.autocast("cpu", dtype=torch.bfloat16):
        ...         y = model(x)
        ...     loss = torch.nn.functional.mse_loss(y.float(), torch.zeros(2, 4))
        >>> s = audit.summary()
        >>> [(r["op"], r["out_dtype"]) for r in s["ops"] if r["op"] == "addmm"]
        [('addmm', 'bfloat16')]
        >>> s["casts"], s["cast_bytes"], s["user_casts"]   # x, weight, bias to bfloat16; .float()
        (3, 104, 1)
        >>> audit = ampkit.autocast_audit()       # as a decorator: calls add up in `audit`
        >>> @audit
        ... def forward(x):
        ...     with ampkit.autocast("cpu"):
        ...         return model(x)
        >>> _ = forward(x); _ = forward(x)
        >>> audit.summary()["casts"]
        6
    """

    def __init__(self, *unexpected: Any) -> None:
        if unexpected:
            what = type(unexpected[0]).__name__
            raise _C.ArgumentTypeError(
                f"autocast_audit() takes no arguments, got a {what}; write "
                "`with ampkit.autocast_audit() as audit:`, or `@audit` for an "
                "`audit = ampkit.autocast_audit()` (note the parentheses).")
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: its depth and its two modes
        # (op, in_dtypes, out_dtype, autocast, backward, cast, device) -> [calls, bytes, time]
        self._stats: Dict[tuple, List[Any]] = {}
        self._fp32_matmuls = 0
        self._policy_fp32_matmuls = 0
        self._pending: List[Tuple[torch.Tensor, str]] = []
        self._names: Dict[Any, str] = {}
        self._views: Dict[Any, bool] = {}

    # -- entering and leaving ------------------------------------------------------------------

    def __enter__(self) -> "autocast_audit":
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            functions = _FunctionMode()
            dispatch = _DispatchMode(self, functions)
            functions.__enter__()
            try:
                dispatch.__enter__()
            except BaseException:
                functions.__exit__(None, None, None)
                raise
            self._local.modes = (functions, dispatch)
        self._local.depth = depth + 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            raise _C.StateError("autocast_audit: __exit__ without a matching __enter__ on "
                                "this thread.")
        self._local.depth = depth - 1
        if depth == 1:
            functions, dispatch = self._local.modes
            del self._local.modes
            try:
                dispatch.__exit__(None, None, None)
            finally:
                functions.__exit__(None, None, None)
            self._mark_pending()
        return False

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise _C.ArgumentTypeError(
                f"autocast_audit()(func): `func` must be a callable, got "
                f"{type(func).__name__}; use `with ampkit.autocast_audit() as audit:` for a "
                "block.")

        @functools.wraps(func)
        def audited(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return audited  # type: ignore[return-value]

    # -- recording (called by the modes) -------------------------------------------------------

    def _op_name(self, func: Any) -> str:
        name = self._names.get(func)
        if name is None:
            packet = func.overloadpacket.__name__
            namespace = getattr(func, "namespace", "aten")
            name = packet if namespace == "aten" else f"{namespace}::{packet}"
            self._names[func] = name
        return name

    def _is_view(self, func: Any) -> bool:
        view = self._views.get(func)
        if view is None:
            view = self._views[func] = bool(getattr(func, "is_view", False))
        return view

    def _mark_pending(self) -> None:
        """Writes the kind of each recent forward cast onto its backward node. Autograd sets a
        cast's grad_fn after the dispatch mode returns, so this runs at the next op (or at the
        audit's exit)."""
        pending, self._pending = self._pending, []
        for tensor, kind in pending:
            node = tensor.grad_fn
            if node is not None:
                node.metadata[_MARK] = kind

    def _record(self, func: Any, args: Any, kwargs: Dict[str, Any], out: Any, node: Any,
                context: _Context, elapsed: float) -> None:
        name = self._op_name(func)
        in_dtypes, device = _input_dtypes(args, kwargs)
        outputs = _outputs(out)
        if not outputs and name.endswith("_") and args:  # in place, returning nothing
            outputs = _outputs(args[0])
        if not device:
            device = outputs[0].device.type if outputs else "cpu"
        out_dtype = _dtype_name(outputs[0].dtype) if outputs else "-"
        # A view writes nothing; every other op writes its outputs (in place or new).
        nbytes = 0 if self._is_view(func) else sum(t.numel() * t.element_size()
                                                    for t in outputs)
        enabled, user, in_backward_call, policy = context
        autocast = device in enabled
        backward = node is not None or in_backward_call
        cast = None
        if func.overloadpacket is _TO_COPY and outputs and in_dtypes \
                and in_dtypes[0] != out_dtype:
            if node is not None:
                cast = node.metadata.get(_MARK, "other")
            elif user:
                cast = "user"
            elif autocast:
                cast = "autocast"
            else:
                cast = "other"
            if node is None and cast != "other":
                self._pending.append((outputs[0], cast))
        key = (name, in_dtypes, out_dtype, autocast, backward, cast, device, policy)
        with self._lock:
            entry = self._stats.get(key)
            if entry is None:
                self._stats[key] = [1, nbytes, elapsed]
            else:
                entry[0] += 1
                entry[1] += nbytes
                entry[2] += elapsed
            if (not backward and not autocast and out_dtype == "float32"
                    and name in _MATMUL_OPS):
                if policy == "float32":
                    self._policy_fp32_matmuls += 1
                else:
                    self._fp32_matmuls += 1

    # -- results -------------------------------------------------------------------------------

    def summary(self) -> Dict[str, Any]:
        """The audit's findings so far, as a dict (see the class's docs for what counts).

        Keys: ``ops`` (one dict per distinct op, costliest first: ``op``, ``in_dtypes`` (a
        list: each tensor argument's dtype, a list of tensors as ``"[dtype]"``),
        ``out_dtype`` (``"-"`` when no tensor comes out), ``calls``, ``autocast`` (ran inside
        an autocast region for its device), ``backward``, ``cast`` (for a dtype cast:
        ``"autocast"``, ``"user"`` or ``"other"``; else ``None``), ``device``, ``policy``
        (the dtype of the precision-policy region it ran in, or ``None``), ``bytes``
        (written by its outputs), ``time_s``), ``casts``, ``cast_bytes``,
        ``fp32_matmuls_outside_autocast``, ``policy_fp32_matmuls``, ``user_casts``,
        ``user_cast_bytes``, ``calls`` (every op call), ``time_s`` and ``cast_time_s`` (host
        time in all ops, in autocast's casts).

        Example:
            >>> import torch, ampkit
            >>> a = torch.randn(4, 4)
            >>> with ampkit.autocast_audit() as audit:
            ...     b = a @ a                       # float32, outside autocast
            >>> audit.summary()["fp32_matmuls_outside_autocast"]
            1
        """
        self._mark_pending()
        with self._lock:
            items = [(key, list(value)) for key, value in self._stats.items()]
            fp32_matmuls = self._fp32_matmuls
            policy_fp32_matmuls = self._policy_fp32_matmuls
        items.sort(key=lambda kv: (-kv[1][2], kv[0][0]))
        ops = [{"op": k[0], "in_dtypes": list(k[1]), "out_dtype": k[2], "calls": v[0],
                "autocast": k[3], "backward": k[4], "cast": k[5], "device": k[6],
                "policy": k[7], "bytes": v[1], "time_s": v[2]} for k, v in items]

        def total(cast: str, index: int) -> Any:
            return sum(v[index] for k, v in items if k[5] == cast)

        return {
            "ops": ops,
            "casts": total("autocast", 0),
            "cast_bytes": total("autocast", 1),
            "fp32_matmuls_outside_autocast": fp32_matmuls,
            "policy_fp32_matmuls": policy_fp32_matmuls,
            "user_casts": total("user", 0),
            "user_cast_bytes": total("user", 1),
            "calls": sum(v[0] for _, v in items),
            "time_s": sum(v[2] for _, v in items),
            "cast_time_s": total("autocast", 2),
        }

    def table(self, limit: Optional[int] = None) -> str:
        """The findings as a readable table, costliest (host time) first; ``limit`` keeps the
        first rows only (``None``: all). ``print(audit)`` prints ``audit.table()``.

        Example:
            >>> import torch, ampkit
            >>> with ampkit.autocast_audit() as audit:
            ...     with ampkit.autocast("cpu"):
            ...         y = torch.mm(torch.randn(4, 4), torch.randn(4, 4))
            >>> print(audit.table(limit=3))  # doctest: +ELLIPSIS
            autocast audit: ...
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise _C.ArgumentTypeError(
                f"`limit` must be a whole number >= 0 or None, got {limit!r}.")
        if limit is not None and limit < 0:  # the right type, a wrong value
            raise _C.ArgumentError(f"`limit` must be a whole number >= 0 or None, got {limit!r}.")
        s = self.summary()
        rows = s["ops"] if limit is None else s["ops"][:limit]
        head = (f"autocast audit: {s['calls']} op calls, {s['time_s'] * 1e3:.2f} ms in ops; "
                f"autocast casts: {s['casts']} ({_fmt_bytes(s['cast_bytes'])}, "
                f"{s['cast_time_s'] * 1e3:.2f} ms); user casts: {s['user_casts']} "
                f"({_fmt_bytes(s['user_cast_bytes'])}); fp32 matmuls outside autocast: "
                f"{s['fp32_matmuls_outside_autocast']}")
        columns = ["op", "device", "in_dtypes", "out_dtype", "calls", "autocast", "backward",
                   "cast", "policy", "bytes", "ms"]
        body = [[r["op"], r["device"], ", ".join(r["in_dtypes"]) or "-", r["out_dtype"],
                 str(r["calls"]), "yes" if r["autocast"] else "no",
                 "yes" if r["backward"] else "no", r["cast"] or "-", r["policy"] or "-",
                 _fmt_bytes(r["bytes"]),
                 f"{r['time_s'] * 1e3:.3f}"] for r in rows]
        widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(columns)]
        numeric = {"calls", "bytes", "ms"}

        def line(cells: List[str]) -> str:
            return "  ".join(cell.rjust(w) if col in numeric else cell.ljust(w)
                             for cell, w, col in zip(cells, widths, columns)).rstrip()

        lines = [head, line(columns), "-" * len(line(columns))] + [line(b) for b in body]
        if limit is not None and len(s["ops"]) > limit:
            lines.append(f"... {len(s['ops']) - limit} more rows")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        s = self.summary()
        return (f"<ampkit.autocast_audit: {len(s['ops'])} distinct ops, {s['calls']} calls, "
                f"{s['casts']} autocast casts ({s['cast_bytes']} bytes)>")
