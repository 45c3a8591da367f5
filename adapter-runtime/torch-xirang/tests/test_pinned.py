"""Pinned host memory, data loading and forked processes on `xirang`, against what `torch.cuda`
does: `pin_memory()` is the driver's page-locked memory, a non-blocking copy to the host lands in
pinned memory, `DataLoader(pin_memory=True)` feeds a model on the device from worker processes, and
a process forked after the device started gets CUDA's "cannot re-initialize" error."""

import multiprocessing as mp
import os

import pytest
import torch

import xirang  # noqa: F401


def test_pin_memory_is_the_drivers_page_locked_memory():
    t = torch.arange(4096, dtype=torch.float32)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and torch.equal(p, t)
    assert p.data_ptr() % 4096 == 0  # page-aligned, as the driver's host allocations are
    # a view into pinned memory is pinned; a copy of it is not
    assert p[100:].is_pinned() and not p.clone().is_pinned()
    empty = torch.empty(0).pin_memory()
    assert empty.numel() == 0


def test_copies_from_and_to_pinned_memory():
    torch.manual_seed(0)
    host = torch.randn(64, 257).pin_memory()
    dev = host.to("xirang", non_blocking=True)
    back = dev.to("cpu", non_blocking=True)
    # a non-blocking copy to the host lands in pinned memory (as from CUDA), valid after a sync
    assert back.is_pinned()
    torch.xirang.synchronize()
    assert torch.equal(back, host)
    # into an existing pinned tensor, and from a strided device view
    out = torch.empty(257, 64).pin_memory()
    out.copy_(dev.t(), non_blocking=True)
    torch.xirang.synchronize()
    assert torch.equal(out, host.t())


def test_pinned_memory_is_returned():
    torch.xirang.synchronize()
    import gc

    for _ in range(50):
        p = torch.empty(1 << 18).pin_memory()
        assert p.is_pinned()
        del p
    gc.collect()
    # freed blocks go back to the driver: a fresh tensor at a reused address is pinned again only
    # while it is alive
    t = torch.empty(1 << 18)
    assert not t.is_pinned()


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.full((8,), float(i))
        return x, x.sum()


def test_dataloader_pins_batches_for_the_device():
    # timeout: a wedged worker fails the test instead of hanging the suite
    loader = torch.utils.data.DataLoader(_Squares(), batch_size=16, num_workers=2, pin_memory=True, timeout=60)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).to("xirang")
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    seen = 0
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        x, y = x.to("xirang", non_blocking=True), y.to("xirang", non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += x.shape[0]
    assert seen == 64 and torch.isfinite(loss).item()


def _child_uses_device(q):
    try:
        q.put(("bad_fork", torch.xirang._is_in_bad_fork()))
        torch.ones(2, device="xirang")
        q.put(("ok", None))
    except RuntimeError as e:
        q.put(("error", str(e)))


def test_forked_child_gets_cudas_reinitialize_error():
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_uses_device, args=(q,))
    p.start()
    first = q.get(timeout=60)
    second = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert first == ("bad_fork", True)
    assert second[0] == "error" and "Cannot re-initialize xirang in forked subprocess" in second[1], second
    assert "'spawn' start method" in second[1]
    # the parent is unaffected
    assert not torch.xirang._is_in_bad_fork()
    assert torch.ones(2, device="xirang").sum().item() == 2.0
    assert os.getpid() != p.pid
