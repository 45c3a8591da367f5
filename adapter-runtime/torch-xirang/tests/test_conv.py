"""Convolutions on device `xirang`: PyTorch sends them to convolution_overrideable and
convolution_backward_overrideable, which run as the runtime's native device kernels
(adapter-runtime/src/kernels/conv.rs). Judged against PyTorch's CPU convolution, forward and
backward, for 1-, 2- and 3-d, groups, stride, padding, dilation, padding modes and transposed."""

import pytest
import torch
import torch.nn as nn

import xirang

LAYERS = {
    "conv1d": lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2),
    "conv2d": lambda: nn.Conv2d(3, 4, 3, padding=1),
    "conv2d_groups_stride": lambda: nn.Conv2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), groups=4),
    "conv2d_same_reflect": lambda: nn.Conv2d(3, 5, 3, padding="same", padding_mode="reflect"),
    "conv2d_circular": lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular", bias=False),
    "conv3d": lambda: nn.Conv3d(2, 3, (2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
    "conv_transpose1d": lambda: nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2),
    "conv_transpose2d": lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1),
    "conv_transpose3d": lambda: nn.ConvTranspose3d(2, 2, 2, stride=2, dilation=1),
}
INPUTS = {"1d": (2, 4, 11), "2d": (2, 3, 8, 7), "3d": (1, 2, 5, 6, 4)}


def _input_shape(name, layer):
    dims = 3 if "3d" in name else 1 if "1d" in name else 2
    shape = list(INPUTS[f"{dims}d"])
    shape[1] = layer.in_channels
    return shape


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_forward_and_backward_match_cpu_natively(name, dtype):
    torch.manual_seed(0)
    layer = LAYERS[name]().to(dtype)
    x = torch.randn(_input_shape(name, layer), dtype=dtype, requires_grad=True)
    ref = layer(x)
    (ref * torch.linspace(-1, 1, ref.numel(), dtype=dtype).reshape(ref.shape)).sum().backward()
    ref_grads = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
    x.grad = None
    for p in layer.parameters():
        p.grad = None
    on = layer.to("xirang")
    xd = x.detach().to("xirang").requires_grad_()
    xirang.reset_fallback_counts()
    out = on(xd)
    assert out.device.type == "xirang"
    weights = torch.linspace(-1, 1, out.numel(), dtype=dtype).reshape(out.shape).to("xirang")
    (out * weights).sum().backward()
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out.cpu(), ref.detach(), **tol)
    grads = [xd.grad] + [p.grad for p in on.parameters()]
    for g, r in zip(grads, ref_grads):
        assert g.device.type == "xirang"
        torch.testing.assert_close(g.cpu(), r, **(dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else tol))
    counts = xirang.fallback_counts()
    for op in ("convolution_overrideable", "convolution_backward_overrideable"):
        assert counts.get(op, {}).get("native", 0) >= 1, (op, counts.get(op))
        assert counts.get(op, {}).get("fallback", 0) == 0, (op, counts.get(op))


def test_conv_runs_natively_under_error_mode():
    # no fallback to refuse: the device kernel serves it
    xirang.set_fallback_mode("error")
    x = torch.randn(1, 3, 8, 8)
    w = torch.randn(4, 3, 3, 3)
    out = torch.nn.functional.conv2d(x.to("xirang"), w.to("xirang"), stride=2)
    torch.testing.assert_close(out.cpu(), torch.nn.functional.conv2d(x, w, stride=2), rtol=1e-5, atol=1e-5)


def test_conv_argument_errors_are_pytorchs():
    x = torch.randn(1, 5, 8, 8).to("xirang")
    w = torch.randn(4, 3, 3, 3).to("xirang")
    with pytest.raises(RuntimeError, match="expected input.* to have 3 channels"):
        torch.nn.functional.conv2d(x, w)
