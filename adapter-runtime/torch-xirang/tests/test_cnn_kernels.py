"""The native kernels a CNN step needs besides convolution, on device `xirang` against PyTorch's CPU
kernels: batch norm (`native_batch_norm` and its backward; training with and without running
statistics, evaluation, affine or not; adapter-runtime/src/kernels/norm.rs), max pooling
(`max_pool2d_with_indices` and its backward: stride, padding, dilation, ceil_mode, 3-d and 4-d
inputs, NaN; kernels/pool.rs), and MobileNetV3's and attention's small operators (hardswish,
hardsigmoid, isneginf, all.dim, pow with a scalar exponent). Each case also checks that the
operator ran on the native tier, so a kernel that silently declines fails here."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xirang


def _native(op):
    c = xirang.fallback_counts().get(op, {})
    return c.get("native", 0) > 0 and c.get("fallback", 0) == 0


def _tol(dtype):
    return {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-10, "rtol": 1e-10}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["train", "train_no_stats", "eval", "no_affine", "1d"])
def test_batch_norm_forward_backward_and_running_stats_match_cpu(case, dtype):
    torch.manual_seed(0)
    if case == "1d":
        layer, shape = nn.BatchNorm1d(5), (4, 5, 7)
    else:
        layer = nn.BatchNorm2d(5, affine=case != "no_affine", track_running_stats=case != "train_no_stats")
        shape = (3, 5, 4, 6)
    layer = layer.to(dtype)
    if layer.affine:
        nn.init.normal_(layer.weight)
        nn.init.normal_(layer.bias)
    if case == "eval":
        layer.running_mean.normal_()
        layer.running_var.uniform_(0.5, 2.0)
        layer.eval()
    dev = copy.deepcopy(layer).to("xirang")
    x = torch.randn(shape, dtype=dtype) * 3 + 1
    g = torch.randn(shape, dtype=dtype)
    xc = x.clone().requires_grad_()
    yc = layer(xc)
    yc.backward(g)
    xd = x.to("xirang").requires_grad_()
    xirang.reset_fallback_counts()
    yd = dev(xd)
    yd.backward(g.to("xirang"))
    assert _native("native_batch_norm"), xirang.fallback_counts()
    assert _native("native_batch_norm_backward"), xirang.fallback_counts()
    torch.testing.assert_close(yd.cpu(), yc, **_tol(dtype))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **_tol(dtype))
    for (n, pc), pd in zip(layer.named_parameters(), dev.parameters()):
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, **_tol(dtype), msg=n)
    for (n, bc), bd in zip(layer.named_buffers(), dev.buffers()):
        torch.testing.assert_close(bd.cpu(), bc, **_tol(dtype), msg=n)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["train", "eval"])
def test_batch_norm_of_a_half_input_with_float32_parameters_matches_cpu(case, dtype):
    """What autocast leaves batch norm: a float16/bfloat16 activation with the layer's float32
    weights and statistics. CPU returns the output and the input's gradient in the input's dtype,
    the parameters' gradients and the statistics in float32; the device kernel must too (natively)."""
    torch.manual_seed(2)
    layer = nn.BatchNorm2d(4)
    nn.init.normal_(layer.weight)
    nn.init.normal_(layer.bias)
    if case == "eval":
        layer.running_mean.normal_()
        layer.running_var.uniform_(0.5, 2.0)
        layer.eval()
    dev = copy.deepcopy(layer).to("xirang")
    x = (torch.randn(3, 4, 5, 6) * 2 + 1).to(dtype)
    g = torch.randn(3, 4, 5, 6).to(dtype)
    xc = x.clone().requires_grad_()
    yc = layer(xc)
    yc.backward(g)
    xd = x.to("xirang").requires_grad_()
    xirang.reset_fallback_counts()
    yd = dev(xd)
    yd.backward(g.to("xirang"))
    assert _native("native_batch_norm"), xirang.fallback_counts()
    assert _native("native_batch_norm_backward"), xirang.fallback_counts()
    assert yd.dtype == yc.dtype == dtype and xd.grad.dtype == dtype
    # one rounding to the half dtype apart at most (CPU accumulates in float32, the device in float64)
    tol = {"atol": 2e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {"atol": 2e-3, "rtol": 2e-3}
    torch.testing.assert_close(yd.cpu(), yc, **tol)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    for (n, pc), pd in zip(layer.named_parameters(), dev.parameters()):
        assert pd.grad.dtype == pc.grad.dtype == torch.float32, n
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, atol=1e-3, rtol=1e-3, msg=n)
    for (n, bc), bd in zip(layer.named_buffers(), dev.buffers()):
        assert bd.dtype == bc.dtype, n
        torch.testing.assert_close(bd.cpu(), bc, atol=1e-5, rtol=1e-5, msg=n)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "add_"])
@pytest.mark.parametrize("pair", [(torch.bfloat16, torch.float32), (torch.float32, torch.float16),
                                  (torch.float16, torch.bfloat16), (torch.float64, torch.float32)])
