"""Programs a PyTorch user runs first: recurrent layers (PyTorch routes a PrivateUse1 device to the
fused cells, which have no CPU kernel), and pickling (multiprocessing queues, libraries that pickle
tensors)."""

import copy
import io
import pickle

import pytest
import torch

import xirang  # noqa: F401


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_recurrent_layers_match_cpu(kind, bias, dtype):
    torch.manual_seed(0)
    cpu = getattr(torch.nn, kind)(5, 4, num_layers=2, bias=bias, batch_first=True, bidirectional=True).to(dtype)
    dev = copy.deepcopy(cpu).to("xirang")
    x = torch.randn(3, 6, 5, dtype=dtype)
    xc, xd = x.clone().requires_grad_(), x.to("xirang").requires_grad_()
    yc, hc = cpu(xc)
    yd, hd = dev(xd)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else {}
    torch.testing.assert_close(yd.cpu(), yc, **tol)
    # a loss of the output and the final state: gradients reach both cell outputs
    last_c = hc[0] if kind == "LSTM" else hc
    last_d = hd[0] if kind == "LSTM" else hd
    (yc.pow(2).sum() + last_c.sum()).backward()
    (yd.pow(2).sum() + last_d.sum()).backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    for (n, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=n, **tol)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_cells_train_like_cpu(cell):
    torch.manual_seed(0)
    cpu = getattr(torch.nn, cell)(3, 2).double()
    dev = copy.deepcopy(cpu).to("xirang")
    x = torch.randn(4, 3, dtype=torch.float64)
    out_c, out_d = cpu(x), dev(x.to("xirang"))
    out_c = out_c[0] if isinstance(out_c, tuple) else out_c
    out_d = out_d[0] if isinstance(out_d, tuple) else out_d
    out_c.sum().backward()
    out_d.sum().backward()
    for (n, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=n)


def test_fused_cells_run_on_the_device_not_the_fallback():
    torch.manual_seed(0)
    xirang.reset_fallback_counts()
    m = torch.nn.LSTM(4, 3).to("xirang")
    m(torch.randn(5, 2, 4, device="xirang"))[0].sum().backward()
    counts = xirang.fallback_counts()
    cells = {k: v for k, v in counts.items() if "thnn" in k}
    assert sorted(cells) == ["_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl"], counts
    assert all(v["native"] > 0 and v["fallback"] == 0 for v in cells.values()), cells


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, device="xirang"),
    lambda: torch.randn(4, 5, device="xirang")[1:, ::2],
    lambda: torch.arange(6, device="xirang").view(2, 3).t(),
    lambda: torch.randn(2, 3, dtype=torch.float16, device="xirang"),
    lambda: torch.zeros(0, device="xirang"),
], ids=["plain", "strided-view", "int-transposed", "half", "empty"])
def test_pickle_round_trip(make):
    t = make()
    back = pickle.loads(pickle.dumps(t))
    assert back.device == t.device and back.dtype == t.dtype and back.shape == t.shape
    assert back.stride() == t.stride()
    torch.testing.assert_close(back.cpu(), t.cpu())
    # the copy is its own storage: writing it leaves the original alone
    if t.numel():
        back.add_(1)
        assert not torch.equal(back.cpu(), t.cpu())


def test_pickle_of_views_behaves_as_on_the_cpu():
    """pickle (unlike torch.save) serializes each tensor's storage on its own, on the CPU too."""
    for dev in ("cpu", "xirang"):
        base = torch.arange(4.0, device=dev)
        a, b = pickle.loads(pickle.dumps((base, base[1:])))
        a[1] = 42.0
        assert b.cpu().tolist() == [1.0, 2.0, 3.0], dev


def test_pickle_of_a_model_and_a_second_device():
    m = torch.nn.Linear(3, 2).to("xirang:1")
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.weight.device == torch.device("xirang:1")
    torch.testing.assert_close(m2.weight.cpu(), m.weight.cpu())
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    assert sd["weight"].device == torch.device("xirang:1")


class _Tied(torch.nn.Module):
    """An input embedding shared with the output layer, as GPT-2 and BERT's heads tie them."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 4)
        self.head = torch.nn.Linear(4, 11, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.emb(ids)))


def test_module_to_keeps_tied_parameters_tied():
    """PyTorch makes a Parameter per module when it moves one to a PrivateUse1 device
    (pytorch/pytorch#116255); `import xirang` keeps the ties, so the model trained is the model built."""
    torch.manual_seed(0)
    m = _Tied()
    ids = torch.tensor([[1, 4, 7], [2, 9, 0]])
    losses = {}
    for dev in ("cpu", "xirang"):
        d = copy.deepcopy(m).to(dev)
        assert d.head.weight is d.emb.weight, dev
        assert len(list(d.parameters())) == 1
        opt = torch.optim.SGD(d.parameters(), lr=0.5)
        out = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(d(ids.to(dev)).flatten(0, 1), ids.flatten().to(dev))
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[dev] = out
    assert losses["xirang"] == pytest.approx(losses["cpu"], rel=1e-5)
    # back to the CPU, and between devices, the tie holds too
    d = copy.deepcopy(m).to("xirang").to("xirang:1").cpu()
    assert d.head.weight is d.emb.weight
