"""Faults a user causes on `xirang`, each against what CUDA gives: PyTorch's error type and message
shape, never a crash, a hang or a leak (device memory back at its baseline). The cases that need
their own device configuration run in a child process, bounded in time."""

import _thread
import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import xirang  # noqa: F401


def _baseline():
    gc.collect()
    torch.xirang.synchronize()
    return torch.xirang.memory_allocated()


def test_keyboard_interrupt_while_kernels_run():
    base = _baseline()
    x = torch.randn(256, 256, device="xirang")
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in range(1_000_000):
            x = torch.tanh(x @ x) / 16
    timer.cancel()
    # the device is still usable, the queued work finishes, nothing is left behind
    torch.xirang.synchronize()
    assert torch.isfinite(x).all().item()
    del x
    assert _baseline() == base


def test_device_index_out_of_range_and_negative():
    n = torch.xirang.device_count()
    with pytest.raises(RuntimeError, match=rf"invalid device index {n}"):
        torch.ones(1, device=f"xirang:{n}")
    with pytest.raises(RuntimeError, match="must not be negative|negative"):
        torch.ones(1, device=torch.device("xirang", -2))
    with pytest.raises(RuntimeError, match=rf"invalid device index {n}|Invalid device index {n}"):
        torch.xirang.set_device(n)
    assert torch.xirang.current_device() == 0


def test_tensor_freed_while_another_streams_kernel_reads_it():
    base = _baseline()
    torch.manual_seed(3)
    a = torch.randn(192, 192)
    x = a.to("xirang")
    side = torch.xirang.Stream()
    side.wait_stream(torch.xirang.current_stream())
    with torch.xirang.stream(side):
        y = x
        for _ in range(5):
            y = torch.tanh(y @ y.T / 192)
    del x  # freed while side's kernels are queued on it
    overwrite = [torch.zeros(192, 192, device="xirang") for _ in range(8)]  # reuses freed blocks at once
    expected = a
    for _ in range(5):
        expected = torch.tanh(expected @ expected.T / 192)
    side.synchronize()
    torch.testing.assert_close(y.cpu(), expected)
    del y, overwrite
    assert _baseline() == base


def _child(code: str, env: dict, timeout: int = 120) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True,
                          text=True, timeout=timeout)


def test_eight_threads_each_on_their_own_device_and_stream():
    r = _child(
        """
        import threading, torch, xirang
        assert torch.xirang.device_count() == 8
        errors, results = [], {}
        def work(i):
            try:
                torch.xirang.set_device(i)
                s = torch.xirang.Stream()
                with torch.xirang.stream(s):
                    g = torch.Generator().manual_seed(i)
                    a = torch.randn(64, 64, generator=g)
                    x = a.to(f"xirang:{i}")
                    for _ in range(20):
                        x = torch.tanh(x @ x.T / 64)
                        a = torch.tanh(a @ a.T / 64)
                    s.synchronize()
                    results[i] = (x.cpu() - a).abs().max().item(), x.device.index
            except Exception as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        [t.start() for t in ts]
        [t.join(60) for t in ts]
        assert not errors, errors
        assert sorted(results) == list(range(8)), results
        assert all(d == i and err < 1e-4 for i, (err, d) in results.items()), results
        for i in range(8):
            torch.xirang.synchronize(i)
        print("ok", max(e for e, _ in results.values()))
        """,
        {"XIRANG_SIM_DEVICES": ",".join(str(i) for i in range(8))},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok")


def test_out_of_memory_inside_backward():
    r = _child(
        """
        import gc, torch, xirang
        torch.xirang.synchronize()
        base = torch.xirang.memory_allocated()
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(6)]).to("xirang")
        x = torch.randn(512, 1024, device="xirang")
        loss = model(x).square().mean()   # the forward fits; its backward's gradients do not
        try:
            loss.backward()
        except torch.OutOfMemoryError as e:
            msg = str(e)
            assert "out of memory" in msg.lower() and "xirang" in msg, msg
        else:
            raise SystemExit("backward did not run out of memory")
        del loss, x, model
        gc.collect()
        torch.xirang.synchronize()
        torch.xirang.empty_cache()
        assert torch.xirang.memory_allocated() == base, (torch.xirang.memory_allocated(), base)
        # and the device works again
        assert torch.ones(4, device="xirang").sum().item() == 4.0
        print("ok")
        """,
        {"XIRANG_SIM_CAPACITY_BYTES": str(48 << 20)},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok"
