"""Non-contiguous, zero-dim and empty inputs, views, in-place, out=, and bad input: PyTorch's error
types, never a crash or a hang."""

import pytest
import torch

import xirang


def same(fn, *cpu_args):
    dev = [a.to("xirang") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    torch.testing.assert_close(fn(*dev).cpu(), fn(*cpu_args))


def test_factories_and_fills_run_on_the_device():
    # torch.zeros / zeros_like call zero_, torch.ones / full call fill_: the shim's kernels, never
    # PyTorch's CPU kernels through the fallback; a strided view is filled through its strides
    xirang.reset_fallback_counts()
    z = torch.zeros(3, 4, device="xirang")
    o = torch.ones(2, 3, device="xirang", dtype=torch.int64)
    f = torch.full((2, 2), 7.5, device="xirang")
    zl = torch.zeros_like(f)
    base = torch.ones(4, 5, device="xirang")
    base.t()[1:, ::2].zero_()
    want = torch.ones(4, 5)
    want.t()[1:, ::2].zero_()
    assert z.cpu().eq(0).all() and o.cpu().eq(1).all() and f.cpu().eq(7.5).all() and zl.cpu().eq(0).all()
    torch.testing.assert_close(base.cpu(), want)
    fell_back = {k for k, v in xirang.fallback_counts().items() if v["fallback"]}
    assert not fell_back & {"zero_", "fill_.Scalar", "fill_.Tensor"}, fell_back


def test_non_contiguous():
    c = torch.randn(6, 8)
    same(lambda t: t.t() * 3, c)
    same(lambda t: t[:, ::2] + t[:, 1::2], c)
    same(lambda t: torch.relu(t.transpose(0, 1)), c)
    same(lambda t: t.t().contiguous(), c)


def test_zero_dim_and_empty():
    same(lambda t: t + 1, torch.tensor(2.5))
    same(lambda t: t * t, torch.tensor(-3.0))
    same(lambda t: t + t, torch.empty(0, 4))
    same(lambda t: t.sum(), torch.empty(0))
    d = torch.randn(4, device="xirang")
    torch.testing.assert_close((d + torch.tensor(1.0)).cpu(), d.cpu() + 1)  # a CPU zero-dim operand


def test_views_alias_device_memory():
    d = torch.zeros(3, 4, device="xirang")
    v = d[1]
    v.add_(5)
    assert d.cpu()[1].tolist() == [5.0] * 4
    w = d.view(12)
    w[0] = 7
    assert d[0, 0].item() == 7.0
    r = d.reshape(4, 3)
    assert r.data_ptr() == d.data_ptr()


def test_in_place_and_out():
    c = torch.randn(5)
    d = c.to("xirang")
    d.mul_(2).add_(1)
    torch.testing.assert_close(d.cpu(), c * 2 + 1)
    out = torch.empty(5, device="xirang")
    torch.add(d, d, out=out)
    torch.testing.assert_close(out.cpu(), (c * 2 + 1) * 2)
    small = torch.empty(0, device="xirang")
    torch.mul(d, 3, out=small)  # resized as PyTorch does
    assert small.shape == (5,)


def test_resize_and_set():
    d = torch.arange(4.0).to("xirang")
    d.resize_(8)
    assert d.shape == (8,)
    assert d[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    e = torch.empty(0, device="xirang")
    e.set_(d)
    assert e.data_ptr() == d.data_ptr() and e.shape == (8,)


def test_mixed_devices_are_errors():
    a = torch.randn(3, device="xirang")
    with pytest.raises(RuntimeError):
        a + torch.randn(3)
    with pytest.raises(RuntimeError):
        torch.mm(torch.randn(2, 2, device="xirang"), torch.randn(2, 2))


def test_out_of_device_memory():
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 45, dtype=torch.uint8, device="xirang")
    # the device still works afterwards
    assert torch.ones(2, device="xirang").sum().item() == 2.0


def test_shape_errors_keep_pytorchs_types():
    a = torch.randn(2, 3, device="xirang")
    with pytest.raises(RuntimeError):
        a + torch.randn(4, 5, device="xirang")
    with pytest.raises(IndexError):
        a[5]
    with pytest.raises(RuntimeError):
        a.view(7)


def test_dtypes():
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool):
        c = (torch.arange(6) % 3).to(dt)
        d = c.to("xirang")
        assert d.dtype == dt
        torch.testing.assert_close(d.cpu(), c)
    same(lambda t: t.to(torch.float16) * 2, torch.randn(4))
