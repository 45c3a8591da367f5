"""Convolutions on device `xirang`: PyTorch sends them to convolution_overrideable and
convolution_backward_overrideable, which the shim runs as counted CPU fallbacks."""

import pytest
import torch
import torch.nn as nn

import xirang


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_forward_and_backward_match_cpu(transposed):
    torch.manual_seed(0)
    layer = (nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1) if transposed else nn.Conv2d(3, 4, 3, padding=1, groups=1))
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    dev = layer.to("cpu")
    ref = dev(x)
    ref.sum().backward()
    ref_grads = [x.grad.clone()] + [p.grad.clone() for p in dev.parameters()]
    x.grad = None
    for p in dev.parameters():
        p.grad = None
    on = dev.to("xirang")
    xd = x.detach().to("xirang").requires_grad_()
    out = on(xd)
    assert out.device.type == "xirang"
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    grads = [xd.grad] + [p.grad for p in on.parameters()]
    for g, r in zip(grads, ref_grads):
        assert g.device.type == "xirang"
        torch.testing.assert_close(g.cpu(), r, rtol=1e-4, atol=1e-4)
    counts = xirang.fallback_counts()
    assert counts.get("convolution_overrideable", {}).get("fallback", 0) >= 1, counts
    assert counts.get("convolution_backward_overrideable", {}).get("fallback", 0) >= 1, counts


def test_conv_fallback_obeys_error_mode():
    xirang.set_fallback_mode("error")
    x = torch.randn(1, 3, 8, 8).to("xirang")
    w = torch.randn(4, 3, 3, 3).to("xirang")
    with pytest.raises(RuntimeError, match="convolution_overrideable"):
        torch.nn.functional.conv2d(x, w)
