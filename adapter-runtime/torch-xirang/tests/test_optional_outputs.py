"""Operators whose results may be undefined tensors: every operator of PyTorch's registry that takes
a `bool[N] output_mask`, called over every mask combination on `xirang` and on the CPU, plus the ones
that return an undefined tensor for other reasons (`has_bias=False`, `_embedding_bag`). An undefined
result must cross the bridge as an undefined tensor (None in Python), never as a failure or a tensor.
Then the programs that reach them: a pre-norm transformer layer training, modules whose input needs no
gradient."""

import copy
import itertools

import pytest
import torch
import torch.nn.functional as F

import xirang  # noqa: F401

# device- or layout-specific forms: their kernels exist only for cuDNN, MIOpen, MPS, oneDNN or sparse
# tensors, and PyTorch's CPU has none to compare with
SPECIFIC = ("cudnn", "miopen", "mps", "mkldnn", "sparse", "overrideable")
# kernels only for nested tensors (NestedTensorCPU/CUDA): a strided tensor never reaches them
NESTED_ONLY = ("linear_backward",)


def mask_ops():
    names = set()
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::") or any(k in s.name for k in SPECIFIC) or s.name[6:] in NESTED_ONLY:
            continue
        if any(a.name == "output_mask" for a in s.arguments) and not s.overload_name.endswith("out"):
            names.add(s.name[len("aten::"):] + ("." + s.overload_name if s.overload_name else ""))
    return sorted(names)


def g(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype)


def layer_norm(mask):
    x, w, b = g(3, 4, 5), g(5), g(5)
    _, mean, rstd = torch.native_layer_norm(x, [5], w, b, 1e-5)
    return torch.ops.aten.native_layer_norm_backward, (g(3, 4, 5), x, [5], mean, rstd, w, b, mask)


