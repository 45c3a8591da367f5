"""Device `xirang` as an unmodified PyTorch program sees it."""

import os
import subprocess
import sys

import pytest
import torch

import xirang

PY = sys.executable


def run(code: str, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([PY, "-c", code], env=e, capture_output=True, text=True, timeout=300)


def test_device_module():
    assert torch.xirang is xirang
    assert torch.xirang.is_available()
    assert torch.xirang.device_count() >= 2
    assert torch._C._get_privateuse1_backend_name() == "xirang"
    assert torch.xirang.pytorch_version().lstrip("v") == torch.__version__.split("+")[0]


def test_factories_and_round_trip():
    x = torch.randn(2, 3, device="xirang")
    assert x.device == torch.device("xirang", 0)
    assert x.shape == (2, 3) and x.dtype == torch.float32
    c = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = c.to("xirang")
    assert d.is_xirang
    torch.testing.assert_close(d.cpu(), c)
    torch.testing.assert_close(torch.zeros(4, device="xirang").cpu(), torch.zeros(4))
    torch.testing.assert_close(torch.full((2, 2), 3.5, device="xirang").cpu(), torch.full((2, 2), 3.5))
    assert torch.ones(3, device="xirang").sum().item() == 3.0


def test_second_device_and_cross_device_copies():
    c = torch.randn(5, 7)
    a = c.to("xirang:0")
    b = a.to("xirang:1")
    assert b.device == torch.device("xirang", 1)
    torch.testing.assert_close(b.cpu(), c)
    torch.testing.assert_close((b * 2).cpu(), c * 2)
    with pytest.raises(RuntimeError, match="device"):
        a + b


def test_current_device_and_guard():
    assert torch.xirang.current_device() == 0
    torch.xirang.set_device(1)
    assert torch.xirang.current_device() == 1
    assert torch.empty(2, device="xirang").device.index == 1
    torch.xirang.set_device(0)
    with torch.xirang.device(1):
        assert torch.xirang.current_device() == 1
        y = torch.ones(3, device="xirang")
    assert torch.xirang.current_device() == 0
    assert y.device.index == 1
    # an operator runs on its tensors' device whatever the current one
    torch.testing.assert_close((y + y).cpu(), torch.full((3,), 2.0))


def test_model_to_and_methods():
    m = torch.nn.Linear(4, 2)
    m.to("xirang")
    assert m.weight.device.type == "xirang"
    x = torch.randn(3, 4)
    torch.testing.assert_close(m(x.to("xirang")).cpu(), m.cpu()(x), rtol=1e-5, atol=1e-5)
    t = torch.randn(2).xirang()
    assert t.is_xirang


def test_synchronize_and_seed():
    torch.xirang.synchronize()
    torch.xirang.synchronize(1)
    torch.xirang.manual_seed(7)
    a = torch.randn(8, device="xirang").cpu()
    torch.xirang.manual_seed(7)
    b = torch.randn(8, device="xirang").cpu()
    torch.testing.assert_close(a, b)
    assert torch.xirang.initial_seed() == 7
    c = torch.randn(8, device="xirang").cpu()
    assert not torch.equal(b, c)
    torch.manual_seed(3)  # torch.manual_seed seeds every device, xirang included
    d = torch.rand(4, device="xirang").cpu()
    torch.manual_seed(3)
    torch.testing.assert_close(torch.rand(4, device="xirang").cpu(), d)


def test_rng_state_round_trip_and_fork_rng():
    torch.xirang.manual_seed(11)
    state = torch.xirang.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() > 0
    a = torch.rand(6, device="xirang").cpu()
    torch.xirang.set_rng_state(state)
    torch.testing.assert_close(torch.rand(6, device="xirang").cpu(), a)
    # torch.random.fork_rng and activation checkpointing use the device module's rng state
    with torch.random.fork_rng(devices=[0], device_type="xirang"):
        torch.rand(100, device="xirang")
    b = torch.rand(6, device="xirang").cpu()
    torch.xirang.set_rng_state(state)
    torch.rand(6, device="xirang")
    torch.testing.assert_close(torch.rand(6, device="xirang").cpu(), b)
    assert len(torch.xirang.get_rng_state_all()) == torch.xirang.device_count()


def test_memory_api():
    torch.xirang.empty_cache()
    base = torch.xirang.memory_allocated()
    x = torch.empty(1024, 1024, device="xirang")
    assert torch.xirang.memory_allocated() >= base + 4 * 1024 * 1024
    assert torch.xirang.max_memory_allocated() >= torch.xirang.memory_allocated()
    stats = torch.xirang.memory_stats()
    assert stats["alloc_count"] >= 1 and "reserved_bytes" in stats
    del x
    assert torch.xirang.memory_allocated() == base
    torch.xirang.empty_cache()
    torch.xirang.reset_peak_memory_stats()
    assert torch.xirang.max_memory_allocated() == torch.xirang.memory_allocated()


def test_visible_devices():
    code = "import torch, xirang; print(torch.xirang.device_count())"
    assert run(code).stdout.strip() == "3"
    assert run(code, XIRANG_VISIBLE_DEVICES="1").stdout.strip() == "1"
    assert run(code, XIRANG_VISIBLE_DEVICES="2,0").stdout.strip() == "2"
    # CUDA_VISIBLE_DEVICES rules: the list is cut at the first invalid or repeated entry
    assert run(code, XIRANG_VISIBLE_DEVICES="0,99,1").stdout.strip() == "1"
    assert run(code, XIRANG_VISIBLE_DEVICES="1,1,0").stdout.strip() == "1"
    # the order is PyTorch's: xirang:0 is the listed device (physical 7 is runtime device 2)
    order = ("import torch, xirang; x = torch.full((2,), 3.0, device='xirang:0'); "
             "print(torch.xirang.device_count(), x.cpu().tolist())")
    assert run(order, XIRANG_VISIBLE_DEVICES="2,0").stdout.strip() == "2 [3.0, 3.0]"
    assert run(code, XIRANG_VISIBLE_DEVICES="").stdout.strip() == "0"
    r = run("import torch, xirang; print(torch.xirang.is_available())", XIRANG_VISIBLE_DEVICES="")
    assert r.stdout.strip() == "False"
    # an out-of-memory error names the device as PyTorch does, then the runtime's number of it
    oom = ("import torch, xirang\ntry: torch.empty(1 << 45, dtype=torch.uint8, device='xirang:0')\n"
           "except torch.OutOfMemoryError as e: print(str(e).splitlines()[0])")
    line = run(oom, XIRANG_VISIBLE_DEVICES="2,0").stdout
    assert line.startswith("out of memory on xirang:0 (runtime device 2): tried to allocate 35184372088832 bytes"), line


def test_version_pinning():
    r = run("import torch; torch.__version__ = '2.14.0'; import xirang")
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "2.14.0" in r.stderr and torch.__version__.split("+")[0] in r.stderr
    assert "pip install" in r.stderr
