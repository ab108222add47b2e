"""ampkit.ShardedGradScaler against torch's ShardedGradScaler, with gloo ranks on 127.0.0.1.

Each run spawns the ranks (distributed_worker.py), which train with both scalers; every rank's
scale sequence, skip decisions and local parameters must equal torch's bit for bit, and the
ranks must agree with each other. The runs are bounded in time: spawn() is given a join timeout
and the process groups a short timeout.

The multi-rank runs are CPU-only by nature (gloo ranks on one machine; nccl needs a GPU per rank,
and gradients on two GPUs are test_cuda.py's); the single-process test runs on each device.
"""

from __future__ import annotations

import socket
import threading
import time

import ampkit
import ampkit.sharded_grad_scaler as sharded
import distributed_worker as worker
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed missing")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(fn, world: int, *args) -> None:
    context = mp.start_processes(fn, args=(world, _free_port(), *args), nprocs=world,
                                 join=False, start_method="spawn")
    deadline = time.monotonic() + 240
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the ranks did not finish within 240 s")


def _run(kind: str, world: int, inject_rank: int, tmp_path) -> list:
    _spawn(worker.run, world, kind, inject_rank, str(tmp_path))
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(world)]


def _assert_same_as_torch_and_ranks_agree(records: list) -> None:
    for rank, record in enumerate(records):
        ours, theirs = record["ampkit"], record["torch"]
        assert ours["scale"] == theirs["scale"], f"rank {rank}"
        assert ours["skipped"] == theirs["skipped"], f"rank {rank}"
        for step, (a, b) in enumerate(zip(ours["params"], theirs["params"])):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), f"rank {rank}, step {step}"
    first = records[0]["ampkit"]
    assert any(first["skipped"]), "the injected inf must skip a step"
    for record in records[1:]:
        assert record["ampkit"]["scale"] == first["scale"]
        assert record["ampkit"]["skipped"] == first["skipped"]
        assert record["ampkit"]["stats"] == first["stats"]
    # no host read beyond the single-process scaler's: one per step
    assert all(r["ampkit"]["host_reads"] == worker.STEPS for r in records)
    # after each step no gloo worker still holds the scaler's tensors (see _until_gloo_lets_go)
    assert [r["ampkit"]["held_by_gloo"] for r in records] == [0] * len(records)


@pytest.mark.parametrize("kind", ["ddp", "fsdp", "fsdp2"])
def test_two_ranks_match_torchs_sharded_scaler_with_an_inf_on_one_rank(kind, tmp_path):
    records = _run(kind, 2, inject_rank=1, tmp_path=tmp_path)
    _assert_same_as_torch_and_ranks_agree(records)


def test_four_ranks_on_two_cores_with_an_inf_on_the_last_rank(tmp_path):
    records = _run("fsdp", 4, inject_rank=3, tmp_path=tmp_path)
    _assert_same_as_torch_and_ranks_agree(records)


def test_a_rank_that_raises_in_the_step_makes_the_others_fail_not_hang():
    started = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match="failed inside the step|gloo|Connection"):
        _spawn(worker.fail_in_step, 2, 1, 5.0)
    assert time.monotonic() - started < 120


def test_process_group_must_be_a_process_group():
    with pytest.raises(TypeError, match="`process_group` must be a torch.distributed"):
        ampkit.ShardedGradScaler("cpu", process_group="world")
    with pytest.raises(TypeError, match="got int"):
        ampkit.ShardedGradScaler("cpu", process_group=0)


def test_without_a_process_group_it_is_the_single_process_scaler_keeping_the_loss_dtype(device):
    # No process group initialised: the default group is None and nothing is reduced until a
    # step needs it; scale() keeps the loss's dtype as torch's sharded scaler does.
    scaler = ampkit.ShardedGradScaler(device, init_scale=4.0, enabled=True)
    loss = torch.tensor(2.0, dtype=torch.bfloat16, device=device)
    assert scaler.scale(loss).dtype == torch.bfloat16
    assert [t.dtype for t in scaler.scale([loss, (loss.float(),)])[1]] == [torch.float32]


def test_the_wait_for_gloo_ends_when_the_last_foreign_reference_goes_and_is_bounded(monkeypatch):
    # A view holds a C++ reference to its base, as a gloo work holds its tensors.
    tensor = torch.zeros(1)
    count = tensor._use_count()
    foreign = [tensor.view(-1)]
    threading.Timer(0.05, foreign.clear).start()  # "the worker" lets go a little later
    assert sharded._until_gloo_lets_go([(tensor, count)]) is True
    assert tensor._use_count() == count

    kept = tensor.view(-1)  # never let go: the wait gives up
    monkeypatch.setattr(sharded, "_RELEASE_TIMEOUT_S", 0.05)
    assert sharded._until_gloo_lets_go([(tensor, count)]) is False
    del kept


def test_a_scaler_whose_wait_timed_out_does_not_wait_again(monkeypatch):
    waits = []
    monkeypatch.setattr(sharded, "_all_reduce", lambda tensors, group: None)
    monkeypatch.setattr(sharded, "_until_gloo_lets_go", lambda held: waits.append(held) or False)
    agree = sharded._found_inf_agreement("cpu", None)
    for _ in range(3):
        agree([torch.zeros(1)])
    assert len(waits) == 1
    other = sharded._found_inf_agreement("cpu", None)  # another scaler still waits
    other([torch.zeros(1)])
    assert len(waits) == 2