def batch_norm(mask):
    x, w = g(4, 3, 2, 2), g(3)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _, sm, si = torch.native_batch_norm(x, w, None, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    return torch.ops.aten.native_batch_norm_backward, (g(4, 3, 2, 2), x, w, rm, rv, sm, si, True, 1e-5, mask)


def batch_norm_update(mask):
    x, w = g(4, 3, 2, 2), g(3)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _, sm, sv, reserve = torch.ops.aten._batch_norm_with_update(x, w, None, rm.clone(), rv.clone(), 0.1, 1e-5)
    return torch.ops.aten.batch_norm_backward, (g(4, 3, 2, 2), x, w, rm, rv, sm, sv, True, 1e-5, mask, reserve)


def batch_norm_index(mask):
    x, w = g(4, 3, 2, 2), g(3)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _, sm, si = torch.native_batch_norm(x, w, None, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    reserve = torch.empty(0, dtype=torch.uint8)
    return torch.ops.aten._batch_norm_impl_index_backward, (
        0, x, g(4, 3, 2, 2), w, rm, rv, sm, si, True, 1e-5, mask, reserve)


def group_norm(mask):
    x, w = g(2, 6, 3, 3), g(6)
    _, mean, rstd = torch.native_group_norm(x, w, None, 2, 6, 9, 3, 1e-5)
    return torch.ops.aten.native_group_norm_backward, (g(2, 6, 3, 3), x, mean, rstd, w, 2, 6, 9, 3, mask)


def rms_norm(mask):
    x, w = g(3, 4, 5), g(5)
    _, rstd = torch.ops.aten._fused_rms_norm(x, [5], w, 1e-6)
    return torch.ops.aten._fused_rms_norm_backward, (g(3, 4, 5), x, [5], rstd, w, mask)


def rms_reference(args):
    """PyTorch has `_fused_rms_norm_backward` only for accelerators: the CPU's reference is autograd
    through its composite `rms_norm`."""
    grad, x, shape, _, w, mask = args
    x, w = x.clone().requires_grad_(mask[0]), w.clone().requires_grad_(mask[1])
    out = torch.ops.aten._fused_rms_norm(x, shape, w, 1e-6)[0]
    want = [t for t, m in zip((x, w), mask) if m]
    got = iter(torch.autograd.grad(out, want, grad) if want else ())
    return tuple(next(got) if m else None for m in mask)


REFERENCES = {"rms": rms_reference}


def conv(mask):
    x, w = g(2, 3, 6, 6), g(4, 3, 3, 3)
    return torch.ops.aten.convolution_backward, (
        g(2, 4, 4, 4), x, w, [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)


def conv_double(mask):
    x, w = g(2, 3, 6, 6), g(4, 3, 3, 3)
    return torch.ops.aten._convolution_double_backward, (
        g(2, 3, 6, 6), g(4, 3, 3, 3), g(4), g(2, 4, 4, 4), w, x, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)


def slow_conv(mask):
    x, w = g(2, 3, 6, 6), g(4, 3, 3, 3)
    return torch.ops.aten._slow_conv2d_backward.output_mask, (
        g(2, 4, 4, 4), x, w, [3, 3], [1, 1], [0, 0], mask)


def linear(mask):
    return torch.ops.aten.linear_backward, (g(3, 5), g(3, 4), g(4, 5), mask)


def grid2d(mask):
    x, grid = g(2, 3, 4, 4), torch.rand(2, 3, 3, 2, dtype=torch.float64) * 2 - 1
    return torch.ops.aten.grid_sampler_2d_backward, (g(2, 3, 3, 3), x, grid, 0, 0, False, mask)


def grid3d(mask):
    x, grid = g(1, 2, 3, 3, 3), torch.rand(1, 2, 2, 2, 3, dtype=torch.float64) * 2 - 1
    return torch.ops.aten.grid_sampler_3d_backward, (g(1, 2, 2, 2, 2), x, grid, 0, 0, False, mask)


CASES = {
    "native_layer_norm_backward": (layer_norm, 3),
    "native_batch_norm_backward": (batch_norm, 3),
    "batch_norm_backward": (batch_norm_update, 3),
    "_batch_norm_impl_index_backward": (batch_norm_index, 3),
    "native_group_norm_backward": (group_norm, 3),
    "_fused_rms_norm_backward": (rms_norm, 2, "rms"),
    "convolution_backward": (conv, 3),
    "_convolution_double_backward": (conv_double, 3),
    "_slow_conv2d_backward.output_mask": (slow_conv, 3),
    "grid_sampler_2d_backward": (grid2d, 2),
    "grid_sampler_3d_backward": (grid3d, 2),
}


def to_dev(v):
    if isinstance(v, torch.Tensor):
        return v.to("xirang")
    return v


def same(cpu, dev, what):
    cpu = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
    dev = dev if isinstance(dev, (tuple, list)) else (dev,)
    assert len(cpu) == len(dev), what
    for i, (c, d) in enumerate(zip(cpu, dev)):
        if c is None:
            assert d is None, f"{what}: result {i} is undefined on the CPU, a tensor on xirang"
            continue
        assert d is not None, f"{what}: result {i} is a tensor on the CPU, undefined on xirang"
        assert d.device.type == "xirang", f"{what}: result {i} on {d.device}"
        torch.testing.assert_close(d.cpu(), c, msg=f"{what}: result {i}")


def test_every_output_mask_operator_has_a_case():
    """The registry is the list: an operator PyTorch adds with an output mask fails here until it has
    a case below."""
    assert sorted(CASES) == mask_ops()


def test_accelerator_only_operators_run():
    """Operators PyTorch has only CUDA/XPU kernels for, served by the adapter's host tier."""
    torch.manual_seed(0)
    a, b = torch.randn(3, 4, dtype=torch.bfloat16), torch.randn(4, 5, dtype=torch.bfloat16)
    got = torch.mm(a.to("xirang"), b.to("xirang"), out_dtype=torch.float32)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), a.float() @ b.float())
    x, w = torch.randn(2, 3, 6, 6), torch.randn(3, 1, 3, 3)
    got = torch.ops.aten._conv_depthwise2d(x.to("xirang"), w.to("xirang"), [3, 3], None, [1, 1], [1, 1], [1, 1])
    torch.testing.assert_close(got.cpu(), F.conv2d(x, w, None, 1, 1, 1, 3))
    m = torch.rand(4, 4) > 0.5
    got = torch.ops.aten._masked_scale(x[0, 0, :4, :4].to("xirang"), m.to("xirang"), 2.0)
    torch.testing.assert_close(got.cpu(), x[0, 0, :4, :4] * m * 2.0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_mask_combination_matches_cpu(name):
    build, n, *ref = CASES[name]
    for mask in itertools.product([False, True], repeat=n):
        torch.manual_seed(0)
        op, args = build(list(mask))
        cpu = REFERENCES[ref[0]](args) if ref else op(*args)
        dev = op(*[to_dev(a) for a in args])
        same(cpu, dev, f"{name} {list(mask)}")


@pytest.mark.parametrize("has_bias", [False, True])
def test_fused_cell_backwards_return_undefined_bias_gradients(has_bias):
    torch.manual_seed(0)
    ig, hg, cx = g(2, 12), g(2, 12), g(2, 3)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(ig.to("xirang"), hg.to("xirang"), cx.to("xirang"))
    out = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
        g(2, 3).to("xirang"), None, cx.to("xirang"), cy, ws, has_bias)
    assert (out[2] is not None) == has_bias
    both_undefined = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(None, None, cx.to("xirang"), cy, ws, has_bias)
    assert all(t is None for t in both_undefined)
    gi, gh, hx = g(2, 9), g(2, 9), g(2, 3)
    _, ws = torch.ops.aten._thnn_fused_gru_cell(gi.to("xirang"), gh.to("xirang"), hx.to("xirang"))
    out = torch.ops.aten._thnn_fused_gru_cell_backward(g(2, 3).to("xirang"), ws, has_bias)
    assert [t is not None for t in out] == [True, True, True, has_bias, has_bias]


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_bag_matches_cpu(mode, weighted):
    if weighted and mode != 0:
        pytest.skip("per-sample weights are only for mode sum")
    torch.manual_seed(0)
    w = g(10, 4)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    off = torch.tensor([0, 4])
    psw = g(8) if weighted else None
    cpu = torch.ops.aten._embedding_bag(w, idx, off, False, mode, False, psw)
    dev = torch.ops.aten._embedding_bag(*[to_dev(a) for a in (w, idx, off)], False, mode, False, to_dev(psw))
    # results 1..3 are bookkeeping whose content is kernel-specific (CUDA and CPU differ too):
    # the bag output must match, the others must be defined tensors on the device
    torch.testing.assert_close(dev[0].cpu(), cpu[0])
    assert all(t is not None and t.device.type == "xirang" for t in dev)
    # and the gradient through the module path
    wc = w.clone().requires_grad_()
    wd = w.to("xirang").requires_grad_()
    F.embedding_bag(idx, wc, off, mode=("sum", "mean", "max")[mode], per_sample_weights=psw).sum().backward()
    F.embedding_bag(idx.to("xirang"), wd, off.to("xirang"), mode=("sum", "mean", "max")[mode],
                    per_sample_weights=to_dev(psw)).sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)