def test_binary_operators_of_mixed_float_dtypes_promote_natively(op, pair):
    """Autocast mixes a half activation with a float32 residual or bias: PyTorch promotes to the
    result type (exactly: it casts on load), and the device kernels serve the mix instead of the
    fallback. A zero-dim operand does not raise the result type; one wider than the result keeps its
    precision in CPU's kernels, so it takes the fallback (values checked all the same)."""
    torch.manual_seed(3)
    a = torch.randn(4, 5).to(pair[0])
    b = (torch.rand(4, 5) + 0.5).to(pair[1])
    s = torch.tensor(1.7, dtype=pair[1])
    f = (lambda x, y: x.clone().add_(y)) if op == "add_" else getattr(torch, op)
    name = {"add_": "add_.Tensor", "maximum": "maximum", "minimum": "minimum"}.get(op, f"{op}.Tensor")
    for x, y in ((a, b), (b, a), (a, s)):
        xirang.reset_fallback_counts()
        want = f(x, y)
        got = f(x.to("xirang"), y.to("xirang"))
        assert got.dtype == want.dtype, (x.dtype, y.dtype)
        torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)
        # a zero-dim operand wider than the result keeps its precision on CPU: that one falls back
        if y.dim() or torch.promote_types(y.dtype, x.dtype) == x.dtype:
            assert _native(name), (x.dtype, y.dtype, xirang.fallback_counts())


MAXPOOL = {
    "k2": dict(kernel_size=2),
    "k3s2p1": dict(kernel_size=3, stride=2, padding=1),
    "dilated_ceil": dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
    "ceil_edge": dict(kernel_size=3, stride=2, ceil_mode=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(MAXPOOL))
@pytest.mark.parametrize("batched", [True, False])
def test_max_pool2d_values_indices_and_gradient_match_cpu(name, batched, dtype):
    torch.manual_seed(1)
    shape = (2, 3, 7, 8) if batched else (3, 7, 8)
    x = torch.randn(shape, dtype=dtype)
    x.view(-1)[5] = float("nan")
    args = MAXPOOL[name]
    vc, ic = F.max_pool2d(x, return_indices=True, **args)
    xirang.reset_fallback_counts()
    vd, idx = F.max_pool2d(x.to("xirang"), return_indices=True, **args)
    assert _native("max_pool2d_with_indices"), xirang.fallback_counts()
    torch.testing.assert_close(vd.cpu(), vc, equal_nan=True)
    assert torch.equal(idx.cpu(), ic)
    xn = torch.randn(shape, dtype=dtype)  # no NaN: compare gradients
    xc = xn.clone().requires_grad_()
    yc = F.max_pool2d(xc, **args)
    g = torch.randn(yc.shape, dtype=dtype)
    yc.backward(g)
    xd = xn.to("xirang").requires_grad_()
    xirang.reset_fallback_counts()
    F.max_pool2d(xd, **args).backward(g.to("xirang"))
    assert _native("max_pool2d_with_indices_backward"), xirang.fallback_counts()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_max_pool2d_rejects_what_cpu_rejects():
    x = torch.randn(1, 2, 5, 5, device="xirang")
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool2d(x, kernel_size=2, padding=2)
    with pytest.raises(RuntimeError, match="too small"):
        F.max_pool2d(x, kernel_size=7)


SMALL = {
    "hardswish": (lambda t: F.hardswish(t), "hardswish"),
    "hardswish_": (lambda t: F.hardswish(t.clone(), inplace=True), "hardswish_"),
    "hardsigmoid": (lambda t: F.hardsigmoid(t), "hardsigmoid"),
    "isneginf": (lambda t: torch.isneginf(t), "isneginf"),
    "all.dim": (lambda t: (t > -2).all(dim=1), "all.dim"),
    "pow3": (lambda t: torch.pow(t, 3.0), "pow.Tensor_Scalar"),
    "pow2.5": (lambda t: t.abs() ** 2.5, "pow.Tensor_Scalar"),
    "rsqrt_pow": (lambda t: (t.abs() + 1) ** -0.5, "pow.Tensor_Scalar"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_operators_match_cpu_natively(name, dtype):
    torch.manual_seed(2)
    x = (torch.randn(4, 9) * 4).to(dtype)
    x[0, 0], x[1, 1], x[2, 2] = float("-inf"), float("inf"), float("nan")
    f, op = SMALL[name]
    ref = f(x)
    xirang.reset_fallback_counts()
    out = f(x.to("xirang"))
    assert _native(op), xirang.fallback_counts()
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True)


def test_mobilenet_block_backward_through_hardswish():
    torch.manual_seed(3)
    x = torch.randn(3, 7, dtype=torch.float64) * 4
    xc = x.clone().requires_grad_()
    (F.hardswish(xc) * F.hardsigmoid(xc)).sum().backward()
    xd = x.to("xirang").requires_grad_()
    (F.hardswish(xd) * F.hardsigmoid(xd)).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
