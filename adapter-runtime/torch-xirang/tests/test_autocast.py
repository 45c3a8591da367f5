"""Autocast on device `xirang`: `torch.autocast("xirang", dtype=...)` casts through the generated
AutocastPrivateUse1 registrations (generated/autocast.cpp, from the autocast lists of PyTorch's
ATen/autocast_mode.h), and gives the output dtypes CPU autocast gives for the operators both cast."""

import pytest
import torch
import torch.nn.functional as F

import xirang  # noqa: F401


def _pair(shape_a, shape_b, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape_a, generator=g), torch.randn(*shape_b, generator=g)


# operators in CPU autocast's lower-precision list and in AT_FORALL_LOWER_PRECISION_FP
LOWER = {
    "mm": (lambda a, b: torch.mm(a, b), (8, 8), (8, 8)),
    "matmul": (lambda a, b: torch.matmul(a, b), (4, 8), (8, 3)),
    "bmm": (lambda a, b: torch.bmm(a, b), (2, 4, 8), (2, 8, 3)),
    "linear": (lambda a, b: F.linear(a, b), (4, 8), (5, 8)),
    "addmm": (lambda a, b: torch.addmm(torch.zeros(4, 4, device=a.device), a, b), (4, 8), (8, 4)),
    "baddbmm": (lambda a, b: torch.baddbmm(torch.zeros(2, 4, 4, device=a.device), a, b), (2, 4, 8), (2, 8, 4)),
    "conv2d": (lambda a, b: F.conv2d(a, b), (1, 3, 8, 8), (4, 3, 3, 3)),
}

# operators in CPU autocast's fp32 list and in AT_FORALL_FP32 (bf16 inputs run in float32)
FP32 = {
    "mse_loss": (lambda a, b: F.mse_loss(a, b), (4, 8), (4, 8)),
    "l1_loss": (lambda a, b: F.l1_loss(a, b), (4, 8), (4, 8)),
    "smooth_l1_loss": (lambda a, b: F.smooth_l1_loss(a, b), (4, 8), (4, 8)),
    "binary_cross_entropy_with_logits": (lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()), (4, 8), (4, 8)),
}


@pytest.mark.parametrize("name", sorted(LOWER))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lower_precision_like_cpu(name, dtype):
    fn, sa, sb = LOWER[name]
    a, b = _pair(sa, sb)
    with torch.autocast("cpu", dtype=dtype):
        ref = fn(a, b)
    with torch.autocast("xirang", dtype=dtype):
        out = fn(a.to("xirang"), b.to("xirang"))
    assert ref.dtype == dtype
    assert out.dtype == ref.dtype, name
    assert out.device.type == "xirang"
    torch.testing.assert_close(out.cpu().float(), ref.float(), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("name", sorted(FP32))
def test_fp32_like_cpu(name):
    fn, sa, sb = FP32[name]
    a, b = _pair(sa, sb)
    a, b = a.bfloat16(), b.bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = fn(a, b)
    with torch.autocast("xirang", dtype=torch.bfloat16):
        out = fn(a.to("xirang"), b.to("xirang"))
    assert ref.dtype == torch.float32
    assert out.dtype == ref.dtype, name
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)


def test_promote_list_widens_mixed_inputs():
    # `dot` is on the promote list: mixed bf16 / f32 inputs run in f32 instead of failing
    a, b = _pair((8,), (8,))
    x, y = a.bfloat16().to("xirang"), b.to("xirang")
    with pytest.raises(RuntimeError):
        torch.dot(x, y)
    with torch.autocast("xirang", dtype=torch.bfloat16):
        out = torch.dot(x, y)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), torch.dot(a.bfloat16().float(), b), rtol=1e-4, atol=1e-4)


def test_outside_autocast_and_unlisted_ops_keep_their_dtype():
    a, b = _pair((8, 8), (8, 8))
    x, y = a.to("xirang"), b.to("xirang")
    assert torch.mm(x, y).dtype == torch.float32
    with torch.autocast("xirang", dtype=torch.bfloat16):
        assert torch.relu(x).dtype == torch.float32  # not on any list: falls through
        assert torch.mm(x, y).dtype == torch.bfloat16
        # disabled inside: as written
        with torch.autocast("xirang", enabled=False):
            assert torch.mm(x, y).dtype == torch.float32
    assert torch.amp.is_autocast_available("xirang")


def test_autocast_backward_runs_on_the_device():
    a, b = _pair((4, 8), (8, 3))
    x = a.to("xirang").requires_grad_()
    w = b.to("xirang").requires_grad_()
    with torch.autocast("xirang", dtype=torch.bfloat16):
        loss = torch.mm(x, w).float().pow(2).sum()
    loss.backward()
    assert x.grad.dtype == torch.float32 and x.grad.device.type == "xirang"
    xc, wc = a.clone().requires_grad_(), b.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lc = torch.mm(xc, wc).float().pow(2).sum()
    lc.backward()
    torch.testing.assert_close(x.grad.cpu(), xc.grad, rtol=5e-2, atol=5e-2)