@pytest.mark.parametrize("module", [
    lambda: torch.nn.LayerNorm(6), lambda: torch.nn.LayerNorm(6, bias=False),
    lambda: torch.nn.LayerNorm(6, elementwise_affine=False), lambda: torch.nn.GroupNorm(2, 4),
    lambda: torch.nn.BatchNorm1d(4), lambda: torch.nn.Linear(6, 3), lambda: torch.nn.Linear(6, 3, bias=False),
    lambda: torch.nn.Conv1d(4, 2, 3), lambda: torch.nn.Conv1d(4, 2, 3, bias=False), lambda: torch.nn.RMSNorm(6),
], ids=["ln", "ln-nobias", "ln-noaffine", "gn", "bn", "linear", "linear-nobias", "conv", "conv-nobias", "rms"])
@pytest.mark.parametrize("input_grad", [False, True])
def test_module_backward_with_and_without_input_gradient(module, input_grad):
    torch.manual_seed(0)
    m = module().double()
    if not input_grad and not list(m.parameters()):
        pytest.skip("nothing needs a gradient")
    md = copy.deepcopy(m).to("xirang")
    shape = (3, 4, 6) if isinstance(m, (torch.nn.GroupNorm, torch.nn.BatchNorm1d, torch.nn.Conv1d)) else (3, 6)
    x = g(*shape)
    xc, xd = x.clone().requires_grad_(input_grad), x.to("xirang").requires_grad_(input_grad)
    m(xc).pow(2).sum().backward()
    md(xd).pow(2).sum().backward()
    for (n, p), q in zip(m.named_parameters(), md.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=n)
    if input_grad:
        torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_pre_norm_transformer_trains():
    """The layout of GPT-2 and ViT: the first layer norm's input needs no gradient."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, norm_first=True, batch_first=True)
    dev = copy.deepcopy(layer).to("xirang")
    opt_c = torch.optim.SGD(layer.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1)
    x, y = torch.randn(4, 5, 16), torch.randn(4, 5, 16)
    losses = []
    for _ in range(3):
        for m, opt, xx, yy in ((layer, opt_c, x, y), (dev, opt_d, x.to("xirang"), y.to("xirang"))):
            opt.zero_grad()
            loss = F.mse_loss(m(xx), yy)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    cpu_l, dev_l = losses[0::2], losses[1::2]
    assert dev_l[-1] < dev_l[0]
    torch.testing.assert_close(torch.tensor(dev_l), torch.tensor(cpu_l), rtol=1e-4, atol=1e-5)
    for (n, p), q in zip(layer.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5, msg=n)
