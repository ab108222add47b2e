"""``ampkit.ShardedGradScaler``: a drop-in for torch's FSDP ``ShardedGradScaler``.

The same state machine as :class:`ampkit.GradScaler` (the one in ampkit's core); what a sharded
run adds is that every rank must take the same skip decision and the same scale, although each
rank checks only its own shard of the gradients. So right after each unscale the found_inf
tensors are all-reduced over the process group (asynchronously, waited on before anything reads
them; with NCCL the wait is on the stream, not the host), and every rank then sees the sum.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import _C
from .grad_scaler import _OPTIONS, GradScaler

__all__ = ["ShardedGradScaler"]


def _found_inf_agreement(device: str, group: Optional[dist.ProcessGroup]):
    """The all-reduce the core calls with each unscale's found_inf tensors (summed in place).

    A closure over the device and the group only: the core keeps it, and a reference back to the
    Python scaler from there would be a cycle the garbage collector cannot see through C++.
    """
    wait_for_gloo = True  # until a wait times out (see _until_gloo_lets_go)

    def agree(found: List[torch.Tensor]) -> None:
        nonlocal wait_for_gloo
        reduced, on_cpu, moved = [], [], []
        for tensor in found:
            if device != "cpu" and tensor.device.type == "cpu":
                # A CPU-offloaded shard's gradients: reduce a copy on the device (NCCL has no
                # CPU tensors), then copy the sum back.
                on_device = tensor.to(device)
                on_cpu.append(tensor)
                moved.append(on_device)
                reduced.append(on_device)
            else:
                reduced.append(tensor)
        held = [(t, t._use_count()) for t in reduced if t.device.type == "cpu"]
        _all_reduce(reduced, group)
        if held and wait_for_gloo:
            wait_for_gloo = _until_gloo_lets_go(held)
        if on_cpu:
            torch._foreach_copy_(on_cpu, moved)
    return agree


def _all_reduce(tensors: List[torch.Tensor], group: Optional[dist.ProcessGroup]) -> None:
    """Sums `tensors` over `group` in place: all issued first, then all waited on. No work object
    outlives the call (each holds references to its tensors)."""
    works = [dist.all_reduce(t, async_op=True, group=group) for t in tensors]
    for work in works:
        work.wait()


# The longest the agreement waits for gloo's worker threads to let go of its tensors (they do
# within microseconds of finishing a work); past it, that scaler stops waiting.
_RELEASE_TIMEOUT_S = 1.0


def _until_gloo_lets_go(held: List[Tuple[torch.Tensor, int]]) -> bool:
    """Returns True once each CPU tensor in `held` is back to its reference count before the
    all-reduce, i.e. once gloo's worker threads hold none of them; False if that takes longer
    than ``_RELEASE_TIMEOUT_S`` (something else keeps a reference: not worth waiting each step).

    Why: a gloo worker thread drops its reference to a finished work a moment after ``wait()``
    returns. When that drop leaves a tensor with only its Python object's reference, the worker
    must take the GIL to release the Python object. At the end of a script the interpreter may
    be finalizing by then, and a thread that asks for the GIL during finalization is ended from
    inside a noexcept destructor: the process aborts ("terminate called without an active
    exception"; one exit in ten or so of the two-rank example on two cores). The scaler's
    all-reduce is the last collective of every step, so the scaler waits here, the GIL released,
    until gloo is done: usually no wait at all, a few microseconds when the worker is late.
    CUDA tensors are not waited for (NCCL's watchdog releases them later; waiting would be a host
    sync, and NCCL's shutdown joins its threads at ``destroy_process_group``).
    """
    deadline = time.monotonic() + _RELEASE_TIMEOUT_S
    while any(t._use_count() > count for t, count in held):
        if time.monotonic() > deadline:
            return False
        time.sleep(0)  # releases the GIL, which a worker may be waiting for
    return True


class ShardedGradScaler(GradScaler):
    """Loss scaling for sharded training (FSDP, FSDP2, DDP), a drop-in for
    ``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler``.

    torch's signature and behaviour: found_inf is all-reduced over ``process_group`` after each
    unscale, so a skip on one rank is a skip on every rank and the scales never drift apart;
    CPU-offloaded gradient shards are reduced through the scaler's device; float16 gradients are
    accepted; ``scale()`` returns the loss in its own dtype. No host read is added to the
    single-process scaler's (one per step, none for ``fused=True`` optimizers).

    Everything of :class:`ampkit.GradScaler` holds, including the scale policy and the reports
    (keyword-only): ``stats()`` agrees across ranks, ``step_was_skipped()`` too, and
    ``overflow_report()`` names the parameters of this rank's shard.

    Args:
        device, init_scale, backoff_factor, growth_factor, growth_interval, enabled: as torch's
            ``ShardedGradScaler`` (note its order: ``backoff_factor`` before ``growth_factor``).
        process_group: the group whose ranks agree; ``None`` (or torch's default,
            ``torch.distributed.group.WORLD``) is the default group.

    Example (in each of the processes that ``torchrun --nproc_per_node 2`` starts)::

        torch.distributed.init_process_group("gloo")          # "nccl" on GPUs
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = ampkit.ShardedGradScaler("cpu")
        with ampkit.autocast("cpu"):
            loss = model(torch.randn(8, 4)).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    A complete, runnable script: ``examples/distributed_train.py``.
    """

    _ALLOW_FP16_GRADS = True

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = _OPTIONS["init_scale"],
        backoff_factor: float = _OPTIONS["backoff_factor"],
        growth_factor: float = _OPTIONS["growth_factor"],
        growth_interval: int = _OPTIONS["growth_interval"],
        enabled: bool = _OPTIONS["enabled"],
        process_group: Optional[Any] = dist.group.WORLD,
        **policy: Any,
    ) -> None:
        if process_group is not None and not isinstance(process_group, dist.ProcessGroup):
            raise _C.ArgumentTypeError(
                "`process_group` must be a torch.distributed ProcessGroup, or None for the "
                f"default group, got {type(process_group).__name__}.")
        super().__init__(device, init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled, **policy)
        self.process_group = process_group
        if self._core.is_enabled():
            self._core.set_found_inf_agreement(_found_inf_agreement(device, process_group))

    def scale(self, outputs: Any) -> Any:
        """``outputs`` times the scale, each tensor in its own dtype (FSDP's mixed precision may
        give a float16 loss; torch's sharded scaler keeps it so)."""
        scaled = super().scale(outputs)
        return _like(outputs, scaled)

    def __getstate__(self) -> Any:
        raise TypeError("a ShardedGradScaler holds a process group and cannot be pickled; "
                        "checkpoint its state_dict() instead")


def _like(original: Any, scaled: Any) -> Any:
    """`scaled` with each tensor in the dtype of the matching tensor of `original`."""
    if isinstance(original, torch.Tensor):
        return scaled if scaled.dtype == original.dtype else scaled.type(original.dtype)
    if isinstance(original, (list, tuple)):
        return type(original)(_like(o, s) for o, s in zip(original, scaled))
    return scaled
