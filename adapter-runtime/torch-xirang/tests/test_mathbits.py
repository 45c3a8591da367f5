"""Faults the all-of-OpInfo sweep (test_opinfo.py) found, each checked the way a user meets it.

- PyTorch's conjugate and negative bits (`x.conj()`, `x.conj().imag`): `clone` of a conjugate view
  recursed until the process crashed, a matrix product read the memory unconjugated, and a copy into
  a conjugate view wrote nothing (csrc/mathbits.cpp).
- complex <-> real: `x.float()` of a complex tensor cast its raw bytes; `view_as_real` was a copy, so
  `make_tensor` of a complex dtype on the device left it uninitialised.
- `1 - x` (rsub with the 1 as a 0-dim CPU tensor) through the CPU fallback returned a CPU tensor.
- a [1, n] view with column stride 3 was read by mm as transposed-contiguous.
"""

import warnings

import pytest
import torch

import xirang  # noqa: F401

COMPLEX = [torch.complex64, torch.complex128]


@pytest.mark.parametrize("dtype", COMPLEX)
def test_conjugate_views_behave_as_on_cpu(dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=dtype)
    c = x.to("xirang").conj()
    assert c.is_conj()
    torch.testing.assert_close(c.cpu(), x.conj())
    torch.testing.assert_close(c.clone().cpu(), x.conj())
    assert c.t().is_conj()
    torch.testing.assert_close(c.t().cpu(), x.conj().t())
    torch.testing.assert_close(torch.mm(c, c.t()).cpu(), x.conj() @ x.conj().t())
    torch.testing.assert_close(c.imag.cpu(), x.conj().imag)
    torch.testing.assert_close(c.resolve_conj().cpu(), x.conj())


@pytest.mark.parametrize("dtype", COMPLEX)
def test_writes_into_conjugate_views_land(dtype):
    x = torch.randn(3, 4, dtype=dtype)
    z = torch.zeros(3, 4, dtype=dtype, device="xirang")
    z.conj().copy_(x.to("xirang"))
    torch.testing.assert_close(z.cpu(), x.conj())
    w = x.to("xirang")
    w.conj().add_(1)
    torch.testing.assert_close(w.cpu(), (x.conj() + 1).conj())


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_to_real_and_real_views(dtype):
    x = torch.randn(5, dtype=dtype)
    with warnings.catch_warnings():  # "Casting complex values to real discards the imaginary part"
        warnings.simplefilter("ignore")
        torch.testing.assert_close(x.to("xirang").float().cpu(), x.real.float())
    z = torch.zeros(3, dtype=dtype, device="xirang")
    torch.view_as_real(z).fill_(1.5)
    torch.testing.assert_close(z.cpu(), torch.full((3,), 1.5 + 1.5j, dtype=dtype))
    b = torch.tensor([True, False])
    torch.testing.assert_close(b.to("xirang").to(dtype).cpu(), b.to(dtype))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int32])
def test_a_python_number_minus_a_tensor_stays_on_the_device(dtype):
    t = torch.ones(5, dtype=dtype, device="xirang")
    assert (1 - t).device.type == "xirang"
    assert torch.rsub(t, 2).device.type == "xirang"


def test_mm_of_a_strided_row():
    torch.manual_seed(0)
    base = torch.randn(5, 3, dtype=torch.float64)
    b = torch.randn(5, 5, dtype=torch.float64)
    want = torch.mm(base.t()[1:2], b)
    got = torch.mm(base.to("xirang").t()[1:2], b.to("xirang")).cpu()
    torch.testing.assert_close(got, want)
